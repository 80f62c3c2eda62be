// SPF verification follows include: and redirect=, and counts the void lookups of the a, mx and
// exists terms before Relay's mechanism (domain/sending-domain.ts): the rule is pure, so these
// tests play the lookups themselves, answering spfLookupsNeeded from a zone until it needs
// nothing more, as infra/dns/verify-domain.ts does against DNS.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { SPF_LOOKUP_LIMIT, evaluateVerification, requiredRecords, spfLookupsNeeded, splitTxtValue } from '../domain/sending-domain.ts';
import type { DnsAnswer, DnsQuestion, DnsRecord, RecordCheck, SendingDomainSettings } from '../domain/sending-domain.ts';

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

/**
 * TXT records by name; 'servfail' answers every question as a failing resolver. A TXT question
 * at an absent name is NXDOMAIN. A, AAAA and MX questions (the a, mx and exists terms') find a
 * record at every name but those the zone says are 'gone' (NXDOMAIN), 'servfail', or, with
 * 'ipv6-only', an A question (NODATA).
 */
type Zone = Record<string, string[] | 'servfail' | 'gone' | 'ipv6-only'>;

function answer(question: DnsQuestion, zone: Zone): DnsAnswer {
  const { name, type } = question;
  const held = zone[name];
  if (held === 'servfail') return { name, type, kind: 'error', code: 'ESERVFAIL', message: `query${type} ESERVFAIL ${name}` };
  if (held === 'gone') return { name, type, kind: 'nxdomain' };
  switch (type) {
    case 'TXT':
      return Array.isArray(held) ? { name, type, kind: 'answer', txt: held.map((text) => splitTxtValue(text)) } : { name, type, kind: 'nxdomain' };
    case 'MX':
      return { name, type, kind: 'answer', mx: [{ exchange: `mail.${name}`, priority: 10 }] };
    case 'A':
      return held === 'ipv6-only' ? { name, type, kind: 'nodata' } : { name, type, kind: 'answer', addresses: ['198.51.100.9'] };
    case 'AAAA':
      return { name, type, kind: 'answer', addresses: ['2001:db8::9'] };
  }
}

/** A question as the rounds show it: the name for TXT, else type and name. */
const shown = (q: DnsQuestion) => (q.type === 'TXT' ? q.name : `${q.type} ${q.name}`);

interface Settled {
  check: RecordCheck;
  verified: boolean;
  /** The questions spfLookupsNeeded asked, round by round (`shown`). */
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
    rounds.push(needed.map(shown));
    answers.push(...needed.map((n) => answer(n, zone)));
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
  assert.equal(rounds, [['_spf.mailer.example'], ['_spf.customer.example'], ['_nested.customer.example'], ['MX _nested.customer.example']], 'the mx before Relay, for the void lookup limit');
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
  assert.equal(rounds, [[`A ${MAIL_FROM}`, `AAAA ${MAIL_FROM}`, 'A mail.customer.example', 'AAAA mail.customer.example', 'MX mx.customer.example']], 'the names of the a and mx terms; never one with a macro');
  const broken = settle(`v=spf1 ${terms.join(' ')} ip6:2001:db8::/130 ${RELAY} -all`).check;
  assert.is(broken.status, 'mismatch');
  assert.match(broken.message, 'syntax error: ip6:2001:db8::/130 has an invalid IPv6 prefix length');
});

syntax.run();

// ---------------------------------------------------------------------------------------
const voids = suite('SPF: more than two void lookups before Relay are a permanent error (RFC 7208 4.6.4)');

const GONE: Zone = { 'old-crm.customer.example': 'gone', 'old-mail.customer.example': 'gone', 'old-desk.customer.example': 'gone' };
const STALE = 'a:old-crm.customer.example mx:old-mail.customer.example exists:old-desk.customer.example';

