// One attempt of a webhook delivery, as the dispatcher runs it (apps/pipeline/dispatcher.ts):
// take the attempt with compare-and-set (a lease: apps/services/webhooks/deliveries.ts), sign the
// exact body, post it through the SSRF-safe egress (infra/http/webhook-egress.ts), and record
// the outcome with the next attempt's time on the spec's schedule (domain/webhooks/delivery.ts).
// A delivery whose endpoint is gone or disabled ends without a request.
import type { WebhookPolicy } from '../../../domain/webhooks/delivery.ts';
import { DEFAULT_USER_AGENT } from '../../../infra/http/webhook-egress.ts';
import type { DocumentStore, Stored } from '../../../infra/ports/document-store.ts';
import type { HttpEgress } from '../../../infra/ports/http-egress.ts';
import type { SecretBox } from '../../../infra/secrets/secret-box.ts';
import { abandon, recordAttempt, takeAttempt, type WebhookDelivery } from './deliveries.ts';
import { endpointsOf, signingSecretOf } from './endpoints.ts';
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
}

export async function attemptWebhookDelivery(deps: WebhookAttemptDeps, delivery: Stored<WebhookDelivery>): Promise<void> {
  const endpoint = await endpointsOf(deps.documents).get(delivery.endpointId);
  if (!endpoint || !endpoint.enabled) {
    const reason = endpoint ? 'endpoint_disabled' : 'endpoint_deleted';
    await abandon(deps.documents, delivery, reason, deps.now());
    deps.onResult?.(null, reason);
    return;
  }
  const taken = await takeAttempt(deps.documents, delivery, deps.now(), deps.policy);
  if (!taken) return;
  const startedAt = deps.now();
  const result = await deps.egress.post({
    url: endpoint.url,
    body: Buffer.from(taken.body, 'utf8'),
    headers: {
      'content-type': 'application/json',
      'user-agent': DEFAULT_USER_AGENT,
      'relay-event-id': taken.eventId,
      ...signatureHeaders(signingSecretOf(endpoint, deps.secrets), taken.body, startedAt),
    },
    dnsServers: deps.dnsServers,
    allow: deps.allow,
  });
  await recordAttempt(deps.documents, taken, {
    httpStatus: result.httpStatus, errorCode: result.errorCode, durationMs: Math.round(result.durationMs), createdAt: startedAt.toISOString(),
  }, deps.now(), deps.policy);
  deps.onResult?.(result.httpStatus, result.errorCode);
}
