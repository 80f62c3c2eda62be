// SPF verification follows include: and redirect= (domain/sending-domain.ts): the rule is pure,
// so these tests play the lookups themselves, answering spfLookupsNeeded from a zone until it
// needs nothing more, as infra/dns/verify-domain.ts does against DNS.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { SPF_LOOKUP_LIMIT, evaluateVerification, requiredRecords, spfLookupsNeeded, splitTxtValue } from '../domain/sending-domain.ts';
import type { DnsAnswer, DnsRecord, RecordCheck, SendingDomainSettings } from '../domain/sending-domain.ts';

const KEY = `MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA${'q'.repeat(342)}IDAQAB`;
const MAIL_FROM = 'bounce.example.com';
const RELAY = 'include:spf.relay.test';

const SETTINGS: SendingDomainSettings = {
  domain: 'example.com',
  dkimSelector: 'rr2025',
  dkimPublicKeyBase64: KEY,
  mailFromSubdomain: 'bounce',
  mxHost: 'feedback.relay.test',
  spfInclude: 'spf.relay.test',
};

/** TXT records by name; 'servfail' answers as a failing resolver, an absent name is NXDOMAIN. */
type Zone = Record<string, string[] | 'servfail'>;

function txtAnswer(name: string, zone: Zone): DnsAnswer {
  const held = zone[name];
  if (held === 'servfail') return { name, type: 'TXT', kind: 'error', code: 'ESERVFAIL', message: `queryTxt ESERVFAIL ${name}` };
  if (held === undefined) return { name, type: 'TXT', kind: 'nxdomain' };
  return { name, type: 'TXT', kind: 'answer', txt: held.map((text) => splitTxtValue(text)) };
}

interface Settled {
  check: RecordCheck;
  verified: boolean;
  /** The names spfLookupsNeeded asked for, round by round. */
  rounds: string[][];
}

/** Given the MAIL FROM SPF record `spf` and the records of `zone`, when looked up as far as the rule asks and evaluated. */
function settle(spf: string, zone: Zone = {}, settings: SendingDomainSettings = SETTINGS): Settled {
  const records: DnsRecord[] = requiredRecords(settings);
  const answers: DnsAnswer[] = [
    { name: 'rr2025._domainkey.example.com', type: 'TXT', kind: 'answer', txt: [splitTxtValue(`v=DKIM1; k=rsa; p=${KEY}`)] },
    { name: MAIL_FROM, type: 'MX', kind: 'answer', mx: [{ exchange: 'feedback.relay.test', priority: 10 }] },
    { name: MAIL_FROM, type: 'TXT', kind: 'answer', txt: [[spf]] },
    { name: '_dmarc.example.com', type: 'TXT', kind: 'answer', txt: [['v=DMARC1; p=none;']] },
  ];
  const rounds: string[][] = [];
  for (let needed = spfLookupsNeeded(records, answers); needed.length > 0; needed = spfLookupsNeeded(records, answers)) {
    assert.ok(rounds.length < 50, 'the rule keeps asking');
    assert.ok(needed.every((n) => n.type === 'TXT'));
    rounds.push(needed.map((n) => n.name));
    answers.push(...needed.map((n) => txtAnswer(n.name, zone)));
  }
  const result = evaluateVerification(records, answers);
  return { check: result.checks.find((c) => c.purpose === 'mail_from_spf')!, verified: result.verified, rounds };
}

/** `count` records s1…s<count> of the customer's, none authorising Relay, and their include: terms. */
function others(count: number): { zone: Zone; includes: string } {
  const zone: Zone = {};
  const names = Array.from({ length: count }, (_, i) => `s${i + 1}.customer.example`);
  names.forEach((name, i) => (zone[name] = [`v=spf1 ip4:192.0.2.${i + 1} -all`]));
  return { zone, includes: names.map((name) => `include:${name}`).join(' ') };
}

// ---------------------------------------------------------------------------------------
const reach = suite('SPF: Relay reached through include: and redirect=');

