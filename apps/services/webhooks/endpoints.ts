// Webhook endpoints of a project: where signed events go and which types each wants. The
// signing secret is random, shown once (at creation and rotation), and kept sealed with
// Relay's secret: never hashed, since Relay signs with it. URLs must be public HTTPS on port
// 443 by a name that resolves only to global addresses (infra/http/webhook-url.ts); the
// address is checked again at every delivery.
//
// The limit of endpoints per project holds under concurrent creations (in any number of
// processes): each endpoint holds one of the project's slots, a document `<projectId>#<n>`
// (n < MAX_ENDPOINTS_PER_PROJECT) that a creation claims by inserting it (the store's unique
// _id: atomic on every adapter, where compare-and-set across processes is not on all), and a
// deletion frees. Disabling or deleting an endpoint ends its pending deliveries shortly after
// the change is answered, in the background (./delivery-endings.ts), and taking event types out
// of its events ends those of the types taken out the same way.
import { randomBytes } from 'node:crypto';
import { notFound, RelayError, validationError } from '../../../domain/errors.ts';
import { isWebhookEventType, type WebhookEventType } from '../../../domain/webhooks/events.ts';
import { checkWebhookUrl } from '../../../infra/http/webhook-url.ts';
import { checkResolvesPublic } from '../../../infra/http/webhook-egress.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import { SecretBoxError, sealedKeyIdOf, type SecretBox } from '../../../infra/secrets/secret-box.ts';
import { COLLECTIONS } from '../collections.ts';
import { updateDocument } from '../management/documents.ts';
import { newId } from '../management/ids.ts';
import { CONTROL_CHARACTERS } from '../management/names.ts';
import { ABANDONED_SLOT_MS, claimSlot } from '../slots.ts';
import type { DeliveryEndings } from './delivery-endings.ts';

const SECRET_PURPOSE = 'webhook-signing-secret';
/** A project's endpoints, at most: what creation allows, the list shows and each event fans out to. */
export const MAX_ENDPOINTS_PER_PROJECT = 20;

export interface WebhookEndpoint {
  _id: string;
  workspaceId: string;
  projectId: string;
  url: string;
  events: WebhookEventType[];
  description: string | null;
  enabled: boolean;
  secretSealed: string;
  /** The project's slot the endpoint holds; absent on endpoints made before slots existed (see claimSlot). */
  slot?: string;
  /**
   * How many changes have left it disabled (0 when absent). Each delivery carries the count its
   * fan-out read (deliveries.ts); one below the endpoint's count was made before a disable and
   * ends without a request, also once the endpoint is enabled again (attempt.ts). A count, not
   * an instant: the API's and the webhooks processor's clocks need not agree.
   */
  disableGeneration?: number;
  createdAt: string;
  updatedAt: string;
}

/** One of a project's endpoint slots, taken: `<projectId>#<n>`, naming the endpoint that holds it. */
export interface EndpointSlot {
  _id: string;
  projectId: string;
  endpointId: string;
  claimedAt: string;
}

export interface WebhookEndpointView {
  id: string;
  projectId: string;
  url: string;
  events: WebhookEventType[];
  description: string | null;
  enabled: boolean;
  createdAt: string;
  updatedAt: string;
}

/**
 * An endpoint's disable generation, or the one a delivery was stamped with. Endpoints and
 * deliveries written before it existed have none: 0. A delivery of 0 to an endpoint of 0 does not
 * end by it, and need not: the versions that wrote them ended every pending delivery of an
 * endpoint at once, inside the request that disabled it, so any still pending was made while the
 * endpoint was enabled; its next disable makes it 1, and they end then.
 */
export const disableGenerationOf = (stamped: { disableGeneration?: number }): number => stamped.disableGeneration ?? 0;

export const endpointsOf = (documents: DocumentStore) => documents.collection<WebhookEndpoint>(COLLECTIONS.webhookEndpoints);
const slotsOf = (documents: DocumentStore) => documents.collection<EndpointSlot>(COLLECTIONS.webhookEndpointSlots);

export const endpointView = (e: WebhookEndpoint): WebhookEndpointView => ({
  id: e._id, projectId: e.projectId, url: e.url, events: e.events, description: e.description, enabled: e.enabled, createdAt: e.createdAt, updatedAt: e.updatedAt,
});

/** What endpoint URL checks need: resolvers, and the test knob RELAY_WEBHOOK_ALLOW. */
export interface EndpointPolicy {
  dnsServers: string[];
  allow: Set<string>;
}

/** "whsec_" + 32 random bytes: what receivers key their HMAC with (the literal UTF-8 string). */
const newSigningSecret = () => `whsec_${randomBytes(32).toString('base64url')}`;

export const signingSecretOf = (endpoint: WebhookEndpoint, secrets: SecretBox): string => secrets.open(endpoint.secretSealed, SECRET_PURPOSE);

/** An endpoint whose signing secret no configured key opens: which key sealed it, never the secret. */
export interface UnopenableSigningSecret {
  endpointId: string;
  /** The key id in the sealed value (secret-box.ts), or null when it is not a sealed value. */
  sealedWithKeyId: string | null;
  reason: string;
}