voids('given three a, mx and exists terms naming gone hosts before Relay, when verified, then SPF is a mismatch naming them, asked in one round', () => {
  const { check, verified, rounds } = settle(`v=spf1 ${STALE} ${RELAY} ~all`, GONE);
  assert.is(check.status, 'mismatch');
  assert.match(check.message, `does not authorise ${RELAY}: evaluating it makes more than 2 void DNS lookups (names without records: ${STALE.split(' ').join(', ')})`);
  assert.match(check.message, 'permanent error');
  assert.is(verified, false);
  assert.equal(rounds, [['A old-crm.customer.example', 'AAAA old-crm.customer.example', 'MX old-mail.customer.example', 'A old-desk.customer.example']]);
});

voids('given two void lookups, or three with the third after Relay or after an included record\'s "all", when verified, then SPF is ok', () => {
  const cases = [
    'v=spf1 a:old-crm.customer.example mx:old-mail.customer.example include:spf.relay.test ~all',
    `v=spf1 a:old-crm.customer.example mx:old-mail.customer.example ${RELAY} exists:old-desk.customer.example ~all`,
    `v=spf1 include:_spf.customer.example ${RELAY} ~all`,
  ];
  const zone: Zone = { ...GONE, '_spf.customer.example': [`v=spf1 ip4:192.0.2.1 ${STALE.split(' ')[0]} -all ${STALE}`] };
  for (const spf of cases) assert.is(settle(spf, zone).check.status, 'ok', spf);
});

voids('given void lookups split between an included record and the MAIL FROM one, when verified, then they add up', () => {
  const zone: Zone = { ...GONE, '_spf.customer.example': ['v=spf1 ip4:192.0.2.0/24 a:old-crm.customer.example mx:old-mail.customer.example -all'] };
  const { check, rounds } = settle(`v=spf1 include:_spf.customer.example exists:old-desk.customer.example ${RELAY} ~all`, zone);
  assert.is(check.status, 'mismatch');
  assert.match(check.message, 'more than 2 void DNS lookups');
  assert.equal(rounds, [['_spf.customer.example'], ['A old-crm.customer.example', 'AAAA old-crm.customer.example', 'MX old-mail.customer.example', 'A old-desk.customer.example']]);
});

voids('given a and mx terms without a domain, when verified, then they ask about the domain of the record they stand in', () => {
  const zone: Zone = { '_spf.customer.example': ['v=spf1 a mx -all'] };
  const { check, rounds } = settle(`v=spf1 a include:_spf.customer.example ${RELAY} ~all`, zone);
  assert.is(check.status, 'ok', check.message);
  assert.equal(rounds, [[`A ${MAIL_FROM}`, `AAAA ${MAIL_FROM}`, '_spf.customer.example'], ['A _spf.customer.example', 'AAAA _spf.customer.example', 'MX _spf.customer.example']]);
});

voids('given a host with only IPv6 addresses, when its a term is evaluated, then it is no void lookup; its exists term (A only) is one', () => {
  const zone: Zone = { ...GONE, 'v6.customer.example': 'ipv6-only' };
  assert.is(settle(`v=spf1 a:v6.customer.example a:old-crm.customer.example mx:old-mail.customer.example ${RELAY} ~all`, zone).check.status, 'ok');
  assert.is(settle(`v=spf1 exists:v6.customer.example a:old-crm.customer.example mx:old-mail.customer.example ${RELAY} ~all`, zone).check.status, 'mismatch');
});

voids('given a host lookup that fails before Relay, when verified, then SPF is an error naming it (receivers answer a temporary error)', () => {
  const { check, verified } = settle(`v=spf1 mx:broken.customer.example ${RELAY} ~all`, { 'broken.customer.example': 'servfail' });
  assert.is(check.status, 'error');
  assert.match(check.message, `Looking up MX broken.customer.example (for mx:broken.customer.example in the SPF of ${MAIL_FROM}) failed (ESERVFAIL)`);
  assert.is(verified, false);
});