reach('given Relay included by a record the MAIL FROM SPF includes, when verified, then SPF is ok and says through what', () => {
  const { check, verified, rounds } = settle('v=spf1 include:_spf.customer.example ~all', { '_spf.customer.example': [`v=spf1 ${RELAY} ~all`] });
  assert.is(check.status, 'ok', check.message);
  assert.match(check.message, `${RELAY} through include:_spf.customer.example`);
  assert.equal(check.found, ['v=spf1 include:_spf.customer.example ~all'], 'found: what the MAIL FROM name holds');
  assert.equal(rounds, [['_spf.customer.example']]);
  assert.is(verified, true);
});

reach('given Relay two includes deep, behind records that do not match, when verified, then SPF is ok', () => {
  const { check, rounds } = settle('v=spf1 include:_spf.mailer.example include:_spf.customer.example -all', {
    '_spf.mailer.example': ['v=spf1 ip4:198.51.100.0/24 ~all'],
    '_spf.customer.example': ['google-site-verification=abc', 'v=spf1 ip6:2001:db8::/32 include:_nested.customer.example. -all'],
    '_nested.customer.example': [`v=spf1 mx +${RELAY} ?all`],
  });
  assert.is(check.status, 'ok', check.message);
  assert.equal(rounds, [['_spf.mailer.example'], ['_spf.customer.example'], ['_nested.customer.example']]);
});

reach('given Relay reached through redirect= of a record without "all", when verified, then SPF is ok', () => {
  const { check } = settle('v=spf1 ip4:192.0.2.1 redirect=_spf.customer.example', { '_spf.customer.example': [`v=spf1 ${RELAY} -all`] });
  assert.is(check.status, 'ok', check.message);
  assert.match(check.message, 'through redirect=_spf.customer.example');
});

reach('given the MX host mechanism Relay asks for when it has no SPF include, reached through an include, when verified, then SPF is ok', () => {
  const { spfInclude: _unused, ...settings } = SETTINGS;
  const { check } = settle('v=spf1 include:_spf.customer.example ~all', { '_spf.customer.example': ['v=spf1 a:feedback.relay.test ~all'] }, settings);
  assert.is(check.status, 'ok', check.message);
});

reach('given Relay directly in the record, and includes after it, when verified, then nothing more is looked up', () => {
  const { check, rounds } = settle(`v=spf1 ${RELAY} include:_spf.later.example redirect=_spf.other.example`);
  assert.is(check.status, 'ok', check.message);
  assert.equal(rounds, []);
});

reach.run();

// ---------------------------------------------------------------------------------------
const ends = suite('SPF: an "all" or a qualifier ends evaluation before Relay');

ends('given redirect= in a record that has an "all", when verified, then the redirect is ignored and SPF is a mismatch', () => {
  const { check, rounds } = settle('v=spf1 redirect=_spf.customer.example ~all', { '_spf.customer.example': [`v=spf1 ${RELAY} -all`] });
  assert.is(check.status, 'mismatch');
  assert.match(check.message, `does not authorise ${RELAY}`);
  assert.equal(rounds, [], 'the redirect target is never asked for');
});

ends('given an included record whose "all" comes before Relay, when verified, then SPF is a mismatch', () => {
  const { check } = settle('v=spf1 include:_spf.customer.example ~all', { '_spf.customer.example': [`v=spf1 ip4:192.0.2.1 -all ${RELAY}`] });
  assert.is(check.status, 'mismatch');
});

ends('given Relay included under a fail, softfail or neutral qualifier, at the top or nested, when verified, then SPF is a mismatch', () => {
  for (const [spf, nested] of [
    ['v=spf1 ~include:_spf.customer.example -all', `v=spf1 ${RELAY} -all`],
    ['v=spf1 ?include:_spf.customer.example', `v=spf1 ${RELAY}`],
    ['v=spf1 include:_spf.customer.example ~all', `v=spf1 -${RELAY} +all`],
  ]) {
    const { check } = settle(spf, { '_spf.customer.example': [nested] });
    assert.is(check.status, 'mismatch', `${spf} / ${nested}`);
  }
});

