// `relay retention` (part of `relay start`): at start and then periodically,
//   1. destroys message bodies past their seven-day retention (their content keys);
//   2. deletes the outbox copies (.eml and .envelope.json: body and BCC in clear) of every email
//      whose content can no longer be read, in this process's outbox directory;
//   3. prunes operational data past its documented period (domain/retention.ts):
//      webhook deliveries, left-behind work items, sessions, invitations, rate-limit slots.
// Safe to run in several processes at once: each deletion is one document or one deleteWhere.
// One pass at a time in a process; a pass that fails (onError) is retried with a capped,
// doubling back-off (RETRY_AFTER_FAILURE), and the interval resumes after one that succeeds.
// A pass still running after PASS_STUCK_AFTER_MS (a store call that never settles) makes the
// part stuck, so /readyz and relay_part_ready say so (apps/liveness.ts) long before the day
// RelayRetentionNotRun waits. Not "work waiting without progress" after the parts' 60 s: one
// step over a large backlog may take minutes, and that must not take `relay start`'s API out
// of rotation.
import type { DeliveryPolicy } from '../../domain/email/delivery.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import type { Liveness } from '../../infra/liveness.ts';
import { Backoff, type RetryPolicy } from '../../infra/retry.ts';
import { shredExpiredContent } from '../services/content-vault.ts';
import { pruneOperationalData, type PruneReport } from '../services/operational-retention.ts';
import { deleteUnreadableOutboxCopies } from '../services/outbox.ts';

/** After a failed pass: retried after 1 s, doubling up to 5 min (never later than the next regular pass). */
export const RETRY_AFTER_FAILURE: RetryPolicy = { initialDelayMs: 1_000, maxDelayMs: 5 * 60_000 };

/** A pass running this long is stuck: passes take seconds, and one over a large backlog minutes. */
export const PASS_STUCK_AFTER_MS = 60 * 60_000;

export interface RetentionOptions {
  documents: DocumentStore;
  events: EventStore;
  /** The process's delivery policy: work items are re-derived with it. */
  deliveryPolicy: DeliveryPolicy;
  now: () => Date;
  /** The interval between passes that succeed (default 10 min). */
  everyMs?: number;
  /** The back-off of the retries after a failed pass (default RETRY_AFTER_FAILURE); reset by a pass that succeeds. */
  retry?: RetryPolicy;
  /** The outbox transport's directory (RELAY_DATA_DIR/outbox): the files the sender wrote in this data directory. */
  outboxDir?: string;
  onShredded?: (count: number) => void;
  /** How many emails' outbox files the pass deleted. */
  onOutboxDeleted?: (count: number) => void;
  onPruned?: (report: PruneReport) => void;
  /** After every pass that completed all its steps. */
  onSwept?: (at: Date) => void;
  onError?: (error: Error) => void;
  /** The part's liveness: told when a pass has run longer than stuckAfterMs (the caller tells it the rest). */
  liveness?: Liveness;
  /** Default PASS_STUCK_AFTER_MS. */
  stuckAfterMs?: number;
}

export async function startRetention(options: RetentionOptions): Promise<{ stop(): Promise<void> }> {
  const everyMs = options.everyMs ?? 10 * 60_000;
  // A failed pass is retried no later than the next regular pass would have come.
  const backoff = new Backoff(options.retry ?? RETRY_AFTER_FAILURE);
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> = Promise.resolve();
  const stuckAfterMs = options.stuckAfterMs ?? PASS_STUCK_AFTER_MS;
  /** Date.now() when the pass that runs began; null between passes. */
  let passSince: number | null = null;
  options.liveness?.reportStuck(() => {
    const runFor = passSince === null ? 0 : Date.now() - passSince;
    return runFor < stuckAfterMs ? null : `a retention pass has run for ${Math.round(runFor / 1000)} s (since ${new Date(passSince!).toISOString()}) and not ended`;
  });
  const pass = async () => {
    const now = options.now();
    // Each step runs whether or not its callback is given (`f?.(await step())` would skip the step).
    const shredded = await shredExpiredContent(options.documents, now);
    options.onShredded?.(shredded);
    if (options.outboxDir !== undefined) {
      const deleted = await deleteUnreadableOutboxCopies(options.documents, options.outboxDir, now);
      options.onOutboxDeleted?.(deleted);
    }
    const pruned = await pruneOperationalData(options, now);
    options.onPruned?.(pruned);
    options.onSwept?.(now);
  };
  // One pass at a time: the next is scheduled only once this one has ended, after the interval
  // (it succeeded) or the back-off's next delay (it failed).
  const sweep = async (): Promise<void> => {
    let delay: number;
    passSince = Date.now();
    try {
      await pass();
      backoff.reset();
      delay = everyMs;
    } catch (error) {
      delay = Math.min(backoff.next(), everyMs);
      options.onError?.(error as Error);
    } finally {
      passSince = null;
    }
    if (stopped) return;
    timer = setTimeout(() => {
      timer = null;
      running = sweep();
    }, delay);
    timer.unref();
  };
  running = sweep();
  await running;
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = null;
      await running;
    },
  };
}
