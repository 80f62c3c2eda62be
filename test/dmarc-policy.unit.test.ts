// The DMARC check as receivers read the record (domain/sending-domain.ts, RFC 7489 6.3, 6.4,
// 6.6.3): a record whose p= is missing or invalid is no policy (p=none when it asks for
// aggregate reports), tag names and policy values match in any case, and a domain without a
// record of its own has its organizational domain's (sp=, else p=). The rule is pure: these
// tests give it the answers, and the organizational domain as infra/dns gives it (the public
// suffix list), here the last two labels.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { dmarcLookupsNeeded, evaluateVerification, requiredRecords, splitTxtValue } from '../domain/sending-domain.ts';
import type { DnsAnswer, RecordCheck, VerificationOptions } from '../domain/sending-domain.ts';

const KEY = `MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA${'q'.repeat(342)}IDAQAB`;
const ORGANIZATION = 'example.com';
const OPTIONS: VerificationOptions = { organizationalDomain: (domain) => domain.split('.').slice(-2).join('.') };

const recordsOf = (domain: string) => requiredRecords({ domain, dkimSelector: 'rr2025', dkimPublicKeyBase64: KEY, mailFromSubdomain: 'bounce', mxHost: 'feedback.relay.test' });

/** The required records of `domain` as published, and what DNS answers at its DMARC name and at `more`. */
function answersFor(domain: string, dmarc: DnsAnswer | string[], more: DnsAnswer[] = []): DnsAnswer[] {
  const name = `_dmarc.${domain}`;
  return [
    { name: `rr2025._domainkey.${domain}`, type: 'TXT', kind: 'answer', txt: [splitTxtValue(`v=DKIM1; k=rsa; p=${KEY}`)] },
    { name: `bounce.${domain}`, type: 'MX', kind: 'answer', mx: [{ exchange: 'feedback.relay.test', priority: 10 }] },
    { name: `bounce.${domain}`, type: 'TXT', kind: 'answer', txt: [['v=spf1 a:feedback.relay.test -all']] },
    Array.isArray(dmarc) ? { name, type: 'TXT', kind: 'answer', txt: dmarc.map((text) => [text]) } : dmarc,
    ...more,
  ];
}

function dmarcCheck(domain: string, answers: DnsAnswer[], options: VerificationOptions = OPTIONS): { check: RecordCheck; verified: boolean } {
  const result = evaluateVerification(recordsOf(domain), answers, options);
  return { check: result.checks.find((c) => c.purpose === 'dmarc')!, verified: result.verified };
}

// ---------------------------------------------------------------------------------------
const policy = suite('DMARC: the policy a record holds');

policy('given a record with p= none, quarantine or reject, in any case, and tag names in any case, when verified, then DMARC is ok naming the policy', () => {
  const cases: Array<[string, string]> = [
    ['v=DMARC1; p=none;', 'p=none'],
    ['v=DMARC1;p=quarantine', 'p=quarantine'],
    ['v = DMARC1 ; p = reject ; rua=mailto:d@example.com', 'p=reject'],
    ['V=DMARC1; P=Reject', 'p=reject'],
    ['v=DMARC1; rua=mailto:d@example.com; p=quarantine; pct=50', 'p=quarantine'],
  ];
  for (const [record, says] of cases) {
    const { check } = dmarcCheck(ORGANIZATION, answersFor(ORGANIZATION, [record]));
    assert.is(check.status, 'ok', `${record}: ${check.message}`);
    assert.match(check.message, `DMARC policy ${says} published at _dmarc.${ORGANIZATION}`, record);
  }
});

policy('given a record without a valid p= (missing, misspelt) or with an invalid sp=, when verified, then DMARC is a mismatch saying receivers apply no policy, and the domain stays verified', () => {
  const cases: Array<[string, string]> = [
    ['v=DMARC1; p=rejct', 'has p=rejct, which is no policy (none, quarantine or reject)'],
    ['v=DMARC1; p=; adkim=s', 'has p=, which is no policy'],
    ['v=DMARC1; pct=100; adkim=s', 'has no p= tag'],
    ['v=DMARC1; p=reject; sp=block', 'has sp=block, which is no policy'],
  ];
  for (const [record, says] of cases) {
    const { check, verified } = dmarcCheck(ORGANIZATION, answersFor(ORGANIZATION, [record]));
    assert.is(check.status, 'mismatch', record);
    assert.match(check.message, `DMARC record at _dmarc.${ORGANIZATION} ${says}`, record);
    assert.match(check.message, 'receivers apply no DMARC policy with it', record);
    assert.match(check.message, 'Recommended: v=DMARC1; p=none;', record);
    assert.is(verified, true, record);
  }
});

