// The webhooks processor (group `<ns>.webhooks`): turns each lifecycle event of an email into
// the spec's webhook events, one delivery per subscribed, enabled endpoint of the email's
// project (apps/services/webhooks/deliveries.ts), and runs the deliveries that are due
// (apps/services/webhooks/attempt.ts) through the dispatcher (apps/pipeline/dispatcher.ts).
// Requests happen outside the consumer's handler; each endpoint has a bound on its requests in
// flight, slow endpoints together hold at most half of the instance's
// (apps/services/webhooks/slow-endpoints.ts) and each project's endpoints at most a quarter
// (apps/services/webhooks/project-shares.ts), so slow or failing endpoints never delay the
// deliveries of those that answer, nor one project's endpoints another's.
import { emailIdOfStream } from '../../domain/email/events.ts';
import { upcastEmailEvent } from '../../domain/email/upcast.ts';
import { webhookEventsOf } from '../../domain/webhooks/events.ts';
import type { Stored } from '../../infra/ports/document-store.ts';
import type { AttemptResult } from '../../infra/ports/http-egress.ts';
import { afterDurable } from '../../infra/ports/durability.ts';
import { loadEmail } from '../services/email-stream.ts';
import { attemptWebhookDelivery } from '../services/webhooks/attempt.ts';
import { WEBHOOK_RESULT_LABELS, webhookResultOf } from '../services/webhooks/attempt-result.ts';
import { dueDeliveries, ensureDeliveryIndexes, fanOut, nextDueAfter, type WebhookDelivery } from '../services/webhooks/deliveries.ts';
import { endpointsOf, ensureEndpointIndexes, MAX_ENDPOINTS_PER_PROJECT, resealSigningSecrets, type SigningSecretReseal } from '../services/webhooks/endpoints.ts';
import { ProjectShares } from '../services/webhooks/project-shares.ts';
import { SlowEndpoints } from '../services/webhooks/slow-endpoints.ts';
import { startDispatcher, type Dispatcher } from '../pipeline/dispatcher.ts';
import { defineProcessor, type ProcessorDeps } from './processor.ts';

/** Requests in flight per instance, and per endpoint. */
const CONCURRENCY = 64;
const PER_ENDPOINT = 4;
/** Requests in flight that slow endpoints may hold together: half, so the others always have the rest. */
const SLOW_SHARE = CONCURRENCY / 2;
/**
 * Requests in flight that one project's endpoints may hold together, however they fail: a
 * quarter while another project has deliveries due, three quarters while none has.
 */
const PROJECT_SHARE = CONCURRENCY / 4;
const PROJECT_ALONE = (CONCURRENCY * 3) / 4;
/** Longest sleep between looks at the schedule: attempts start within this of their due time. */
const MAX_SLEEP_MS = 250;

