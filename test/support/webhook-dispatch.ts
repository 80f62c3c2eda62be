// The webhooks processor's dispatcher as its init builds it, on an embedded document store, with a
// stand-in egress the test answers; and the endpoints and due deliveries it works on.
import type { Dispatcher } from '../../apps/pipeline/dispatcher.ts';
import type { ProcessorDeps } from '../../apps/processors/processor.ts';
import { webhooks } from '../../apps/processors/webhooks.ts';
import { deliveriesOf, type WebhookDelivery } from '../../apps/services/webhooks/deliveries.ts';
import { endpointsOf } from '../../apps/services/webhooks/endpoints.ts';
import { WEBHOOK_POLICY } from '../../domain/webhooks/delivery.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { AttemptResult, HttpEgress } from '../../infra/ports/http-egress.ts';
import type { SecretBox } from '../../infra/secrets/secret-box.ts';
import type { Deferred } from './eventually.ts';

export const OK: AttemptResult = { httpStatus: 200, errorCode: null, durationMs: 1, responseSnippet: null };

/** A minute ago, plus `ms`: due now, in the order the offsets give. */
export const dueAt = (ms: number) => new Date(Date.now() - 60_000 + ms).toISOString();

/** An enabled endpoint `https://<id>.example/` of the project, for email.sent. */
export async function addEndpoint(documents: DocumentStore, secrets: SecretBox, id: string, projectId: string): Promise<void> {
  await endpointsOf(documents).insert({
    _id: id, workspaceId: `ws_${projectId}`, projectId, url: `https://${id}.example/`, events: ['email.sent'], description: null, enabled: true,
    secretSealed: secrets.seal('whsec_test', 'webhook-signing-secret'), createdAt: dueAt(0), updatedAt: dueAt(0),
  });
}

/** A pending delivery to the endpoint, due at `due`. */
export async function addDelivery(documents: DocumentStore, id: string, endpointId: string, projectId: string, due: string): Promise<void> {
  await deliveriesOf(documents).insert({
    _id: id, emailId: `em_${id}`, projectId, endpointId, eventId: `evt_${id}`, type: 'email.sent', body: '{}',
    status: 'pending', attempts: 0, nextAttemptAt: due, attemptLogs: [], createdAt: due, updatedAt: due,
  } satisfies WebhookDelivery);
}

/** The processor's dispatcher, as `relay processor webhooks` starts it, posting through `post`. */
export function startWebhookDispatcher(options: { documents: DocumentStore; secrets: SecretBox; post: HttpEgress['post']; errors: Error[] }): Promise<Dispatcher> {
  const egress: HttpEgress = { post: options.post, checkDestination: async () => ({ ok: true }) };
  const deps = {
    documents: options.documents,
    services: { egress, secrets: options.secrets, policies: { webhooks: WEBHOOK_POLICY } },
    config: { dnsServers: [], webhookAllow: new Set<string>() },
    now: () => new Date(),
    onError: (error: Error) => options.errors.push(error),
  } as unknown as ProcessorDeps;
  return webhooks.init!(deps) as Promise<Dispatcher>;
}

/** Stops the dispatcher, answering the held requests (OK) so that their attempts end. */
export async function stopAnswering(dispatcher: Dispatcher, held: Array<Deferred<AttemptResult>>): Promise<void> {
  const stopping = dispatcher.stop();
  for (const answer of held) answer.resolve(OK);
  await stopping;
}