policy('given a record without a valid p= that asks for aggregate reports with a valid rua=, when verified, then DMARC is ok as p=none, saying why', () => {
  for (const record of ['v=DMARC1; p=rejct; rua=mailto:dmarc@example.com', 'v=DMARC1; rua=d@example.com, mailto:dmarc@example.com!10m']) {
    const { check } = dmarcCheck(ORGANIZATION, answersFor(ORGANIZATION, [record]));
    assert.is(check.status, 'ok', `${record}: ${check.message}`);
    assert.match(check.message, 'receivers apply it as p=none', record);
  }
  const { check } = dmarcCheck(ORGANIZATION, answersFor(ORGANIZATION, ['v=DMARC1; p=rejct; rua=dmarc@example.com']));
  assert.is(check.status, 'mismatch', 'an address is no reporting URI');
});

policy('given a record with a tag given twice, when verified, then DMARC is a mismatch naming the fault', () => {
  const { check } = dmarcCheck(ORGANIZATION, answersFor(ORGANIZATION, ['v=DMARC1; p=none; p=reject']));
  assert.is(check.status, 'mismatch');
  assert.match(check.message, 'is malformed: p= is given twice');
});

policy('given a record with a part that is no tag=value beside a valid policy, when verified, then the part is skipped and the policy applies (RFC 7489 6.3)', () => {
  const { check } = dmarcCheck(ORGANIZATION, answersFor(ORGANIZATION, ['v=DMARC1; p=reject; strict']));
  assert.is(check.status, 'ok');
});

policy('given TXT records whose version is not exactly "DMARC1" (v=dmarc1, DMARC2, text after it), when verified, then there is no DMARC record', () => {
  for (const record of ['v=dmarc1; p=reject', 'v=DMARC2; p=reject', 'v=DMARC1 p=reject', 'p=reject; v=DMARC1']) {
    const { check } = dmarcCheck(ORGANIZATION, answersFor(ORGANIZATION, [record]));
    assert.is(check.status, 'missing', record);
    assert.match(check.message, `No DMARC policy at _dmarc.${ORGANIZATION}`, record);
  }
});

policy.run();

// ---------------------------------------------------------------------------------------
const inherited = suite('DMARC: a subdomain without a record of its own has its organizational domain\'s (RFC 7489 6.6.3)');

const SUBDOMAIN = `news.${ORGANIZATION}`;
const OWN = `_dmarc.${SUBDOMAIN}`;
const THEIRS = `_dmarc.${ORGANIZATION}`;
const theirs = (records: string[]): DnsAnswer => ({ name: THEIRS, type: 'TXT', kind: 'answer', txt: records.map((text) => [text]) });

inherited('given no record at the subdomain\'s name (NXDOMAIN, no TXT, TXT that is no DMARC record), when looked up, then the organizational domain\'s record is asked for, once', () => {
  const owns: DnsAnswer[] = [
    { name: OWN, type: 'TXT', kind: 'nxdomain' },
    { name: OWN, type: 'TXT', kind: 'nodata' },
    { name: OWN, type: 'TXT', kind: 'answer', txt: [['google-site-verification=abc']] },
  ];
  for (const own of owns) {
    const answers = answersFor(SUBDOMAIN, own);
    assert.equal(dmarcLookupsNeeded(recordsOf(SUBDOMAIN), answers, OPTIONS), [{ name: THEIRS, type: 'TXT' }], own.kind);
    assert.equal(dmarcLookupsNeeded(recordsOf(SUBDOMAIN), [...answers, theirs([])], OPTIONS), [], 'asked already');
  }
});