voids('given records that name hosts at every level of a chain of includes, when looked up, then each round asks for a record and the hosts before it, within the limit', () => {
  const zone: Zone = { 'h4.customer.example': 'gone' };
  for (let i = 1; i <= 4; i++) zone[`c${i}.customer.example`] = [`v=spf1 a:h${i}.customer.example ${i < 4 ? `include:c${i + 1}.customer.example ` : ''}-all`];
  const { check, rounds } = settle(`v=spf1 include:c1.customer.example ${RELAY} ~all`, zone);
  assert.is(check.status, 'ok', check.message);
  assert.equal(rounds, [
    ['c1.customer.example'],
    ['A h1.customer.example', 'AAAA h1.customer.example', 'c2.customer.example'],
    ['A h2.customer.example', 'AAAA h2.customer.example', 'c3.customer.example'],
    ['A h3.customer.example', 'AAAA h3.customer.example', 'c4.customer.example'],
    ['A h4.customer.example', 'AAAA h4.customer.example'],
  ]);
  assert.ok(rounds.length <= SPF_LOOKUP_LIMIT);
});

voids.run();

// ---------------------------------------------------------------------------------------
const mx = suite('SPF: mx at the MAIL FROM name authorises the mail host Relay asks for (RFC 7208 5.4)');

/** Settings without an SPF include: Relay asks for a:<mail host>, the MAIL FROM MX's host. */
const { spfInclude: _none, ...MAIL_HOST_SETTINGS } = SETTINGS;
const MAIL_HOST = 'a:feedback.relay.test';

mx('given mx or mx:<MAIL FROM domain> with a pass qualifier, the MAIL FROM MX being the mail host, when verified, then SPF is ok and says why', () => {
  for (const spf of ['v=spf1 mx -all', 'v=spf1 +MX ~all', `v=spf1 ip4:192.0.2.1 mx:${MAIL_FROM}. -all`, 'v=spf1 mx/24//64 -all']) {
    const { check, verified, rounds } = settle(spf, {}, MAIL_HOST_SETTINGS);
    assert.is(check.status, 'ok', `${spf}: ${check.message}`);
    assert.match(check.message, `authorises ${MAIL_HOST} through `, spf);
    assert.match(check.message, `(the MX of ${MAIL_FROM} is feedback.relay.test)`, spf);
    assert.is(verified, true, spf);
    assert.equal(rounds, [], spf);
  }
});

mx('given mx:<MAIL FROM domain> in an included record, when verified, then it authorises the mail host too; a bare mx there names the included domain\'s MX', () => {
  assert.is(settle('v=spf1 include:_spf.customer.example -all', { '_spf.customer.example': [`v=spf1 mx:${MAIL_FROM} -all`] }, MAIL_HOST_SETTINGS).check.status, 'ok');
  const { check } = settle('v=spf1 include:_spf.customer.example -all', { '_spf.customer.example': ['v=spf1 mx -all'] }, MAIL_HOST_SETTINGS);
  assert.is(check.status, 'mismatch');
  assert.match(check.message, `does not authorise ${MAIL_HOST}`);
});

mx('given mx with a qualifier other than pass, or after "all", when verified, then SPF is a mismatch', () => {
  for (const spf of ['v=spf1 ~mx -all', 'v=spf1 -mx', 'v=spf1 ?all mx']) {
    const { check } = settle(spf, {}, MAIL_HOST_SETTINGS);
    assert.is(check.status, 'mismatch', spf);
  }
});

mx('given mx at a MAIL FROM name whose MX is another host, or an SPF include Relay sends through, when verified, then mx does not stand for Relay', () => {
  const records = requiredRecords(MAIL_HOST_SETTINGS);
  const answers: DnsAnswer[] = [
    { name: MAIL_FROM, type: 'MX', kind: 'answer', mx: [{ exchange: 'mx.elsewhere.example', priority: 10 }] },
    { name: MAIL_FROM, type: 'TXT', kind: 'answer', txt: [['v=spf1 mx -all']] },
  ];
  const elsewhere = evaluateVerification(records, answers).checks.find((c) => c.purpose === 'mail_from_spf')!;
  assert.is(elsewhere.status, 'mismatch', elsewhere.message);
  const { check } = settle('v=spf1 mx -all');
  assert.is(check.status, 'mismatch', 'the sending addresses are those of include:spf.relay.test, not the MX host\'s');
  assert.match(check.message, `does not authorise ${RELAY}`);
});

mx.run();

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
