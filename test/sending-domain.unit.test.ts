import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  evaluateVerification,
  normalizeDomainName,
  requiredRecords,
  SendingDomainInputError,
  splitTxtValue,
} from '../domain/sending-domain.ts';
import type { DnsAnswer, DnsRecord, RecordCheck, RecordPurpose, SendingDomainSettings } from '../domain/sending-domain.ts';

// Same length as the p= of a real 2048-bit key (392 base64 chars), so the record needs two TXT strings.
const KEY = `MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA${'q'.repeat(342)}IDAQAB`;
const OTHER_KEY = `MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA${'z'.repeat(342)}IDAQAB`;

const SETTINGS: SendingDomainSettings = {
  domain: 'example.com',
  dkimSelector: 'rr2025',
  dkimPublicKeyBase64: KEY,
  mailFromSubdomain: 'bounce',
  mxHost: 'feedback.relay.test',
  spfInclude: 'spf.relay.test',
};

function expectInputError(run: () => unknown, field: string, messagePart?: RegExp): void {
  try {
    run();
  } catch (error) {
    assert.instance(error, SendingDomainInputError);
    assert.is((error as SendingDomainInputError).field, field);
    if (messagePart) assert.match((error as Error).message, messagePart);
    return;
  }
  assert.unreachable(`expected a SendingDomainInputError on ${field}`);
}

// ---------------------------------------------------------------------------------------
const normalize = suite('normalizeDomainName');

normalize('given mixed case, spaces and a trailing dot, when normalized, then it is the canonical name', () => {
  assert.is(normalizeDomainName('  Mail.Example.COM. '), 'mail.example.com');
});

normalize('given a Unicode name, when normalized, then it is converted to punycode', () => {
  assert.is(normalizeDomainName('Bücher.Example'), 'xn--bcher-kva.example');
  assert.is(normalizeDomainName('例え.テスト'), 'xn--r8jz45g.xn--zckzah');
});

normalize('given punycode labels, when normalized, then they are accepted as they are', () => {
  assert.is(normalizeDomainName('xn--bcher-kva.example'), 'xn--bcher-kva.example');
});

normalize('given labels of exactly 63 chars and a 253-char name, when normalized, then they are accepted', () => {
  const label63 = 'a'.repeat(63);
  assert.is(normalizeDomainName(`${label63}.com`), `${label63}.com`);
  const name253 = [label63, label63, label63, 'b'.repeat(57), 'com'].join('.');
  assert.is(name253.length, 253);
  assert.is(normalizeDomainName(name253), name253);
});

normalize('given malformed names, when normalized, then each is rejected on the domain field', () => {
  const label63 = 'a'.repeat(63);
  const cases: Array<[string, RegExp]> = [
    ['', /empty/],
    ['   ', /empty/],
    ['localhost', /two labels/],
    [`${'a'.repeat(64)}.com`, /longer than 63/],
    [[label63, label63, label63, 'b'.repeat(58), 'com'].join('.'), /longer than 253/],
    ['-start.example.com', /hyphens/],
    ['end-.example.com', /hyphens/],
    ['under_score.example.com', /letters, digits/],
    ['a..example.com', /empty label/],
    ['.example.com', /empty label/],
    ['example.com..', /empty label/],
    ['exa mple.com', /./],
    ['192.168.0.1', /IP address/],
    ['xn--zz.com', /punycode/],
  ];
  for (const [input, message] of cases) expectInputError(() => normalizeDomainName(input), 'domain', message);
});

normalize('given a field name, when the name is invalid, then the error names that field', () => {
  expectInputError(() => normalizeDomainName('nope', 'mxHost'), 'mxHost', /mxHost/);
});

// ---------------------------------------------------------------------------------------
const records = suite('requiredRecords');