inherited('given a record of its own, a failed lookup of it, a domain that is its own organizational domain, or no public suffix list, then nothing more is asked', () => {
  assert.equal(dmarcLookupsNeeded(recordsOf(SUBDOMAIN), answersFor(SUBDOMAIN, ['v=DMARC1; p=rejct']), OPTIONS), [], 'its own record applies, valid or not');
  assert.equal(dmarcLookupsNeeded(recordsOf(SUBDOMAIN), answersFor(SUBDOMAIN, { name: OWN, type: 'TXT', kind: 'error', code: 'ETIMEOUT', message: 'queryTxt ETIMEOUT' }), OPTIONS), []);
  assert.equal(dmarcLookupsNeeded(recordsOf(ORGANIZATION), answersFor(ORGANIZATION, { name: THEIRS, type: 'TXT', kind: 'nxdomain' }), OPTIONS), []);
  assert.equal(dmarcLookupsNeeded(recordsOf(SUBDOMAIN), answersFor(SUBDOMAIN, { name: OWN, type: 'TXT', kind: 'nxdomain' }), {}), []);
});

inherited('given the organizational domain\'s policy, when verified, then DMARC is ok naming it (sp= before p=) and where it comes from, recommending nothing at the subdomain', () => {
  const cases: Array<[string, string]> = [
    ['v=DMARC1; p=reject', 'p=reject'],
    ['v=DMARC1; p=quarantine; sp=reject; rua=mailto:dmarc@example.com', 'sp=reject'],
    ['v=DMARC1; p=reject; sp=none', 'sp=none'],
  ];
  for (const [record, says] of cases) {
    const { check, verified } = dmarcCheck(SUBDOMAIN, answersFor(SUBDOMAIN, { name: OWN, type: 'TXT', kind: 'nxdomain' }, [theirs([record])]));
    assert.is(check.status, 'ok', `${record}: ${check.message}`);
    assert.match(check.message, `DMARC policy ${says} inherited from the organizational domain's ${THEIRS}`, record);
    assert.match(check.message, `Nothing to publish at ${OWN}`, record);
    assert.not.match(check.message, 'Recommended', record);
    assert.not.match(check.message, 'does not exist', record);
    assert.is(verified, true);
  }
});

inherited('given the organizational domain\'s record without a valid policy, or none, or several, or a failed lookup of it, when verified, then DMARC says so', () => {
  const own: DnsAnswer = { name: OWN, type: 'TXT', kind: 'nodata' };
  const cases: Array<[DnsAnswer, string, string]> = [
    [theirs(['v=DMARC1; p=rejct']), 'mismatch', `the record at the organizational domain's ${THEIRS}, which receivers would apply instead, has p=rejct`],
    [theirs(['v=DMARC1; sp=block; p=reject; rua=mailto:d@example.com']), 'ok', 'DMARC policy p=none inherited'],
    [{ name: THEIRS, type: 'TXT', kind: 'nxdomain' }, 'missing', `No DMARC policy at ${OWN}, nor at the organizational domain's ${THEIRS} (recommended, not required): v=DMARC1; p=none;`],
    [theirs(['v=DMARC1; p=reject', 'v=DMARC1; p=none']), 'missing', `2 at the organizational domain's ${THEIRS}; receivers ignore them all`],
    [{ name: THEIRS, type: 'TXT', kind: 'error', code: 'ESERVFAIL', message: 'queryTxt ESERVFAIL' }, 'error', `looking up TXT ${THEIRS} (the organizational domain's) failed (ESERVFAIL)`],
  ];
  for (const [answer, status, says] of cases) {
    const { check, verified } = dmarcCheck(SUBDOMAIN, answersFor(SUBDOMAIN, own, [answer]));
    assert.is(check.status, status, check.message);
    assert.match(check.message, says);
    assert.is(verified, true, 'DMARC is recommended only');
  }
  const { check } = dmarcCheck(SUBDOMAIN, answersFor(SUBDOMAIN, own));
  assert.is(check.status, 'error', 'the organizational domain\'s record not looked up');
});

inherited('given several DMARC records at the subdomain\'s own name, when verified, then receivers ignore them and the organizational domain is not asked', () => {
  const answers = answersFor(SUBDOMAIN, ['v=DMARC1; p=none', 'v=DMARC1; p=reject']);
  assert.equal(dmarcLookupsNeeded(recordsOf(SUBDOMAIN), answers, OPTIONS), []);
  assert.is(dmarcCheck(SUBDOMAIN, answers).check.status, 'missing');
});

inherited.run();