export interface SigningSecretReseal {
  changed: number;
  unopenable: UnopenableSigningSecret[];
  /**
   * Endpoints whose secret is still not sealed under the current secret key after the pass (no
   * key opens it, or a concurrent edit won): while above 0, a previous key may still be needed.
   */
  remaining: number;
}

/**
 * Re-seals under the current RELAY_SECRET_KEY the signing secrets sealed under a previous one
 * (RELAY_SECRET_KEY_PREVIOUS), so that they still open once the previous key is dropped, as
 * the sender does with DKIM keys (dkim-key-vault.ts).
 */
export async function resealSigningSecrets(documents: DocumentStore, secrets: SecretBox): Promise<SigningSecretReseal> {
  const outcome: SigningSecretReseal = { changed: 0, unopenable: [], remaining: 0 };
  for (const endpoint of await endpointsOf(documents).find({})) {
    const sealedWithKeyId = sealedKeyIdOf(endpoint.secretSealed);
    if (sealedWithKeyId === secrets.keyId) continue;
    const { _v, ...rest } = endpoint;
    let secret: string;
    try {
      secret = signingSecretOf(endpoint, secrets);
    } catch (error) {
      if (!(error instanceof SecretBoxError)) throw error;
      // Under a key Relay no longer has: its deliveries record signing_failed (attempt.ts); the
      // other endpoints' secrets are re-sealed all the same.
      outcome.unopenable.push({ endpointId: endpoint._id, sealedWithKeyId, reason: error.message });
      outcome.remaining++;
      continue;
    }
    // A concurrent edit (a rotation by its owner) wins; the next start tries again.
    if (await endpointsOf(documents).replace({ ...rest, secretSealed: secrets.seal(secret, SECRET_PURPOSE) }, _v)) outcome.changed++;
    else outcome.remaining++;
  }
  return outcome;
}

const unresolvedMessage = (host: string) =>
  `${host} must resolve to public addresses only, and from Relay it does not (it does not exist, has no address, could not be looked up, or an address is not public); webhooks are only delivered to public HTTPS endpoints.`;

async function checkedUrl(raw: string, policy: EndpointPolicy): Promise<string> {
  const checked = checkWebhookUrl(raw, { allow: policy.allow });
  if (!checked.ok) throw validationError(`body.url: ${checked.message}`);
  const resolved = await checkResolvesPublic(checked.host, { dnsServers: policy.dnsServers, allow: policy.allow, port: checked.port });
  // One answer for every way of failing: telling "does not exist" from "resolves to 10.0.0.0/8"
  // would let any member map the names of Relay's internal DNS.
  if (!resolved.ok) throw new RelayError('unsafe_destination', `body.url: ${unresolvedMessage(checked.host)}`);
  return checked.url.toString();
}

function checkedEvents(events: unknown): WebhookEventType[] {
  if (!Array.isArray(events) || events.length === 0) throw validationError('body.events: must list at least one event type');
  const unknown = events.find((e) => !isWebhookEventType(e));
  if (unknown !== undefined) throw validationError(`body.events: ${JSON.stringify(unknown)} is not an event type (email.sent, email.delivered, email.bounced, email.complained, email.rejected, email.failed, email.delayed, email.suppressed)`);
  return [...new Set(events as WebhookEventType[])];
}

function checkedDescription(description: string | null | undefined): string | null {
  if (description === undefined || description === null) return null;
  if (CONTROL_CHARACTERS.test(description)) throw validationError('body.description: must not contain control characters');
  return description.trim() || null;
}

export async function createEndpoint(
  documents: DocumentStore, secrets: SecretBox, policy: EndpointPolicy,
  input: { workspaceId: string; projectId: string; url: string; events: unknown; description?: string | null }, now: Date,
): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
  const events = checkedEvents(input.events);
  const description = checkedDescription(input.description);
  const url = await checkedUrl(input.url, policy);
  const id = newId('whe');
  const slot = await claimEndpointSlot(documents, input.projectId, id, now);
  if (slot === null) throw new RelayError('conflict', `a project has at most ${MAX_ENDPOINTS_PER_PROJECT} webhook endpoints`);
  const secret = newSigningSecret();
  const endpoint: WebhookEndpoint = {
    _id: id, workspaceId: input.workspaceId, projectId: input.projectId, url, events, description, enabled: true,
    secretSealed: secrets.seal(secret, SECRET_PURPOSE), slot, createdAt: now.toISOString(), updatedAt: now.toISOString(),
  };
  try {
    return { endpoint: await endpointsOf(documents).insert(endpoint), secret };
  } catch (error) {
    await freeSlot(documents, slot, id);
    throw error;
  }
}

/**
 * Claims a free slot of the project for `endpointId`: its id, or null when the project has its
 * MAX_ENDPOINTS_PER_PROJECT endpoints. The first free slot is taken by inserting it; a taken
 * one (../slots.ts) sends the claim to the next.
 *
 * Endpoints made before slots existed hold none: they take as many slots off the end of the
 * range. Their number never grows (every endpoint made since holds a slot, kept for its life),
 * so however creations and deletions interleave, the slots taken plus those endpoints never
 * pass the limit: each creation counted at least as many of them as remain.
 */
