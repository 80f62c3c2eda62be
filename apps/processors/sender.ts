// The sender (group `<ns>.sender`): reacts to every lifecycle event of an email by bringing its
// work item (apps/services/delivery/work-items.ts) in line with the stream, and runs the items
// that are due (apps/services/delivery/attempt.ts) through the dispatcher
// (apps/pipeline/dispatcher.ts): first attempts at once, retries and claim recoveries at their
// time. Sending happens outside the consumer's handler, so a slow destination or a failing
// email never holds up the other emails of its partition; the handler only records what is
// due, durably. Any number of instances share the work: claims on the email's stream pick one sender.
import { emailIdOfStream } from '../../domain/email/events.ts';
import { originOfEvent } from '../../domain/events/metadata.ts';
import { resealDkimKeys } from '../services/dkim-key-vault.ts';
import { runDeliveryStep } from '../services/delivery/attempt.ts';
import { dueWorkItems, ensureWorkItemIndexes, syncWorkItem, workItems, type WorkItem } from '../services/delivery/work-items.ts';
import { ensureSendRateIndexes } from '../services/send-rate.ts';
import { startDispatcher, type Dispatcher } from '../pipeline/dispatcher.ts';
import { startTlsReporting } from '../services/tls-reports/daily-reports.ts';
import { ensureTlsSessionCountIndexes } from '../services/tls-reports/session-counts.ts';
import { defineProcessor } from './processor.ts';

/** Emails one instance works on at once. */
const CONCURRENCY = 64;
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
    const mx = deps.services.mxDelivery();
    if (mx) await ensureTlsSessionCountIndexes(deps.documents);
    // Yesterday's TLS reports (RFC 8460), from the sessions every sender instance counted.
    const reporting = mx ? startTlsReporting({
      documents: deps.documents, dns: mx.dns, transport: deps.services.transport(), secrets: deps.services.secrets, from: deps.config.tlsRptFrom, egress: deps.services.egress,
      https: { dnsServers: deps.config.dnsServers, allow: deps.config.webhookAllow }, now: deps.now, onError: deps.onError,
    }) : null;
    const delivery = {
      events: deps.events,
      emails: deps.services.emails,
      policy: deps.services.policies.delivery,
      documents: deps.documents,
      secrets: deps.services.secrets,
      transport: deps.services.transport(),
      sendRate: deps.services.sendRate,
      compose: deps.services.compose,
      now: deps.now,
    };
    // Stopping waits for the steps in flight (their outcome is recorded): stopping mid-transaction
    // would leave exactly the unknown outcome that claims exist to contain.
    const dispatcher = startDispatcher<WorkItem>({
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
    }, { concurrency: CONCURRENCY, perKey: () => 1, pollMs: POLL_MS, now: deps.now, onError: deps.onError });
    if (!reporting) return dispatcher;
    return { ...dispatcher, stop: async () => { await reporting.stop(); await dispatcher.stop(); } };
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
