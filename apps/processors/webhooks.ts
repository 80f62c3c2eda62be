// The webhooks processor (group `<ns>.webhooks`): turns each lifecycle event of an email into
// the spec's webhook events, one delivery per subscribed, enabled endpoint of the email's
// project (apps/services/webhooks/deliveries.ts), and runs the deliveries that are due: signed
// POSTs through the SSRF-safe egress (infra/http/webhook-egress.ts), retried on the spec's
// schedule. Requests happen outside the consumer's handler; each endpoint has a bound on its
// requests in flight, so a slow or failing endpoint never delays another's deliveries.
import { emailIdOfStream } from '../../domain/email/events.ts';
import { upcastEmailEvent } from '../../domain/email/upcast.ts';
import { webhookEventsOf } from '../../domain/webhooks/events.ts';
import { DEFAULT_USER_AGENT, postWebhook } from '../../infra/http/webhook-egress.ts';
import type { Stored } from '../../infra/ports/document-store.ts';
import { loadEmail } from '../services/email-stream.ts';
import {
  abandon, dueDeliveries, ensureDeliveryIndexes, fanOut, nextDueAt, recordAttempt, takeAttempt, type WebhookDelivery,
} from '../services/webhooks/deliveries.ts';
import { endpointsOf, ensureEndpointIndexes, signingSecretOf } from '../services/webhooks/endpoints.ts';
import { signatureHeaders } from '../services/webhooks/signature.ts';
import { startDueLoop } from '../pipeline/due-loop.ts';
import { defineProcessor, type ProcessorDeps } from './processor.ts';

/** Requests in flight per instance, and per endpoint. */
const CONCURRENCY = 64;
const PER_ENDPOINT = 4;
/** Longest sleep between looks at the schedule: attempts start within this of their due time. */
const MAX_SLEEP_MS = 250;

export interface WebhooksRuntime {
  kick(): void;
  stop(): Promise<void>;
}

function startDispatcher(deps: ProcessorDeps): WebhooksRuntime {
  const perEndpoint = new Map<string, number>();
  let stopped = false;

  async function attempt(delivery: Stored<WebhookDelivery>): Promise<void> {
    const endpoint = await endpointsOf(deps.documents).get(delivery.endpointId);
    if (!endpoint || !endpoint.enabled) {
      await abandon(deps.documents, delivery, endpoint ? 'endpoint_disabled' : 'endpoint_deleted', deps.now());
      return;
    }
    const taken = await takeAttempt(deps.documents, delivery, deps.now());
    if (!taken) return;
    const startedAt = deps.now();
    const result = await postWebhook({
      url: endpoint.url,
      body: Buffer.from(taken.body, 'utf8'),
      headers: {
        'content-type': 'application/json',
        'user-agent': DEFAULT_USER_AGENT,
        'relay-event-id': taken.eventId,
        ...signatureHeaders(signingSecretOf(endpoint, deps.services.secrets), taken.body, startedAt),
      },
      dnsServers: deps.config.dnsServers,
      allow: deps.config.webhookAllow,
    });
    await recordAttempt(deps.documents, taken, {
      httpStatus: result.httpStatus, errorCode: result.errorCode, durationMs: Math.round(result.durationMs), createdAt: startedAt.toISOString(),
    }, deps.now(), deps.config.webhookRetryScale);
  }

  function run(delivery: Stored<WebhookDelivery>) {
    perEndpoint.set(delivery.endpointId, (perEndpoint.get(delivery.endpointId) ?? 0) + 1);
    loop.track(delivery._id, attempt(delivery)
      .catch((error) => deps.onError(new Error(`webhook delivery ${delivery._id} failed: ${(error as Error).message}`, { cause: error })))
      .finally(() => void perEndpoint.set(delivery.endpointId, perEndpoint.get(delivery.endpointId)! - 1)));
  }

  async function tick(): Promise<number> {
    if (loop.running < CONCURRENCY) {
      // Read past what is running, and past endpoints at their bound, so others are not starved.
      for (const delivery of await dueDeliveries(deps.documents, deps.now(), CONCURRENCY * 2)) {
        if (stopped || loop.running >= CONCURRENCY) break;
        if (loop.isRunning(delivery._id) || (perEndpoint.get(delivery.endpointId) ?? 0) >= PER_ENDPOINT) continue;
        run(delivery);
      }
    }
    const next = await nextDueAt(deps.documents);
    return next === null ? MAX_SLEEP_MS : Math.max(0, Math.min(MAX_SLEEP_MS, Date.parse(next) - deps.now().getTime()));
  }

  const loop = startDueLoop(tick, deps.onError, MAX_SLEEP_MS);

  return {
    kick: () => loop.kick(),
    async stop() {
      stopped = true;
      await loop.stop();
    },
  };
}

export const webhooks = defineProcessor({
  name: 'webhooks',
  summary: 'posts signed webhook events to the project\'s endpoints, with retries',
  eventTypes: ['EmailSuppressed', 'DeliveryAttempted', 'DeliveryFailed', 'RecipientReported'],
  async init(deps): Promise<WebhooksRuntime> {
    await ensureEndpointIndexes(deps.documents);
    await ensureDeliveryIndexes(deps.documents);
    return startDispatcher(deps);
  },
  async handle(stored, runtime, deps) {
    const event = upcastEmailEvent(stored);
    // The email as it stood right after this event: its status is the payload's.
    const { state } = await loadEmail(deps.events, emailIdOfStream(stored.streamId), { upTo: event.revision });
    const events = webhookEventsOf(event, state, state.occurredAt ?? stored.recordedAt);
    if (events.length === 0) return;
    const endpoints = await endpointsOf(deps.documents).find({ where: { projectId: state.message!.projectId, enabled: true }, limit: 100 });
    if (await fanOut(deps.documents, events, endpoints, deps.now()) > 0) runtime.kick();
  },
});