async function claimEndpointSlot(documents: DocumentStore, projectId: string, endpointId: string, now: Date): Promise<string | null> {
  const unslotted = await endpointsOf(documents).count({ projectId, slot: null });
  return claimSlot(slotsOf(documents), projectId, MAX_ENDPOINTS_PER_PROJECT - unslotted,
    (id) => ({ _id: id, projectId, endpointId, claimedAt: now.toISOString() }), (id) => freeAbandonedSlot(documents, id, now));
}

/** Frees the slot if its endpoint does not exist ABANDONED_SLOT_MS after it was claimed; whether it may be free now. */
async function freeAbandonedSlot(documents: DocumentStore, id: string, now: Date): Promise<boolean> {
  const taken = await slotsOf(documents).get(id);
  if (!taken) return true;
  if (Date.parse(taken.claimedAt) > now.getTime() - ABANDONED_SLOT_MS) return false;
  if (await endpointsOf(documents).get(taken.endpointId)) return false;
  await slotsOf(documents).delete(id, taken._v);
  return true;
}

/** Frees the slot if `endpointId` still holds it (it may have been freed and claimed again since). */
async function freeSlot(documents: DocumentStore, id: string, endpointId: string): Promise<void> {
  const taken = await slotsOf(documents).get(id);
  if (taken?.endpointId === endpointId) await slotsOf(documents).delete(id, taken._v);
}

export async function listEndpoints(documents: DocumentStore, projectId: string): Promise<WebhookEndpoint[]> {
  return endpointsOf(documents).find({ where: { projectId }, orderBy: [['createdAt', 'asc'], ['_id', 'asc']], limit: MAX_ENDPOINTS_PER_PROJECT });
}

export async function getEndpoint(documents: DocumentStore, id: string): Promise<WebhookEndpoint> {
  const endpoint = await endpointsOf(documents).get(id);
  if (!endpoint) throw notFound(`webhook endpoint ${id} not found`);
  return endpoint;
}

export async function updateEndpoint(
  documents: DocumentStore, policy: EndpointPolicy, id: string,
  patch: { url?: string; events?: unknown; enabled?: boolean; description?: string | null }, now: Date, endings: DeliveryEndings,
): Promise<WebhookEndpoint> {
  const url = patch.url === undefined ? undefined : await checkedUrl(patch.url, policy);
  const events = patch.events === undefined ? undefined : checkedEvents(patch.events);
  const description = patch.description === undefined ? undefined : checkedDescription(patch.description);
  let unsubscribed = false;
  const updated = await updateDocument(endpointsOf(documents), id, 'webhook endpoint', (current) => {
    const enabled = patch.enabled ?? current.enabled;
    unsubscribed = events !== undefined && current.events.some((type) => !events.includes(type));
    return {
      ...current,
      ...(url !== undefined ? { url } : {}),
      ...(events !== undefined ? { events } : {}),
      ...(description !== undefined ? { description } : {}),
      enabled,
      ...(enabled ? {} : { disableGeneration: disableGenerationOf(current) + 1 }),
      updatedAt: now.toISOString(),
    };
  });
  // Its pending deliveries end shortly after, not when each next falls due; their generation keeps
  // enabling it again from sending those not ended by then. Disabled, all of them end, whatever
  // their types.
  if (!updated.enabled) endings.start(id, { closed: { reason: 'endpoint_disabled', below: disableGenerationOf(updated) } });
  else if (unsubscribed) endings.start(id, { unsubscribed: true });
  return updated;
}

export async function rotateSecret(documents: DocumentStore, secrets: SecretBox, id: string, now: Date): Promise<string> {
  const secret = newSigningSecret();
  await updateDocument(endpointsOf(documents), id, 'webhook endpoint', (current) => ({ ...current, secretSealed: secrets.seal(secret, SECRET_PURPOSE), updatedAt: now.toISOString() }));
  return secret;
}

/** Deletes the endpoint and frees its slot; its pending deliveries end shortly after (`endings`). */
export async function deleteEndpoint(documents: DocumentStore, id: string, endings: DeliveryEndings): Promise<void> {
  const endpoint = await endpointsOf(documents).get(id);
  if (!endpoint || !(await endpointsOf(documents).delete(id))) throw notFound(`webhook endpoint ${id} not found`);
  if (endpoint.slot !== undefined) await freeSlot(documents, endpoint.slot, id);
  // Every one of them, whatever its generation: the endpoint never comes back.
  endings.start(id, { closed: { reason: 'endpoint_deleted', below: Number.POSITIVE_INFINITY } });
}

export async function ensureEndpointIndexes(documents: DocumentStore): Promise<void> {
  await endpointsOf(documents).ensureIndexes([{ name: 'project', fields: [['projectId', 'asc'], ['createdAt', 'asc'], ['_id', 'asc']] }]);
}