records('given full settings, when listing records, then DKIM, MAIL FROM MX and SPF are required and DMARC is recommended', () => {
  assert.equal(requiredRecords(SETTINGS), [
    { name: 'rr2025._domainkey.example.com', type: 'TXT', value: `v=DKIM1; k=rsa; p=${KEY}`, purpose: 'dkim', required: true },
    { name: 'bounce.example.com', type: 'MX', value: 'feedback.relay.test', priority: 10, purpose: 'mail_from_mx', required: true },
    { name: 'bounce.example.com', type: 'TXT', value: 'v=spf1 include:spf.relay.test ~all', purpose: 'mail_from_spf', required: true },
    { name: '_dmarc.example.com', type: 'TXT', value: 'v=DMARC1; p=none;', purpose: 'dmarc', required: false },
  ]);
});

records('given no SPF include, when listing records, then SPF authorises the MX host, with the configured "all"', () => {
  const { spfInclude: _unused, ...rest } = SETTINGS;
  const spf = requiredRecords({ ...rest, spfAll: '-all' }).find((r) => r.purpose === 'mail_from_spf');
  assert.is(spf?.value, 'v=spf1 a:feedback.relay.test -all');
});

records('given un-normalized inputs, when listing records, then names come out canonical', () => {
  const list = requiredRecords({
    ...SETTINGS,
    domain: 'Example.COM.',
    dkimSelector: ' RR2025 ',
    mailFromSubdomain: 'Mail.Bounce',
    mxHost: 'Feedback.Relay.Test.',
    dkimPublicKeyBase64: `${KEY.slice(0, 100)}\n ${KEY.slice(100)}`,
  });
  assert.equal(list.map((r) => r.name), ['rr2025._domainkey.example.com', 'mail.bounce.example.com', 'mail.bounce.example.com', '_dmarc.example.com']);
  assert.is(list[0].value, `v=DKIM1; k=rsa; p=${KEY}`);
  assert.is(list[1].value, 'feedback.relay.test');
});

records('given invalid inputs, when listing records, then the error names the offending field', () => {
  expectInputError(() => requiredRecords({ ...SETTINGS, domain: 'nodots' }), 'domain');
  expectInputError(() => requiredRecords({ ...SETTINGS, dkimSelector: 'bad_selector' }), 'dkimSelector');
  expectInputError(() => requiredRecords({ ...SETTINGS, dkimPublicKeyBase64: 'not base64!' }), 'dkimPublicKeyBase64');
  expectInputError(() => requiredRecords({ ...SETTINGS, dkimPublicKeyBase64: 'abc' }), 'dkimPublicKeyBase64');
  expectInputError(() => requiredRecords({ ...SETTINGS, mailFromSubdomain: '' }), 'mailFromSubdomain');
  expectInputError(() => requiredRecords({ ...SETTINGS, mailFromSubdomain: '-x' }), 'mailFromSubdomain');
  expectInputError(() => requiredRecords({ ...SETTINGS, mxHost: '10.0.0.1' }), 'mxHost');
  expectInputError(() => requiredRecords({ ...SETTINGS, spfInclude: 'spf' }), 'spfInclude');
});

records('given a long value, when split for TXT, then chunks are at most 255 chars and join back to it', () => {
  const value = requiredRecords(SETTINGS)[0].value;
  const chunks = splitTxtValue(value);
  assert.equal(chunks.map((c) => c.length), [255, value.length - 255]);
  assert.is(chunks.join(''), value);
  assert.equal(splitTxtValue(''), ['']);
});

// ---------------------------------------------------------------------------------------
const verify = suite('evaluateVerification');

const RECORDS: DnsRecord[] = requiredRecords(SETTINGS);
const DKIM_NAME = 'rr2025._domainkey.example.com';
const MAIL_FROM = 'bounce.example.com';
const DMARC_NAME = '_dmarc.example.com';

/** Answers of a correctly configured domain; a test replaces the one it is about. */
function healthy(): DnsAnswer[] {
  return [
    { name: DKIM_NAME, type: 'TXT', kind: 'answer', txt: [splitTxtValue(`v=DKIM1; k=rsa; p=${KEY}`)] },
    { name: MAIL_FROM, type: 'MX', kind: 'answer', mx: [{ exchange: 'feedback.relay.test', priority: 10 }] },
    { name: MAIL_FROM, type: 'TXT', kind: 'answer', txt: [['v=spf1 include:spf.relay.test ~all']] },
    { name: DMARC_NAME, type: 'TXT', kind: 'answer', txt: [['v=DMARC1; p=none;']] },
  ];
}

