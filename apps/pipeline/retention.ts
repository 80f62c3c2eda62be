// `relay retention` (part of `relay start`): at start and then periodically,
//   1. destroys message bodies past their seven-day retention (their content keys);
//   2. prunes operational data past its documented period (domain/retention.ts):
//      webhook deliveries, left-behind work items, sessions, invitations, rate-limit slots.
// Safe to run in several processes at once: each deletion is one document or one deleteWhere.
import type { DeliveryPolicy } from '../../domain/email/delivery.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import { shredExpiredContent } from '../services/content-vault.ts';
import { pruneOperationalData, type PruneReport } from '../services/operational-retention.ts';

export interface RetentionOptions {
  documents: DocumentStore;
  events: EventStore;
  /** The process's delivery policy: work items are re-derived with it. */
  deliveryPolicy: DeliveryPolicy;
  now: () => Date;
  everyMs?: number;
  onShredded?: (count: number) => void;
  onPruned?: (report: PruneReport) => void;
  /** After every pass that completed all its steps. */
  onSwept?: (at: Date) => void;
  onError?: (error: Error) => void;
}

export async function startRetention(options: RetentionOptions): Promise<{ stop(): Promise<void> }> {
  let running: Promise<void> = Promise.resolve();
  const pass = async () => {
    const now = options.now();
    options.onShredded?.(await shredExpiredContent(options.documents, now));
    options.onPruned?.(await pruneOperationalData(options, now));
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