ends('given an included record ending in a non-pass "all", then Relay after the include, when verified, then evaluation goes on and SPF is ok', () => {
  const { check } = settle(`v=spf1 include:_spf.customer.example ${RELAY} -all`, { '_spf.customer.example': [`v=spf1 -${RELAY} ~all`] });
  assert.is(check.status, 'ok', check.message);
});

ends('given an included record that passes everyone with "+all" before Relay, when verified, then SPF is a mismatch', () => {
  const { check } = settle(`v=spf1 include:_spf.customer.example ${RELAY} -all`, { '_spf.customer.example': ['v=spf1 +all'] });
  assert.is(check.status, 'mismatch');
});

ends.run();

// ---------------------------------------------------------------------------------------
const permerror = suite('SPF: what receivers answer with a permanent error');

permerror(`given ${SPF_LOOKUP_LIMIT} lookups with Relay's include the last, when verified, then SPF is ok; one more, a mismatch`, () => {
  const within = others(SPF_LOOKUP_LIMIT - 1);
  assert.is(settle(`v=spf1 ${within.includes} ${RELAY} ~all`, within.zone).check.status, 'ok');
  const over = others(SPF_LOOKUP_LIMIT);
  const { check, rounds } = settle(`v=spf1 ${over.includes} ${RELAY} ~all`, over.zone);
  assert.is(check.status, 'mismatch');
  assert.match(check.message, `does not authorise ${RELAY}: evaluating it takes more than 10 DNS lookups`);
  assert.match(check.message, 'permanent error');
  assert.is(rounds.length, SPF_LOOKUP_LIMIT);
});

permerror('given a, mx, ptr and exists terms in an included record, when counting lookups, then each counts as one', () => {
  const terms = 'a mx ptr exists:%{i}.spf.customer.example a:one.customer.example mx:two.customer.example a/24 mx:three.customer.example//64';
  const zone = (extra: string): Zone => ({ '_spf.customer.example': [`v=spf1 ${terms}${extra} ip4:192.0.2.1 -all`] });
  assert.is(settle(`v=spf1 include:_spf.customer.example ${RELAY} ~all`, zone('')).check.status, 'ok', '1 + 8 + 1');
  const { check } = settle(`v=spf1 include:_spf.customer.example ${RELAY} ~all`, zone(' a:four.customer.example mx:five.customer.example'));
  assert.is(check.status, 'mismatch', '1 + 10 + 1');
  assert.match(check.message, 'more than 10 DNS lookups');
});

permerror('given a chain of includes longer than the limit, when looked up round by round, then the rule stops asking after the limit', () => {
  const zone: Zone = {};
  for (let i = 1; i <= 30; i++) zone[`c${i}.customer.example`] = [`v=spf1 include:c${i + 1}.customer.example -all`];
  const { check, rounds } = settle('v=spf1 include:c1.customer.example ~all', zone);
  assert.is(check.status, 'mismatch');
  assert.match(check.message, 'more than 10 DNS lookups');
  assert.is(rounds.length, SPF_LOOKUP_LIMIT);
});

permerror('given includes and redirects that loop, when verified, then SPF is a mismatch that says so', () => {
  const cases: Array<[string, Zone]> = [
    ['v=spf1 include:_a.customer.example ~all', { '_a.customer.example': ['v=spf1 include:_b.customer.example -all'], '_b.customer.example': ['v=spf1 include:_a.customer.example -all'] }],
    ['v=spf1 redirect=_a.customer.example', { '_a.customer.example': ['v=spf1 ip4:192.0.2.1 redirect=_a.customer.example'] }],
    ['v=spf1 include:_a.customer.example ~all', { '_a.customer.example': [`v=spf1 include:${MAIL_FROM} -all`] }],
  ];
  for (const [spf, zone] of cases) {
    const { check } = settle(spf, zone);
    assert.is(check.status, 'mismatch', spf);
    assert.match(check.message, 'loops back', spf);
  }
});

permerror('given the same record included twice side by side, when verified, then that is no loop', () => {
  const zone: Zone = { '_a.customer.example': ['v=spf1 ip4:192.0.2.1 -all'] };
  assert.is(settle(`v=spf1 include:_a.customer.example include:_a.customer.example ${RELAY} ~all`, zone).check.status, 'ok');
});

