// Given/when/then tests of the re-check rule for verified sending domains
// (domain/domain-recheck.ts): when a re-check is due, what a re-check found, and when a domain
// whose records are wrong is failed.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { afterRecheck, RECHECK_CLAIM_MS, recheckDue, recheckVerdict, type RecheckedFields, type RecheckPolicy } from '../domain/domain-recheck.ts';
import type { StoredRecordCheck } from '../domain/management.ts';

const HOUR = 3_600_000;
const POLICY: RecheckPolicy = { intervalMs: 6 * HOUR, graceMs: 72 * HOUR };
const T0 = new Date('2026-03-01T00:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const iso = (ms: number) => at(ms).toISOString();

const dnsVerified = (overrides: Partial<RecheckedFields> = {}): RecheckedFields => ({
  status: 'verified', verifiedBy: 'dns', lastCheckedAt: iso(0), recheckFailingSince: null, recheckClaimedAt: null, ...overrides,
});

type Status = StoredRecordCheck['status'];
const checks = (dkim: Status, mx: Status, spf: Status, dmarc: Status = 'missing') => [
  { required: true, status: dkim }, { required: true, status: mx }, { required: true, status: spf }, { required: false, status: dmarc },
];

// ---------------------------------------------------------------------------------------
const verdicts = suite('what a re-check found');

verdicts('given every required record ok (DMARC, recommended only, missing), then passed', () => {
  assert.is(recheckVerdict(checks('ok', 'ok', 'ok')), 'passed');
});

verdicts('given a required record missing or mismatched, then wrong, even when another lookup failed', () => {
  assert.is(recheckVerdict(checks('missing', 'ok', 'ok', 'ok')), 'wrong');
  assert.is(recheckVerdict(checks('ok', 'mismatch', 'ok', 'ok')), 'wrong');
  assert.is(recheckVerdict(checks('error', 'ok', 'missing', 'ok')), 'wrong');
});

verdicts('given no record wrong but a lookup failed, then inconclusive', () => {
  assert.is(recheckVerdict(checks('error', 'ok', 'ok', 'ok')), 'inconclusive');
  assert.is(recheckVerdict(checks('error', 'error', 'error', 'error')), 'inconclusive');
});

verdicts.run();

// ---------------------------------------------------------------------------------------
const due = suite('when a re-check is due');

due('given a DNS-verified domain checked an interval ago or more, then due; checked less than that ago, then not', () => {
  assert.is(recheckDue(dnsVerified(), at(6 * HOUR), POLICY), true);
  assert.is(recheckDue(dnsVerified(), at(6 * HOUR - 1), POLICY), false);
  assert.is(recheckDue(dnsVerified({ lastCheckedAt: null }), at(0), POLICY), true);
});

due('given a domain an operator vouched for, or one not verified, then never due', () => {
  assert.is(recheckDue(dnsVerified({ verifiedBy: 'operator' }), at(100 * HOUR), POLICY), false);
  assert.is(recheckDue(dnsVerified({ status: 'failed', verifiedBy: null }), at(100 * HOUR), POLICY), false);
  assert.is(recheckDue(dnsVerified({ status: 'pending', verifiedBy: null }), at(100 * HOUR), POLICY), false);
});

due('given a re-check another process claimed, then not due until its claim lapses', () => {
  const claimed = dnsVerified({ recheckClaimedAt: iso(7 * HOUR) });
  assert.is(recheckDue(claimed, at(7 * HOUR + RECHECK_CLAIM_MS - 1), POLICY), false);
  assert.is(recheckDue(claimed, at(7 * HOUR + RECHECK_CLAIM_MS), POLICY), true);
});

due.run();

// ---------------------------------------------------------------------------------------
const rule = suite('what a re-check does to the domain');

rule('given a verified domain, when a re-check finds a record wrong, then it stays verified and starts failing from then', () => {
  assert.equal(afterRecheck(dnsVerified(), 'wrong', at(6 * HOUR), POLICY), { status: 'verified', failingSince: iso(6 * HOUR), change: 'started_failing' });
});

rule('given it has failed its re-checks for less than the grace, when one finds a record wrong again, then it stays verified, failing since the first', () => {
  const failing = dnsVerified({ recheckFailingSince: iso(6 * HOUR) });
  assert.equal(afterRecheck(failing, 'wrong', at(6 * HOUR + POLICY.graceMs - 1), POLICY), { status: 'verified', failingSince: iso(6 * HOUR), change: 'still_failing' });
});

rule('given it has failed its re-checks for the whole grace, when one finds a record wrong again, then it is failed', () => {
  const failing = dnsVerified({ recheckFailingSince: iso(6 * HOUR) });
  assert.equal(afterRecheck(failing, 'wrong', at(6 * HOUR + POLICY.graceMs), POLICY), { status: 'failed', failingSince: null, change: 'failed' });
});

rule('given it has failed its re-checks, when one passes, then the run of failures ends: a later failure starts the grace again', () => {
  const failing = dnsVerified({ recheckFailingSince: iso(6 * HOUR) });
  assert.equal(afterRecheck(failing, 'passed', at(12 * HOUR), POLICY), { status: 'verified', failingSince: null, change: 'recovered' });
  assert.equal(afterRecheck(dnsVerified(), 'wrong', at(80 * HOUR), POLICY).status, 'verified');
});

rule('given a passing re-check of a domain that was not failing, then nothing changes', () => {
  assert.equal(afterRecheck(dnsVerified(), 'passed', at(6 * HOUR), POLICY), { status: 'verified', failingSince: null, change: 'none' });
});

rule('given lookups that failed, then nothing changes: no failing starts, and one under way neither ends nor fails the domain', () => {
  assert.equal(afterRecheck(dnsVerified(), 'inconclusive', at(6 * HOUR), POLICY), { status: 'verified', failingSince: null, change: 'none' });
  const failing = dnsVerified({ recheckFailingSince: iso(6 * HOUR) });
  assert.equal(afterRecheck(failing, 'inconclusive', at(6 * HOUR + 10 * POLICY.graceMs), POLICY), { status: 'verified', failingSince: iso(6 * HOUR), change: 'none' });
});

rule('given a domain an operator vouched for, when a re-check finds its records wrong for longer than the grace, then it stays verified', () => {
  const vouched = dnsVerified({ verifiedBy: 'operator', recheckFailingSince: iso(0) });
  assert.equal(afterRecheck(vouched, 'wrong', at(10 * POLICY.graceMs), POLICY), { status: 'verified', failingSince: iso(0), change: 'none' });
});

rule('given a grace of 0, when the first re-check finds a record wrong, then it is failed at once', () => {
  assert.equal(afterRecheck(dnsVerified(), 'wrong', at(6 * HOUR), { ...POLICY, graceMs: 0 }).status, 'failed');
});

rule.run();