function replacing(answer: DnsAnswer): DnsAnswer[] {
  return healthy().map((a) => (a.name === answer.name && a.type === answer.type ? answer : a));
}

function check(answers: DnsAnswer[], purpose: RecordPurpose): { verified: boolean; check: RecordCheck } {
  const result = evaluateVerification(RECORDS, answers);
  const found = result.checks.find((c) => c.purpose === purpose);
  if (!found) throw new Error(`no ${purpose} check`);
  return { verified: result.verified, check: found };
}

verify('given every record published, when evaluated, then the domain is verified and each check is ok', () => {
  const result = evaluateVerification(RECORDS, healthy());
  assert.is(result.verified, true);
  assert.equal(result.checks.map((c) => [c.purpose, c.status]), [['dkim', 'ok'], ['mail_from_mx', 'ok'], ['mail_from_spf', 'ok'], ['dmarc', 'ok']]);
  assert.equal(result.checks[0].found, [`v=DKIM1; k=rsa; p=${KEY}`]);
  assert.equal(result.checks[1].expected, '10 feedback.relay.test');
  assert.equal(result.checks[1].found, ['10 feedback.relay.test']);
});

verify('given the DKIM key split into TXT strings at odd places with spaces, when evaluated, then the strings are joined and it is ok', () => {
  const value = `k=rsa;  v=DKIM1 ; p=${KEY.slice(0, 120)} ${KEY.slice(120)}`;
  const strings = [value.slice(0, 100), value.slice(100, 355), value.slice(355)];
  const { check: dkim, verified } = check(replacing({ name: DKIM_NAME, type: 'TXT', kind: 'answer', txt: [strings] }), 'dkim');
  assert.is(dkim.status, 'ok');
  assert.is(verified, true);
  assert.equal(dkim.found, [value]);
});

verify('given a DKIM record without v= and k=, when evaluated, then their RFC defaults apply and it is ok', () => {
  assert.is(check(replacing({ name: DKIM_NAME, type: 'TXT', kind: 'answer', txt: [splitTxtValue(`p=${KEY}`)] }), 'dkim').check.status, 'ok');
});

verify('given DKIM answers that do not hold the key, when evaluated, then DKIM is a mismatch and the domain unverified', () => {
  const cases: Array<[string[][], RegExp]> = [
    [[splitTxtValue(`v=DKIM1; k=rsa; p=${OTHER_KEY}`)], /expected public key/],
    [[splitTxtValue(`v=DKIM1; k=ed25519; p=${KEY}`)], /expected public key/],
    [[['v=DKIM1; k=rsa; p=']], /revoked/],
    [[['hello world']], /not a valid DKIM/],
    [[splitTxtValue(`v=DKIM1; p=${KEY}`), splitTxtValue(`v=DKIM1; p=${OTHER_KEY}`)], /other key/],
  ];
  for (const [txt, message] of cases) {
    const { check: dkim, verified } = check(replacing({ name: DKIM_NAME, type: 'TXT', kind: 'answer', txt }), 'dkim');
    assert.is(dkim.status, 'mismatch', String(txt));
    assert.match(dkim.message, message);
    assert.is(verified, false);
  }
});

