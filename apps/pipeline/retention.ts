// `relay retention` (part of `relay start`): at start and then periodically,
//   1. destroys message bodies past their seven-day retention (their content keys);
//   2. deletes the outbox copies (.eml and .envelope.json: body and BCC in clear) of every email
//      whose content can no longer be read, in this process's outbox directory;
//   3. prunes operational data past its documented period (domain/retention.ts):
//      webhook deliveries, left-behind work items, sessions, invitations, rate-limit slots.
// Safe to run in several processes at once: each deletion is one document or one deleteWhere.
import type { DeliveryPolicy } from '../../domain/email/delivery.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import { shredExpiredContent } from '../services/content-vault.ts';
import { pruneOperationalData, type PruneReport } from '../services/operational-retention.ts';
import { deleteUnreadableOutboxCopies } from '../services/outbox.ts';

export interface RetentionOptions {
  documents: DocumentStore;
  events: EventStore;
  /** The process's delivery policy: work items are re-derived with it. */
  deliveryPolicy: DeliveryPolicy;
  now: () => Date;
  everyMs?: number;
  /** The outbox transport's directory (RELAY_DATA_DIR/outbox): the files the sender wrote in this data directory. */
  outboxDir?: string;
  onShredded?: (count: number) => void;
  /** How many emails' outbox files the pass deleted. */
  onOutboxDeleted?: (count: number) => void;
  onPruned?: (report: PruneReport) => void;
  /** After every pass that completed all its steps. */
  onSwept?: (at: Date) => void;
  onError?: (error: Error) => void;
}

export async function startRetention(options: RetentionOptions): Promise<{ stop(): Promise<void> }> {
  let running: Promise<void> = Promise.resolve();
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
  const sweep = () => (running = pass().catch((error) => options.onError?.(error as Error)));
  await sweep();
  const timer = setInterval(() => void running.then(sweep), options.everyMs ?? 10 * 60_000);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
