// The sender (group `<ns>.sender`): reacts to every lifecycle event of an email by bringing its
// work item (apps/services/delivery/work-items.ts) in line with the stream, and runs the items
// that are due (apps/services/delivery/attempt.ts) through the dispatcher
// (apps/pipeline/dispatcher.ts): first attempts at once, retries and claim recoveries at their
// time. Sending happens outside the consumer's handler, so a slow destination or a failing
// email never holds up the other emails of its partition; the handler only records what is
// due, durably. Any number of instances share the work: claims on the email's stream pick one sender.
import { claimDeadline } from '../../domain/email/delivery.ts';
import { emailIdOfStream } from '../../domain/email/events.ts';
import { originOfEvent } from '../../domain/events/metadata.ts';
import { resealDkimKeys } from '../services/dkim-key-vault.ts';
import { runDeliveryStep } from '../services/delivery/attempt.ts';
import { deliveryOutcomeReport } from '../services/delivery/outcome-report.ts';
import { dueWorkItems, ensureWorkItemIndexes, openClaimItems, syncWorkItem, workItems, type WorkItem } from '../services/delivery/work-items.ts';
import { loadEmail } from '../services/email-stream.ts';
import { ensureSendRateIndexes } from '../services/send-rate.ts';
import { startDispatcher, type Dispatcher } from '../pipeline/dispatcher.ts';
import { defineProcessor, type ProcessorDeps } from './processor.ts';

/**
 * Emails one instance works on at once, at most. With a transport that runs a bounded number
 * of transactions at once (a smarthost's pooled connections), twice that: one composing while
 * one is on the wire, so a claim never waits long for a connection (a claim that waits past its
 * start grace is taken over by another sender: domain/email/delivery.ts).
 */
const CONCURRENCY = 64;
/** Open claims read one by one at start to say what becomes of them; past these, the schedule's word is taken. */
const INHERITED_CLAIMS_READ = 200;
/** How often an idle instance looks for due items (retries, recoveries, other instances' leftovers). */
const POLL_MS = 1000;

export const sender = defineProcessor({
  name: 'sender',
  summary: 'delivers queued emails through RELAY_DELIVERY (outbox, smtp or mx), with durable retries',
  eventTypes: ['EmailAccepted', 'DeliveryClaimed', 'DeliveryAttempted', 'DeliveryFailed'],
  async init(deps): Promise<Dispatcher> {
    await ensureWorkItemIndexes(deps.documents);
    await ensureSendRateIndexes(deps.documents);
    await resealDkimKeys(deps.documents, deps.services.secrets);
    await deps.services.warmCompose();
    await deps.services.transport().warm?.();
    await logOpenClaims(deps);
    const transport = deps.services.transport();
    const delivery = {
      observe: deliveryOutcomeReport({
        metrics: deps.metrics?.delivery,
        transport: transport.name,
        warn: (message, fields) => (deps.onWarning ?? deps.onInfo)?.(message, fields),
        error: (message, fields) => (deps.onAlert ?? deps.onWarning)?.(message, fields),
        now: deps.now,
      }),
      events: deps.events,
      emails: deps.services.emails,
      policy: deps.services.policies.delivery,
      documents: deps.documents,
      secrets: deps.services.secrets,
      transport,
      sendRate: deps.services.sendRate,
      compose: deps.services.compose,
      now: deps.now,
    };
    // Stopping waits for the steps in flight (their outcome is recorded): stopping mid-transaction
    // would leave exactly the unknown outcome that claims exist to contain.
    return startDispatcher<WorkItem>({
      due: (now, limit) => dueWorkItems(deps.documents, now, limit),
      id: (item) => item._id,
      // One step of an email at a time (a key may be any grouping: a destination site, say).
      key: (item) => item._id,
      run: (item) => runDeliveryStep(delivery, item).then(
        (result) => deps.onDebug?.('delivery step', { emailId: item._id, step: item.step, attempt: item.attempt, result }),
        (error: Error) => {
          throw new Error(`delivery of ${item._id} (${item.step} ${item.attempt}) failed: ${error.message}`, { cause: error });
        },
      ),
    }, { concurrency: transport.capacity ? Math.min(CONCURRENCY, 2 * transport.capacity) : CONCURRENCY, perKey: () => 1, pollMs: POLL_MS, now: deps.now, onError: deps.onError });
  },
  async handle(event, dispatcher, deps) {
    const emailId = emailIdOfStream(event.streamId);
    // The dispatcher syncs the item after each step it takes, so for its own events the item
    // is usually derived from this revision or a later one already: nothing to read. An item
    // is only ever deleted by a sync that found the delivery finished, and a partition brings
    // an email's events in order, so a later event without an item has nothing left to do.
    const current = await workItems(deps.documents).get(emailId);
    if (current ? current.streamRevision >= event.revision : event.type !== 'EmailAccepted') return;
    const item = await syncWorkItem(deps.documents, deps.events, emailId, originOfEvent(event), deps.services.policies.delivery);
    if (item && item.dueAt <= deps.now().toISOString()) dispatcher.kick();
  },
});

/**
 * Says what this sender finds open at start: claims of other instances (or of one that
 * stopped) and when their grace ends: those whose transaction never began are taken over then
 * and sent, those with a transaction begun become delivery_unknown unless their holder records
 * an outcome first.
 */
async function logOpenClaims(deps: ProcessorDeps): Promise<void> {
  const items = await openClaimItems(deps.documents, INHERITED_CLAIMS_READ + 1);
  if (items.length === 0) return;
  const policy = deps.services.policies.delivery;
  const due = { takeover: [] as string[], unknown: [] as string[] };
  for (const item of items.slice(0, INHERITED_CLAIMS_READ)) {
    // The schedule may be behind the stream (a transaction began since): the stream decides.
    const deadline = claimDeadline((await loadEmail(deps.events, item._id)).state, deps.services.policies.delivery);
    if (deadline) due[deadline.kind].push(deadline.at);
  }
  const span = (times: string[]) => (times.length === 0 ? null : { count: times.length, from: times.reduce((a, b) => (a < b ? a : b)), until: times.reduce((a, b) => (a > b ? a : b)) });
  (deps.onWarning ?? deps.onInfo)?.('open delivery claims found at start (left by a sender that stopped, or held by another that runs)', {
    ...(items.length > INHERITED_CLAIMS_READ ? { read: INHERITED_CLAIMS_READ, more: true } : {}),
    // Never began a transaction: taken over and sent once their start grace ends.
    beforeTransaction: span(due.takeover),
    // Began one: delivery_unknown once their grace ends, unless their holder records an outcome.
    inTransaction: span(due.unknown),
    startGraceMs: policy.claimStartGraceMs,
    graceMs: policy.claimGraceMs,
  });
}
