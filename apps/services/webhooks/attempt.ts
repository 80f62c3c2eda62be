// One attempt of a webhook delivery, as the dispatcher runs it (apps/pipeline/dispatcher.ts):
// take the attempt with compare-and-set (a lease: apps/services/webhooks/deliveries.ts), sign the
// exact body, post it through the SSRF-safe egress (infra/http/webhook-egress.ts), and record
// the outcome with the next attempt's time on the spec's schedule (domain/webhooks/delivery.ts).
// A delivery whose endpoint is gone or disabled, or was made before the endpoint was last
// disabled (its disable generation is below the endpoint's), ends without a request; one whose
// endpoint was disabled or deleted while its request was in flight ends once its outcome is
// recorded (endPendingDeliveries, run in the background after the change, leaves a delivery taken
// by an attempt to it). So every delivery pending at such a change ends, whether or not that
// background run reached it before the process stopped or crashed, and so does one whose fan-out
// read the endpoint before the change but inserted it after that run had read past it.
// A delivery of an event type the endpoint no longer subscribes to ends the same way
// (endpoint_unsubscribed): shortly after the change by the background run, or, where that did not
// reach it, as it falls due or once its request in flight is recorded. The types are the
// endpoint's at each attempt, as its URL is. Once ended it stays so, whatever the types become.
// The counter of results (onResult) names no email or endpoint, so each attempt without a 2xx is
// also a log line naming them (reportAttempt).
import type { WebhookPolicy } from '../../../domain/webhooks/delivery.ts';
import { DEFAULT_USER_AGENT } from '../../../infra/http/webhook-egress.ts';
import type { DocumentStore, Stored } from '../../../infra/ports/document-store.ts';
import type { AttemptResult, HttpEgress } from '../../../infra/ports/http-egress.ts';
import type { SecretBox } from '../../../infra/secrets/secret-box.ts';
import { webhookResultOf } from './attempt-result.ts';
import { abandon, closedReason, recordAttempt, takeAttempt, type WebhookDelivery } from './deliveries.ts';
import { endpointsOf, signingSecretOf, type WebhookEndpoint } from './endpoints.ts';
import { signatureHeaders } from './signature.ts';

export interface WebhookAttemptDeps {
  documents: DocumentStore;
  /** Where posts go out (services.egress). */
  egress: HttpEgress;
  secrets: SecretBox;
  now: () => Date;
  /** RELAY_DNS_SERVERS: resolvers for the endpoint's name. */
  dnsServers: string[];
  /** RELAY_WEBHOOK_ALLOW: test destinations let past the public-address check. */
  allow: Set<string>;
  policy: WebhookPolicy;
  /** Told each attempt's result, and each delivery closed without a request (/metrics: relay_webhook_attempts_total). */
  onResult?: (httpStatus: number | null, errorCode: string | null) => void;
  /** Told how each request made to an endpoint went (the processor's slow endpoints). */
  onRequest?: (endpointId: string, result: AttemptResult) => void;
  /** A delivery that ended without a 2xx after its attempts (logged at warn). */
  warn?: (message: string, fields: Record<string, unknown>) => void;
  /** A failed attempt that will be retried, and a delivery ended without a request (logged at debug). */
  debug?: (message: string, fields: Record<string, unknown>) => void;
}

/** The whole of one attempt's request, DNS included (the egress's deadline). */
export const ATTEMPT_TIME_LIMIT_MS = 15_000;

