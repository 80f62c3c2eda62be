// The periodic re-check of sending domains DNS once verified (apps/services/domain-recheck.ts
// runs it): which domains are due, and what one re-check does to a domain's status. A domain
// whose records are gone keeps sending DKIM-signed mail that fails alignment, so it must fail in
// the end; but DNS changes take a while to settle and customers move records around, so it fails
// only once every re-check for a grace period found a required record wrong (as Amazon SES
// does, 72 hours). A lookup that failed says nothing about the records (statusAfterCheck), so
// it neither starts, extends nor ends that period; an operator's vouching stands.
import type { DomainStatus, SendingDomain, StoredRecordCheck } from './management.ts';

export interface RecheckPolicy {
  /** A domain is re-checked at most this often (RELAY_DOMAIN_RECHECK_INTERVAL_MS). */
  intervalMs: number;
  /** How long re-checks must have found a required record wrong before the domain fails (RELAY_DOMAIN_RECHECK_GRACE_MS). */
  graceMs: number;
}

export const DEFAULT_RECHECK_POLICY: RecheckPolicy = { intervalMs: 6 * 3_600_000, graceMs: 72 * 3_600_000 };

/**
 * How long a process's claim on a domain's re-check keeps other processes off it: far longer
 * than its lookups take (their timeouts are seconds), so only a claim whose process died lapses.
 */
export const RECHECK_CLAIM_MS = 10 * 60_000;

/**
 * What one re-check found. passed: every required record ok. wrong: a required record missing
 * or not as asked (a conclusive answer). inconclusive: nothing wrong was seen, but some lookup
 * failed (timeout, SERVFAIL).
 */
export type RecheckVerdict = 'passed' | 'wrong' | 'inconclusive';

export function recheckVerdict(checks: ReadonlyArray<Pick<StoredRecordCheck, 'required' | 'status'>>): RecheckVerdict {
  const required = checks.filter((c) => c.required);
  if (required.every((c) => c.status === 'ok')) return 'passed';
  if (required.some((c) => c.status === 'missing' || c.status === 'mismatch')) return 'wrong';
  return 'inconclusive';
}

export type RecheckedFields = Pick<SendingDomain, 'status' | 'verifiedBy' | 'lastCheckedAt' | 'recheckFailingSince' | 'recheckClaimedAt'>;

/** Domains the re-check is for: verified through DNS. An operator vouched for the others, and only an operator takes that back. */
export const isRechecked = (domain: Pick<SendingDomain, 'status' | 'verifiedBy'>): boolean =>
  domain.status === 'verified' && domain.verifiedBy === 'dns';

/** Whether the domain's re-check is due at `now`: last checked an interval ago or more, and no live claim on it. */
export function recheckDue(domain: RecheckedFields, now: Date, policy: RecheckPolicy): boolean {
  if (!isRechecked(domain)) return false;
  const at = now.getTime();
  const claimedAt = domain.recheckClaimedAt ? Date.parse(domain.recheckClaimedAt) : null;
  if (claimedAt !== null && at - claimedAt < RECHECK_CLAIM_MS) return false;
  return domain.lastCheckedAt === null || at - Date.parse(domain.lastCheckedAt) >= policy.intervalMs;
}

/**
 * What a re-check changed. started_failing: the first of a run of wrong re-checks;
 * still_failing: another, within the grace; failed: wrong for the whole grace, the domain is
 * failed; recovered: a passing re-check ended a run of wrong ones; none: nothing to tell.
 */
export type RecheckChange = 'started_failing' | 'still_failing' | 'failed' | 'recovered' | 'none';

export interface RecheckOutcome {
  status: DomainStatus;
  /** Since when every re-check found a required record wrong (the first of them); null while none does. */
  failingSince: string | null;
  change: RecheckChange;
}

/** The domain after a re-check at `at` that found `verdict`. */
export function afterRecheck(
  domain: Pick<SendingDomain, 'status' | 'verifiedBy' | 'recheckFailingSince'>,
  verdict: RecheckVerdict,
  at: Date,
  policy: RecheckPolicy,
): RecheckOutcome {
  const failingSince = domain.recheckFailingSince ?? null;
  if (!isRechecked(domain)) return { status: domain.status, failingSince, change: 'none' };
  if (verdict === 'passed') return { status: 'verified', failingSince: null, change: failingSince === null ? 'none' : 'recovered' };
  if (verdict === 'inconclusive') return { status: 'verified', failingSince, change: 'none' };
  const since = failingSince ?? at.toISOString();
  if (at.getTime() - Date.parse(since) >= policy.graceMs) return { status: 'failed', failingSince: null, change: 'failed' };
  return { status: 'verified', failingSince: since, change: failingSince === null ? 'started_failing' : 'still_failing' };
}