permerror('given an included name with several SPF records, or none, or two redirect=, when verified, then SPF is a mismatch naming it', () => {
  const cases: Array<[string, Zone, string]> = [
    ['v=spf1 include:_spf.customer.example ~all', { '_spf.customer.example': [`v=spf1 ${RELAY} -all`, 'v=spf1 -all'] }, '2 SPF records at _spf.customer.example'],
    ['v=spf1 include:_spf.customer.example ~all', { '_spf.customer.example': ['verification=abc'] }, 'no SPF record at _spf.customer.example'],
    ['v=spf1 include:_spf.customer.example ~all', {}, 'no SPF record at _spf.customer.example'],
    ['v=spf1 redirect=_spf.customer.example', {}, 'redirect=_spf.customer.example: no SPF record'],
    ['v=spf1 redirect=_a.customer.example redirect=_b.customer.example', {}, '2 redirect= modifiers'],
    ['v=spf1 include: ~all', {}, 'include: names no domain'],
  ];
  for (const [spf, zone, says] of cases) {
    const { check, verified } = settle(spf, zone);
    assert.is(check.status, 'mismatch', spf);
    assert.match(check.message, says, spf);
    assert.match(check.message, MAIL_FROM, spf);
    assert.match(check.message, 'receivers answer with a permanent error', spf);
    assert.is(verified, false);
  }
});

permerror('given an include with a macro, when verified, then SPF is a mismatch that asks for Relay without it, not a permanent error', () => {
  const { check, rounds } = settle('v=spf1 include:%{d}._spf.customer.example ~all');
  assert.is(check.status, 'mismatch');
  assert.match(check.message, `include:%{d}._spf.customer.example uses a macro, which verification cannot follow; authorise ${RELAY} without it`);
  assert.not.match(check.message, 'permanent error');
  assert.equal(rounds, []);
});

permerror.run();

// ---------------------------------------------------------------------------------------
const syntax = suite('SPF: a syntax error anywhere in a record evaluated is a permanent error (RFC 7208 4.6)');

syntax('given a MAIL FROM SPF record with a syntax error before, after Relay or after "all", when verified, then SPF is a mismatch naming the term, and nothing is looked up', () => {
  const cases: Array<[string, string]> = [
    ['ipv4:192.0.2.1', 'is no SPF mechanism or modifier'],
    ['ip4:192.0.2.300', 'does not name an IPv4 address'],
    ['ip4:192.0.2.01', 'does not name an IPv4 address'],
    ['ip4:192.0.2', 'does not name an IPv4 address'],
    ['ip4:192.0.2.0/33', 'has an invalid IPv4 prefix length'],
    ['ip4', 'names no network'],
    ['ip6:2001:db8::g', 'does not name an IPv6 address'],
    ['ip6:2001:db8::1::2', 'does not name an IPv6 address'],
    ['ip6:1:2:3:4:5:6:7:8:9', 'does not name an IPv6 address'],
    ['ip6:fe80::1%eth0', 'does not name an IPv6 address'],
    ['ip6:2001:db8::/129', 'has an invalid IPv6 prefix length'],
    ['a:mail.customer.example/024', 'has an invalid IPv4 prefix length'],
    ['mx//129', 'has an invalid IPv6 prefix length'],
    ['a:customer', 'names no valid domain'],
    ['mx:mail.customer.123', 'names no valid domain'],
    ['a/', 'is malformed'],
    ['all:customer.example', 'is malformed'],
    ['ptr/24', 'is malformed'],
    ['exists:', 'names no domain'],
    ['include:%{x}.customer.example', 'has a macro with an unknown letter'],
    ['exists:%{c}.customer.example', 'has a macro with an unknown letter'],
    ['include:%{d.customer.example', 'has an unterminated macro'],
    ['include:50%.customer.example', 'has a "%" that begins no macro'],
    ['redirect=', 'names no domain'],
    ['+note=x', 'is no SPF mechanism or modifier'],
    ['1note=x', 'is no SPF mechanism or modifier'],
    ['note=%{d', 'has an unterminated macro'],
  ];
  for (const [term, why] of cases) {
    for (const spf of [`v=spf1 ${term} ${RELAY} ~all`, `v=spf1 ${RELAY} ${term} ~all`, `v=spf1 ${RELAY} -all ${term}`]) {
      const { check, verified, rounds } = settle(spf);
      assert.is(check.status, 'mismatch', spf);
      assert.match(check.message, `does not authorise ${RELAY}: syntax error: ${term} ${why}, which receivers answer with a permanent error`, spf);
      assert.is(verified, false, spf);
      assert.equal(rounds, [], spf);
    }
  }
});