verify('given the key in a record whose h= or s= makes receivers ignore it for Relay\'s rsa-sha256 mail, when evaluated, then DKIM is a mismatch naming the tag', () => {
  const cases: Array<[string, RegExp]> = [
    [`v=DKIM1; k=rsa; h=sha1; p=${KEY}`, /limits the key to h=sha1; Relay signs rsa-sha256/],
    [`v=DKIM1; k=rsa; s=tlsrpt; p=${KEY}`, /limits the key to s=tlsrpt/],
    [`v=DKIM1; k=rsa; h=sha256; s=tlsrpt:other; p=${KEY}`, /s=tlsrpt:other/],
  ];
  for (const [value, message] of cases) {
    const { check: dkim, verified } = check(replacing({ name: DKIM_NAME, type: 'TXT', kind: 'answer', txt: [splitTxtValue(value)] }), 'dkim');
    assert.is(dkim.status, 'mismatch', value);
    assert.match(dkim.message, message);
    assert.is(verified, false);
  }
  // Beside a usable copy of the key, a restricted copy still fails the signatures of verifiers that pick it.
  const both = [splitTxtValue(`v=DKIM1; p=${KEY}`), splitTxtValue(`v=DKIM1; h=sha1; p=${KEY}`)];
  assert.is(check(replacing({ name: DKIM_NAME, type: 'TXT', kind: 'answer', txt: both }), 'dkim').check.status, 'mismatch');
});

verify('given the key in a record whose h= lists sha256 and s= lists email or *, in any case and spacing, when evaluated, then it is ok', () => {
  for (const tags of ['h=sha256', 'h = SHA1 : Sha256 ', 's=email', 's=*', 's= TLSRPT : Email', 'h=sha1:sha256; s=*']) {
    const { check: dkim, verified } = check(replacing({ name: DKIM_NAME, type: 'TXT', kind: 'answer', txt: [splitTxtValue(`v=DKIM1; k=rsa; ${tags}; p=${KEY}`)] }), 'dkim');
    assert.is(dkim.status, 'ok', `${tags}: ${dkim.message}`);
    assert.is(verified, true);
  }
});

verify('given no DKIM record (NXDOMAIN or no TXT), when evaluated, then DKIM is missing', () => {
  for (const kind of ['nxdomain', 'nodata'] as const) {
    const { check: dkim, verified } = check(replacing({ name: DKIM_NAME, type: 'TXT', kind }), 'dkim');
    assert.is(dkim.status, 'missing');
    assert.equal(dkim.found, []);
    assert.match(dkim.message, DKIM_NAME);
    assert.is(verified, false);
  }
});

verify('given an MX with a trailing dot and other case, when evaluated, then it matches', () => {
  const answer: DnsAnswer = { name: MAIL_FROM, type: 'MX', kind: 'answer', mx: [{ exchange: 'other.mx.test', priority: 5 }, { exchange: 'FeedBack.Relay.TEST.', priority: 20 }] };
  const { check: mx, verified } = check(replacing(answer), 'mail_from_mx');
  assert.is(mx.status, 'ok');
  assert.is(verified, true);
  assert.equal(mx.found, ['5 other.mx.test', '20 feedback.relay.test']);
});

verify('given an MX to another host, when evaluated, then MX is a mismatch', () => {
  const { check: mx, verified } = check(replacing({ name: MAIL_FROM, type: 'MX', kind: 'answer', mx: [{ exchange: 'mx.elsewhere.test', priority: 10 }] }), 'mail_from_mx');
  assert.is(mx.status, 'mismatch');
  assert.is(verified, false);
});

verify('given no MX at the MAIL FROM name, when evaluated, then MX is missing', () => {
  const { check: mx, verified } = check(replacing({ name: MAIL_FROM, type: 'MX', kind: 'nodata' }), 'mail_from_mx');
  assert.is(mx.status, 'missing');
  assert.is(verified, false);
});

verify('given SPF variants that authorise the include, when evaluated, then SPF is ok', () => {
  for (const spf of ['V=SPF1 +include:SPF.relay.test -all', 'v=spf1 ip4:192.0.2.1 include:spf.relay.test. ?all', 'v=spf1 include:spf.relay.test']) {
    const { check: s } = check(replacing({ name: MAIL_FROM, type: 'TXT', kind: 'answer', txt: [['google-site-verification=abc'], [spf]] }), 'mail_from_spf');
    assert.is(s.status, 'ok', spf);
  }
});