export async function attemptWebhookDelivery(deps: WebhookAttemptDeps, delivery: Stored<WebhookDelivery>): Promise<void> {
  const endpoint = await openEndpoint(deps, delivery);
  if (!endpoint) return;
  const taken = await takeAttempt(deps.documents, delivery, deps.now(), deps.policy);
  if (!taken) return;
  const startedAt = deps.now();
  let secret: string;
  try {
    secret = signingSecretOf(endpoint, deps.secrets);
  } catch (error) {
    // Sealed under a key Relay no longer has (dropped from RELAY_SECRET_KEY_PREVIOUS before the
    // re-seal at start): the attempt is recorded and counted, and retried on the schedule (the
    // key may come back), rather than taken again and again without a trace but a log line.
    const recorded = await recordAttempt(deps.documents, taken, { httpStatus: null, errorCode: 'signing_failed', durationMs: 0, createdAt: startedAt.toISOString() }, deps.now(), deps.policy);
    deps.onResult?.(null, 'signing_failed');
    if (recorded) reportAttempt(deps, endpoint, recorded, null, 'signing_failed');
    throw new Error(`the signing secret of webhook endpoint ${endpoint._id} does not open: ${(error as Error).message}`, { cause: error });
  }
  const result = await deps.egress.post({
    url: endpoint.url,
    body: Buffer.from(taken.body, 'utf8'),
    headers: {
      'content-type': 'application/json',
      'user-agent': DEFAULT_USER_AGENT,
      'relay-event-id': taken.eventId,
      ...signatureHeaders(secret, taken.body, startedAt),
    },
    dnsServers: deps.dnsServers,
    allow: deps.allow,
    totalTimeoutMs: ATTEMPT_TIME_LIMIT_MS,
  });
  deps.onRequest?.(endpoint._id, result);
  const recorded = await recordAttempt(deps.documents, taken, {
    httpStatus: result.httpStatus, errorCode: result.errorCode, durationMs: Math.round(result.durationMs), createdAt: startedAt.toISOString(),
  }, deps.now(), deps.policy);
  deps.onResult?.(result.httpStatus, result.errorCode);
  if (recorded) reportAttempt(deps, endpoint, recorded, result.httpStatus, result.errorCode);
  // Disabled, deleted or unsubscribed while the request was in flight: the change left this delivery to this attempt.
  if (recorded?.status === 'pending') await openEndpoint(deps, recorded);
}

/**
 * The delivery's endpoint if it is there, enabled, was not disabled since the delivery was made,
 * and subscribes to the delivery's event type; otherwise ends the delivery without a request, and null.
 */
async function openEndpoint(deps: WebhookAttemptDeps, delivery: Stored<WebhookDelivery>): Promise<WebhookEndpoint | null> {
  const endpoint = await endpointsOf(deps.documents).get(delivery.endpointId);
  const reason = closedReason(endpoint, delivery);
  if (reason === null) return endpoint;
  // Not written when the delivery changed meanwhile (endPendingDeliveries ended it, or an attempt took it).
  if (await abandon(deps.documents, delivery, reason, deps.now())) {
    deps.onResult?.(null, reason);
    // The customer's own doing (a disable, a deletion, an event type dropped), which the API
    // process ends most such deliveries for without a line: debug, not warn.
    deps.debug?.('webhook delivery ended without a request', { ...deliveryFields(delivery, endpoint), attempts: delivery.attempts, result: reason, retried: false });
  }
  return null;
}

/**
 * A delivery in the log: what names it to an operator asked about one email's webhook, never
 * its body (the customer's data), its URL (a path or query may hold a token) or the secret.
 */
const deliveryFields = (delivery: WebhookDelivery, endpoint: WebhookEndpoint | null) => ({
  emailId: delivery.emailId,
  ...(endpoint ? { workspaceId: endpoint.workspaceId } : {}),
  projectId: delivery.projectId,
  endpointId: delivery.endpointId,
  deliveryId: delivery._id,
  eventId: delivery.eventId,
  eventType: delivery.type,
});

/**
 * An attempt without a 2xx: at warn when it was the delivery's last (retries used up, or an
 * unsafe destination), the line an operator looks for when a customer misses a webhook, as
 * email delivery's outcomes are (outcome-report.ts); at debug when another follows, so that an
 * endpoint that is down for a day writes one warn line per delivery, not seven.
 */
function reportAttempt(deps: WebhookAttemptDeps, endpoint: WebhookEndpoint, recorded: WebhookDelivery, httpStatus: number | null, errorCode: string | null): void {
  if (recorded.status === 'succeeded') return;
  const fields = {
    ...deliveryFields(recorded, endpoint),
    attempts: recorded.attempts,
    result: webhookResultOf(httpStatus, errorCode),
    httpStatus,
    errorCode,
  };
  if (recorded.status === 'failed') deps.warn?.('webhook delivery failed: not retried', { ...fields, retried: false });
  else deps.debug?.('webhook attempt failed: retried', { ...fields, nextAttemptAt: recorded.nextAttemptAt });
}