syntax('given an included or redirected-to record with a syntax error, when verified, then SPF is a mismatch naming it', () => {
  for (const spf of ['v=spf1 include:_spf.customer.example ~all', 'v=spf1 redirect=_spf.customer.example']) {
    const { check, rounds } = settle(spf, { '_spf.customer.example': [`v=spf1 ${RELAY} ip4:192.0.2.1/40 -all`] });
    assert.is(check.status, 'mismatch', spf);
    assert.match(check.message, 'syntax error: ip4:192.0.2.1/40 has an invalid IPv4 prefix length', spf);
    assert.equal(rounds, [['_spf.customer.example']], spf);
  }
});

syntax('given exp= twice, when verified, then SPF is a mismatch saying so', () => {
  const { check } = settle(`v=spf1 ${RELAY} exp=a.customer.example exp=b.customer.example ~all`);
  assert.is(check.status, 'mismatch');
  assert.match(check.message, '2 exp= modifiers in one record');
});

syntax('given every form of term the syntax allows, in any case, when verified, then SPF is ok; the same record with one prefix length too long, a mismatch', () => {
  const terms = [
    'ip4:192.0.2.0/24', 'ip4:0.0.0.0/0', '-IP4:198.51.100.7', 'ip6:2001:db8::/32', 'ip6:::ffff:192.0.2.1', 'ip6:1:2:3:4:5:6:7:8/128', 'ip6:::', 'ip6:2001:DB8::1',
    'a', 'a/24', 'a:mail.customer.example//64', 'MX:mx.customer.example./24//64', 'ptr', '?ptr:customer.example',
    'exists:%{ir}.%{v}._spf.%{D2}.customer.example', '~a:%{l1r-}.customer.example', 'exp=explain._spf.%{d}', 'x.note-1_=%{c}%%%_%-', 'empty=',
  ];
  const { check, rounds } = settle(`v=spf1 ${terms.join(' ')} ${RELAY} -all`);
  assert.is(check.status, 'ok', check.message);
  assert.equal(rounds, []);
  const broken = settle(`v=spf1 ${terms.join(' ')} ip6:2001:db8::/130 ${RELAY} -all`).check;
  assert.is(broken.status, 'mismatch');
  assert.match(broken.message, 'syntax error: ip6:2001:db8::/130 has an invalid IPv6 prefix length');
});

syntax.run();

// ---------------------------------------------------------------------------------------
const lookups = suite('SPF: lookups that fail or were not made');

lookups('given an included name whose lookup fails, when verified, then SPF is an error naming it, not a mismatch', () => {
  const { check, verified } = settle('v=spf1 include:_spf.customer.example ~all', { '_spf.customer.example': 'servfail' });
  assert.is(check.status, 'error');
  assert.match(check.message, 'TXT _spf.customer.example');
  assert.match(check.message, 'ESERVFAIL');
  assert.is(verified, false);
});

lookups('given an included name never looked up, when evaluated, then SPF is an error, never ok or a mismatch', () => {
  const answers: DnsAnswer[] = [{ name: MAIL_FROM, type: 'TXT', kind: 'answer', txt: [['v=spf1 include:_spf.customer.example ~all']] }];
  const records = requiredRecords(SETTINGS);
  assert.equal(spfLookupsNeeded(records, answers), [{ name: '_spf.customer.example', type: 'TXT' }]);
  const check = evaluateVerification(records, answers).checks.find((c) => c.purpose === 'mail_from_spf')!;
  assert.is(check.status, 'error');
  assert.match(check.message, '_spf.customer.example');
});

lookups.run();