export const webhooks = defineProcessor({
  name: 'webhooks',
  summary: 'posts signed webhook events to the project\'s endpoints, with retries',
  eventTypes: ['EmailSuppressed', 'DeliveryAttempted', 'DeliveryFailed', 'RecipientReported'],
  async init(deps): Promise<Dispatcher> {
    await ensureEndpointIndexes(deps.documents);
    await ensureDeliveryIndexes(deps.documents);
    logSigningSecretReseal(deps, await resealSigningSecrets(deps.documents, deps.services.secrets));
    // Every result's series from 0, and the failed runs': the first failure after a start is then an increase an alert sees.
    for (const result of WEBHOOK_RESULT_LABELS) deps.metrics?.webhookAttempts(result);
    const runFailures = deps.metrics?.dispatchRunFailures('webhooks');
    const slow = new SlowEndpoints({ share: SLOW_SHARE, perEndpoint: PER_ENDPOINT });
    const projects = new ProjectShares({ share: PROJECT_SHARE, alone: PROJECT_ALONE });
    const attempt = {
      documents: deps.documents, egress: deps.services.egress, secrets: deps.services.secrets, now: deps.now,
      dnsServers: deps.config.dnsServers, allow: deps.config.webhookAllow, policy: deps.services.policies.webhooks,
      onResult: (httpStatus: number | null, errorCode: string | null) => deps.metrics?.webhookAttempts(webhookResultOf(httpStatus, errorCode)).inc(),
      onRequest: (endpointId: string, result: AttemptResult) => slow.requestEnded(endpointId, result),
      warn: (message: string, fields: Record<string, unknown>) => (deps.onWarning ?? deps.onInfo)?.(message, fields),
      debug: deps.onDebug,
    };
    return startDispatcher<Stored<WebhookDelivery>>({
      // Endpoints at their bound are left out of the read, so their backlog cannot hide another's
      // deliveries; so are slow endpoints while they hold their share of the requests in flight,
      // and projects holding theirs.
      due: async (now, limit, full) => {
        const endpoints = slow.leftOut(full);
        const due = await projects.due((leftOut) => dueDeliveries(deps.documents, now, limit, endpoints, leftOut));
        slow.read(due.map((delivery) => delivery.endpointId));
        return due;
      },
      nextDueAt: (after) => nextDueAfter(deps.documents, after),
      id: (delivery) => delivery._id,
      dueAt: (delivery) => delivery.nextAttemptAt,
      key: (delivery) => delivery.endpointId,
      run: (delivery) => {
        slow.started(delivery.endpointId);
        projects.started(delivery.projectId, delivery.endpointId);
        return attemptWebhookDelivery(attempt, delivery).catch((error: Error) => {
          throw new Error(`webhook delivery ${delivery._id} failed: ${error.message}`, { cause: error });
        }).finally(() => {
          slow.ended(delivery.endpointId);
          projects.ended(delivery.projectId);
        });
      },
    }, { concurrency: CONCURRENCY, perKey: (endpointId) => (projects.holdsShare(endpointId) ? 0 : slow.bound(endpointId)), pollMs: MAX_SLEEP_MS, now: deps.now, onError: deps.onError, onRunFailed: () => runFailures?.inc(), onStuckRun: () => runFailures?.inc() });
  },
  async handle(stored, dispatcher, deps) {
    const event = upcastEmailEvent(stored);
    // The email as it stood right after this event: its status is the payload's.
    const { state } = await loadEmail(deps.events, emailIdOfStream(stored.streamId), { upTo: event.revision });
    const events = webhookEventsOf(event, state, state.occurredAt ?? stored.recordedAt);
    if (events.length === 0) return;
    const endpoints = await endpointsOf(deps.documents).find({ where: { projectId: state.message!.projectId, enabled: true }, orderBy: [['createdAt', 'asc'], ['_id', 'asc']], limit: MAX_ENDPOINTS_PER_PROJECT });
    // An endpoint gets what happens once it exists: an event recorded before it was created, seen
    // late (a lagging group, a redelivery, a parked record retried), would be a replay, which the
    // spec rules out. The two times come from two clocks (the API's, the event store's), so an
    // event recorded within ENDPOINT_CLOCK_SKEW_MS before the creation still counts as after it.
    const recordedAt = Date.parse(stored.recordedAt) + ENDPOINT_CLOCK_SKEW_MS;
    const current = endpoints.filter((endpoint) => !(Date.parse(endpoint.createdAt) > recordedAt));
    if (await fanOut(deps.documents, events, current, deps.now()) > 0) afterDurable(() => dispatcher.kick());
  },
});

/** How far the clock of the process that creates an endpoint may run ahead of the event store's without losing its first events. */
export const ENDPOINT_CLOCK_SKEW_MS = 2_000;

/** Unopenable signing secrets named in the start log, at most; the count says how many there are. */
const UNOPENABLE_SECRETS_LOGGED = 100;

/**
 * The re-seal's count at info, every start (`remaining: 0`: the previous key is no longer needed
 * for signing secrets, docs/operations.md), and at warn the endpoints whose secret no key opens,
 * as the sender names domains whose DKIM key none opens: otherwise the first sign is receivers
 * rejecting every delivery.
 */
function logSigningSecretReseal(deps: ProcessorDeps, outcome: SigningSecretReseal): void {
  deps.onInfo?.('re-sealed webhook signing secrets under the current secret key', { keyId: deps.services.secrets.keyId, resealed: outcome.changed, remaining: outcome.remaining });
  const { unopenable } = outcome;
  if (unopenable.length === 0) return;
  (deps.onWarning ?? deps.onInfo)?.('webhook signing secrets that no configured secret key opens: deliveries to these endpoints fail as signing_failed until their secret key is back in RELAY_SECRET_KEY_PREVIOUS or the endpoint\'s secret is rotated (docs/delivery.md, "Secret and rotation")', {
    count: unopenable.length,
    endpoints: unopenable.slice(0, UNOPENABLE_SECRETS_LOGGED),
    ...(unopenable.length > UNOPENABLE_SECRETS_LOGGED ? { more: true } : {}),
  });
}