verify('given SPF that does not authorise the include, when evaluated, then SPF is a mismatch', () => {
  const other: DnsAnswer = { name: 'spf.other.test', type: 'TXT', kind: 'answer', txt: [['v=spf1 ip4:198.51.100.0/24 -all']] };
  for (const spf of ['v=spf1 include:spf.other.test ~all', 'v=spf1 -all include:spf.relay.test', 'v=spf1 ~include:spf.relay.test -all']) {
    const { check: s, verified } = check([...replacing({ name: MAIL_FROM, type: 'TXT', kind: 'answer', txt: [[spf]] }), other], 'mail_from_spf');
    assert.is(s.status, 'mismatch', spf);
    assert.is(verified, false);
  }
});

verify('given two SPF records at the MAIL FROM name, when evaluated, then SPF is a mismatch even if one is right', () => {
  const { check: s, verified } = check(replacing({ name: MAIL_FROM, type: 'TXT', kind: 'answer', txt: [['v=spf1 include:spf.relay.test ~all'], ['v=spf1 a -all']] }), 'mail_from_spf');
  assert.is(s.status, 'mismatch');
  assert.match(s.message, /2 SPF records/);
  assert.equal(s.found, ['v=spf1 include:spf.relay.test ~all', 'v=spf1 a -all']);
  assert.is(verified, false);
});

verify('given TXT records but none SPF, or none at all, when evaluated, then SPF is missing', () => {
  const cases: DnsAnswer[] = [
    { name: MAIL_FROM, type: 'TXT', kind: 'answer', txt: [['v=spf10 include:spf.relay.test']] },
    { name: MAIL_FROM, type: 'TXT', kind: 'nodata' },
  ];
  for (const answer of cases) assert.is(check(replacing(answer), 'mail_from_spf').check.status, 'missing');
});

verify('given no DMARC record, when evaluated, then DMARC is missing but the domain is still verified', () => {
  const { check: dmarc, verified } = check(replacing({ name: DMARC_NAME, type: 'TXT', kind: 'nxdomain' }), 'dmarc');
  assert.is(dmarc.status, 'missing');
  assert.is(dmarc.required, false);
  assert.match(dmarc.message, /v=DMARC1; p=none;/);
  assert.is(verified, true);
});

verify('given a stricter DMARC policy than recommended, when evaluated, then DMARC is ok', () => {
  assert.is(check(replacing({ name: DMARC_NAME, type: 'TXT', kind: 'answer', txt: [['v=DMARC1; p=reject; rua=mailto:d@example.com']] }), 'dmarc').check.status, 'ok');
});

verify('given a lookup error, when evaluated, then that check is error and only a required one blocks', () => {
  const failedSpf = check(replacing({ name: MAIL_FROM, type: 'TXT', kind: 'error', code: 'ETIMEOUT', message: 'queryTxt ETIMEOUT' }), 'mail_from_spf');
  assert.is(failedSpf.check.status, 'error');
  assert.match(failedSpf.check.message, /ETIMEOUT/);
  assert.is(failedSpf.verified, false);
  const failedDmarc = check(replacing({ name: DMARC_NAME, type: 'TXT', kind: 'error', code: 'ESERVFAIL', message: 'queryTxt ESERVFAIL' }), 'dmarc');
  assert.is(failedDmarc.check.status, 'error');
  assert.is(failedDmarc.verified, true);
});

verify('given answers named with other case and a trailing dot, when evaluated, then they are matched to the records', () => {
  const answers = healthy().map((a) => ({ ...a, name: `${a.name.toUpperCase()}.` }));
  assert.is(evaluateVerification(RECORDS, answers).verified, true);
});

verify('given no answer at all for a record, when evaluated, then it is an error rather than ok', () => {
  const result = evaluateVerification(RECORDS, healthy().filter((a) => a.type !== 'MX'));
  assert.is(result.checks.find((c) => c.purpose === 'mail_from_mx')?.status, 'error');
  assert.is(result.verified, false);
});

normalize.run();
records.run();
verify.run();
