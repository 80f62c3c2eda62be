// The sender (group `<ns>.sender`): reacts to every lifecycle event of an email by bringing its
// work item (apps/services/delivery/work-items.ts) in line with the stream, and runs the items
// that are due: first attempts at once, retries and claim recoveries at their time. Sending
// happens outside the consumer's handler, so a slow destination or a failing email never holds
// up the other emails of its partition; the handler only records what is due, durably.
// Any number of instances share the work: claims on the email's stream pick one sender.
import { emailIdOfStream } from '../../domain/email/events.ts';
import { originOfEvent } from '../../domain/events/metadata.ts';
import { resealDkimKeys } from '../services/dkim-key-vault.ts';
import { runDeliveryStep, type DeliveryDeps } from '../services/delivery/attempt.ts';
import { ensureWorkItemIndexes, syncWorkItem, workItems, type WorkItem } from '../services/delivery/work-items.ts';
import { ensureSendRateIndexes } from '../services/send-rate.ts';
import { startDueLoop } from '../pipeline/due-loop.ts';
import { defineProcessor, type ProcessorDeps } from './processor.ts';

/** Emails one instance works on at once. */
const CONCURRENCY = 64;
/** How often an idle instance looks for due items (retries, recoveries, other instances' leftovers). */
const POLL_MS = 1000;

export interface SenderRuntime {
  /** Wakes the dispatcher (a first attempt was just scheduled). */
  kick(): void;
  stop(): Promise<void>;
}

function startDispatcher(deps: ProcessorDeps, delivery: DeliveryDeps): SenderRuntime {
  const items = workItems(deps.documents);
  let stopped = false;

  const run = (item: WorkItem) => loop.track(item._id, runDeliveryStep(delivery, item).then(
    (result) => deps.onDebug?.('delivery step', { emailId: item._id, step: item.step, attempt: item.attempt, result }),
    (error) => deps.onError(new Error(`delivery of ${item._id} (${item.step} ${item.attempt}) failed: ${(error as Error).message}`, { cause: error })),
  ));

  // Due items read but not started yet (no room): taken before the store is asked again, so a
  // backlog costs one query per batch rather than one per finished send.
  let ready: WorkItem[] = [];

  async function tick(): Promise<void> {
    if (CONCURRENCY - loop.running <= 0) return;
    if (ready.length === 0) {
      ready = await items.find({
        where: { dueAt: { lte: deps.now().toISOString() } },
        orderBy: [['dueAt', 'asc'], ['_id', 'asc']],
        limit: 2 * CONCURRENCY,
      });
    }
    while (ready.length > 0 && !stopped && loop.running < CONCURRENCY) {
      const item = ready.shift()!;
      if (!loop.isRunning(item._id)) run(item);
    }
  }

  const loop = startDueLoop(async () => {
    await tick();
    return POLL_MS;
  }, deps.onError, POLL_MS);

  return {
    kick: () => loop.kick(),
    async stop() {
      stopped = true;
      // Attempts in flight finish (their outcome is recorded): stopping mid-transaction would
      // leave exactly the unknown outcome that claims exist to contain.
      await loop.stop();
    },
  };
}

export const sender = defineProcessor({
  name: 'sender',
  summary: 'delivers queued emails through RELAY_DELIVERY (outbox, smtp or mx), with durable retries',
  eventTypes: ['EmailAccepted', 'DeliveryClaimed', 'DeliveryAttempted', 'DeliveryFailed'],
  async init(deps): Promise<SenderRuntime> {
    await ensureWorkItemIndexes(deps.documents);
    await ensureSendRateIndexes(deps.documents);
    await resealDkimKeys(deps.documents, deps.services.secrets);
    await deps.services.warmCompose();
    await deps.services.transport().warm?.();
    return startDispatcher(deps, {
      events: deps.events,
      documents: deps.documents,
      secrets: deps.services.secrets,
      transport: deps.services.transport(),
      sendRate: deps.services.sendRate,
      compose: deps.services.compose,
      now: deps.now,
      retryScale: deps.config.deliveryRetryScale,
    });
  },
  async handle(event, runtime, deps) {
    const emailId = emailIdOfStream(event.streamId);
    // The dispatcher syncs the item after each step it takes, so for its own events the item
    // is usually derived from this revision or a later one already: nothing to read. An item
    // is only ever deleted by a sync that found the delivery finished, and a partition brings
    // an email's events in order, so a later event without an item has nothing left to do.
    const current = await workItems(deps.documents).get(emailId);
    if (current ? current.streamRevision >= event.revision : event.type !== 'EmailAccepted') return;
    const item = await syncWorkItem(deps.documents, deps.events, emailId, originOfEvent(event), deps.config.deliveryRetryScale);
    if (item && item.dueAt <= deps.now().toISOString()) runtime.kick();
  },
});
