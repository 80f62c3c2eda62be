// The periodic re-check of DNS-verified sending domains (the rule: domain/domain-recheck.ts),
// run by the retention part (apps/relay.ts) on a schedule of its own, beside the retention
// passes: DNS lookups that time out must not hold up the destruction of message bodies, and a
// failing re-check must not make the part, or `relay start`'s /readyz, look broken.
//
// A pass reads the due domains a page at a time (only the fields that say whether one is due)
// and re-checks at most `concurrency` of them at once, each with its few lookups in parallel,
// so many domains neither hold the event loop nor flood the resolver. Every domain is claimed
// and stored by compare-and-set (management/domains.ts recheckDomain): passes in several
// processes share the work, each domain checked once per interval.
//
// A pass also looks for the new record of every pending DKIM key rotation not checked in the last
// few minutes (domain/dkim-rotation.ts rotationCheckDue), and completes the rotation once DNS
// shows it: a customer who publishes the record need not come back to ask for a verify.
import type { RecheckPolicy } from '../../domain/domain-recheck.ts';
import type { RelayConfig } from '../../infra/config.ts';
import type { DnsLookup } from '../../infra/ports/dns.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { Backoff, type RetryPolicy } from '../../infra/retry.ts';
import { rotationCheckDue } from '../../domain/dkim-rotation.ts';
import type { SendingDomain } from '../../domain/management.ts';
import { checkPendingRotation, domainsOf, recheckDomain, type RecheckResult, type RotationCheckResult } from './management/domains.ts';
import { mapLimited } from './map-limited.ts';

/** Domains read per page of a pass. */
export const RECHECK_PAGE_SIZE = 100;
/** Domains whose DNS is asked at once (each asks for its three or four records in parallel). */
export const RECHECK_CONCURRENCY = 8;
/** How often a pass looks for due domains (more often when the interval is shorter): a domain is due at most this late. */
export const RECHECK_PASS_EVERY_MS = 10 * 60_000;
/** After a failed pass (a store that does not answer): retried after 1 s, doubling up to 5 min. */
export const RECHECK_RETRY: RetryPolicy = { initialDelayMs: 1_000, maxDelayMs: 5 * 60_000 };

export interface RecheckPassOptions {
  documents: DocumentStore;
  config: Pick<RelayConfig, 'mailHost'>;
  dns: DnsLookup;
  policy: RecheckPolicy;
  now: () => Date;
  pageSize?: number;
  concurrency?: number;
  /** Told each domain re-checked, with what the re-check found and changed. */
  onRechecked?: (result: RecheckResult) => void;
  /** Told each pending DKIM rotation whose new record was looked for, completed or not. */
  onRotationChecked?: (result: RotationCheckResult) => void;
  /** Ends the pass between domains (the part stopping). */
  signal?: AbortSignal;
}

export interface RecheckPassReport {
  /** Domains this pass re-checked (those another process had claimed are not counted). */
  rechecked: number;
  /** Of them, the domains it failed. */
  failed: number;
  /** Pending DKIM rotations this pass completed. */
  rotationsCompleted: number;
}

/** One pass: re-checks every domain due now. Throws the first failure (a store error) once the re-checks under way have ended. */
export async function recheckDomains(options: RecheckPassOptions): Promise<RecheckPassReport> {
  const { documents, policy, signal } = options;
  const pageSize = options.pageSize ?? RECHECK_PAGE_SIZE;
  const report: RecheckPassReport = { rechecked: 0, failed: 0, rotationsCompleted: 0 };
  let after: { _id: string } | undefined;
  while (!signal?.aborted) {
    const now = options.now();
    const page = await domainsOf(documents).find({
      where: { status: 'verified', verifiedBy: 'dns', lastCheckedAt: { lte: new Date(now.getTime() - policy.intervalMs).toISOString() } },
      orderBy: [['_id', 'asc']],
      limit: pageSize,
      ...(after ? { after } : {}),
      fields: ['_id'],
    });
    await mapLimited(page, options.concurrency ?? RECHECK_CONCURRENCY, async ({ _id }) => {
      if (signal?.aborted) return;
      const result = await recheckDomain(documents, options.config, options.dns, _id, policy, options.now());
      if (result === null) return;
      report.rechecked++;
      if (result.outcome.change === 'failed') report.failed++;
      options.onRechecked?.(result);
    });
    if (page.length < pageSize) break;
    after = { _id: page[page.length - 1]._id };
  }
  await checkPendingRotations(options, report);
  return report;
}

async function checkPendingRotations(options: RecheckPassOptions, report: RecheckPassReport): Promise<void> {
  const { documents, signal } = options;
  const pageSize = options.pageSize ?? RECHECK_PAGE_SIZE;
  let after: { _id: string } | undefined;
  while (!signal?.aborted) {
    // Every pending rotation has a start time: a string range finds them, and only them.
    const page: Array<Pick<SendingDomain, '_id' | 'dkimRotation'>> = await domainsOf(documents).find({
      where: { 'dkimRotation.startedAt': { gt: '' } },
      orderBy: [['_id', 'asc']],
      limit: pageSize,
      ...(after ? { after } : {}),
      fields: ['_id', 'dkimRotation'],
    });
    const now = options.now();
    await mapLimited(page.filter((d) => rotationCheckDue(d, now)), options.concurrency ?? RECHECK_CONCURRENCY, async ({ _id }) => {
      if (signal?.aborted) return;
      const result = await checkPendingRotation(documents, options.dns, _id, options.now());
      if (result === null) return;
      if (result.completed) report.rotationsCompleted++;
      options.onRotationChecked?.(result);
    });
    if (page.length < pageSize) break;
    after = { _id: page[page.length - 1]._id };
  }
}

export interface DomainRecheckRunOptions extends Omit<RecheckPassOptions, 'signal'> {
  /** Between passes that succeed; default the interval, at most RECHECK_PASS_EVERY_MS. */
  everyMs?: number;
  retry?: RetryPolicy;
  onPass?: (report: RecheckPassReport) => void;
  onError?: (error: Error) => void;
}

/**
 * Runs a pass now, then one after each interval (a failed one sooner, with a back-off). One pass
 * at a time. Returns at once: the first pass may wait on DNS, which a start must not.
 */
export function startDomainRecheck(options: DomainRecheckRunOptions): { stop(): Promise<void> } {
  const everyMs = options.everyMs ?? Math.min(options.policy.intervalMs, RECHECK_PASS_EVERY_MS);
  const backoff = new Backoff(options.retry ?? RECHECK_RETRY);
  const stopping = new AbortController();
  let timer: NodeJS.Timeout | null = null;
  const pass = async (): Promise<void> => {
    let delay = everyMs;
    try {
      options.onPass?.(await recheckDomains({ ...options, signal: stopping.signal }));
      backoff.reset();
    } catch (error) {
      delay = Math.min(backoff.next(), everyMs);
      options.onError?.(error as Error);
    }
    if (stopping.signal.aborted) return;
    timer = setTimeout(() => {
      timer = null;
      running = pass();
    }, delay);
    timer.unref();
  };
  let running = pass();
  return {
    async stop() {
      stopping.abort();
      if (timer) clearTimeout(timer);
      timer = null;
      await running;
    },
  };
}
