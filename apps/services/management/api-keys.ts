// API keys: "rr_test_"/"rr_live_" + 32 random bytes (base64url). Only the sha256 of the
// whole secret is stored (unique index), so the secret is shown once, at creation, and a
// leaked database holds no usable key. Revocation is a timestamp, kept for the audit trail.
//
// A project has at most MAX_LIVE_KEYS_PER_PROJECT live keys, also when creations race (in any
// number of processes): each live key holds one of the project's slots (../slots.ts), which its
// revocation frees. Revoked keys are not counted, and accumulate: the list pages them.
import { conflict, notFound, validationError } from '../../../domain/errors.ts';
import { keyPrefixOf, PERMISSIONS, type ApiKey, type Environment, type Permission, type Project } from '../../../domain/management.ts';
import type { DocumentStore, Scalar } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { claimHeldSlot, freeHeldSlot, insertHoldingSlot, type HeldSlot, type SlotHolder } from '../slots.ts';
import { insertUnique, updateDocument } from './documents.ts';
import { newId, newSecret, sha256Hex } from './ids.ts';
import { normalizeName } from './names.ts';
import { reusedReads } from './reused-reads.ts';

export const apiKeysOf = (documents: DocumentStore) => documents.collection<ApiKey & SlotHolder>(COLLECTIONS.apiKeys);
const slotsOf = (documents: DocumentStore) => documents.collection<HeldSlot>(COLLECTIONS.apiKeySlots);

/** A project's live (unrevoked) keys, at most: revoking one makes room for another. */
export const MAX_LIVE_KEYS_PER_PROJECT = 100;

/** Characters of the secret after its prefix kept for display ("rr_test_AbCd…"). */
const PREVIEW_CHARS = 4;

export interface ApiKeyView {
  id: string;
  workspaceId: string;
  projectId: string;
  name: string;
  environment: Environment;
  preview: string;
  permissions: Permission[];
  createdAt: string;
  revokedAt: string | null;
}

export const apiKeyView = (key: ApiKey): ApiKeyView => ({
  id: key._id,
  workspaceId: key.workspaceId,
  projectId: key.projectId,
  name: key.name,
  environment: key.environment,
  preview: key.preview,
  permissions: key.permissions,
  createdAt: key.createdAt,
  revokedAt: key.revokedAt,
});

export const secretHashOf = (secret: string): string => sha256Hex(secret);

export async function createApiKey(
  documents: DocumentStore,
  input: { project: Project; name: string; permissions: Permission[] },
  now: Date,
): Promise<{ key: ApiKey; secret: string }> {
  const name = normalizeName(input.name);
  const permissions = PERMISSIONS.filter((p) => input.permissions.includes(p));
  if (permissions.length === 0) throw validationError(`body.permissions must hold at least one of ${PERMISSIONS.join(', ')}`);
  const prefix = keyPrefixOf(input.project.environment);
  const secret = prefix + newSecret();
  const id = newId('key');
  const slot = await claimKeySlot(documents, input.project._id, id, now);
  if (slot === null) {
    throw conflict(`a project has at most ${MAX_LIVE_KEYS_PER_PROJECT} live API keys; revoke one (DELETE /v1/api-keys/:id) to make room`);
  }
  const key: ApiKey & SlotHolder = {
    _id: id,
    workspaceId: input.project.workspaceId,
    projectId: input.project._id,
    name,
    environment: input.project.environment,
    secretHash: secretHashOf(secret),
    preview: secret.slice(0, prefix.length + PREVIEW_CHARS),
    permissions,
    createdAt: now.toISOString(),
    revokedAt: null,
    slot,
  };
  // 256 random bits never collide; reaching this means the random source is broken.
  return { key: await insertHoldingSlot(slotsOf(documents), slot, id, () => insertUnique(apiKeysOf(documents), key, 'could not create a unique key; try again')), secret };
}

/**
 * Claims a free slot of the project for `keyId`: its id, or null when the project has its
 * MAX_LIVE_KEYS_PER_PROJECT live keys. A slot whose key was revoked (or never stored) is freed
 * by the claim that finds it (../slots.ts, claimHeldSlot).
 *
 * Live keys made before slots existed hold none: they take as many slots off the end of the
 * range. Their number never grows (every key made since holds a slot), so the slots taken plus
 * those keys never pass the limit.
 */
async function claimKeySlot(documents: DocumentStore, projectId: string, keyId: string, now: Date): Promise<string | null> {
  const unslotted = await apiKeysOf(documents).count({ projectId, revokedAt: null, slot: null });
  return claimHeldSlot(slotsOf(documents), projectId, MAX_LIVE_KEYS_PER_PROJECT - unslotted, keyId, now,
    (ids) => apiKeysOf(documents).find({ where: { _id: { in: ids }, revokedAt: null }, fields: ['slot'] }));
}

export interface ApiKeyPage {
  keys: ApiKey[];
  /** The last revoked key of the page when more revoked keys follow, else null. */
  nextCursor: string | null;
}

/**
 * The project's keys as a reader looks for them: every live key (oldest first; at most
 * MAX_LIVE_KEYS_PER_PROJECT), then the revoked keys, most recently revoked first, `limit` of
 * them a page. Live keys are what one comes to see or revoke; revoked ones accumulate without
 * bound, kept for the audit trail, so only their newest are shown unless asked for more. The
 * cursor is the last revoked key of the previous page: a page after the first holds revoked
 * keys only, and a revocation meanwhile moves nothing already passed (a revocation time never
 * changes).
 */
export async function listApiKeys(documents: DocumentStore, projectId: string, page: { limit: number; cursor?: string }): Promise<ApiKeyPage> {
  const keys = apiKeysOf(documents);
  let after: Record<string, Scalar> | undefined;
  if (page.cursor !== undefined) {
    const last = await keys.get(page.cursor);
    if (!last || last.projectId !== projectId) throw notFound(`API key ${page.cursor} (query.cursor) not found in this project`);
    if (last.revokedAt === null) throw validationError('query.cursor: must be a revoked key, the next_cursor of a previous page');
    after = { projectId, revokedAt: last.revokedAt, _id: last._id };
  }
  const live = after !== undefined ? [] : await keys.find({
    where: { projectId, revokedAt: null },
    orderBy: [['projectId', 'asc'], ['revokedAt', 'asc'], ['createdAt', 'asc'], ['_id', 'asc']],
  });
  const revoked = await keys.find({
    // A revocation time is a string: the range matches revoked keys only.
    where: { projectId, revokedAt: { gt: '' } },
    orderBy: [['projectId', 'asc'], ['revokedAt', 'desc'], ['_id', 'desc']],
    after,
    limit: page.limit + 1,
  });
  const more = revoked.length > page.limit;
  const shown = more ? revoked.slice(0, page.limit) : revoked;
  return { keys: [...live, ...shown], nextCursor: more ? shown[shown.length - 1]._id : null };
}

/**
 * The live (unrevoked) key with this secret, or null. Every request with a key authenticates,
 * and the find by the secret's hash is the costliest read of an admission, so a key found live
 * is reused (./reused-reads.ts): a revocation made by another process is seen within REUSE_MS.
 */
export async function findApiKeyBySecret(documents: DocumentStore, secret: string): Promise<ApiKey | null> {
  const hash = secretHashOf(secret);
  const key = await reusedReads<ApiKey | undefined>(documents, 'api-keys-by-secret').get(
    hash,
    async () => (await apiKeysOf(documents).find({ where: { secretHash: hash }, limit: 1 }))[0],
    (found) => found !== undefined && found.revokedAt === null,
  );
  return key && key.revokedAt === null ? key : null;
}

/** Idempotent: revoking a revoked key keeps its first revocation time. Frees the key's slot. */
export async function revokeApiKey(documents: DocumentStore, keyId: string, now: Date): Promise<ApiKey> {
  if (!(await apiKeysOf(documents).get(keyId))) throw notFound(`API key ${keyId} not found`);
  // Once written (or failed), no key found before it is trusted again in this process: every
  // write of updateDocument ends the reuse of earlier reads.
  const revoked = await updateDocument(apiKeysOf(documents), keyId, 'API key', (current) =>
    current.revokedAt ? null : { ...current, revokedAt: now.toISOString() },
  );
  // Again for a key revoked before: a revocation that died before this frees the slot now.
  if (revoked.slot !== undefined) await freeHeldSlot(slotsOf(documents), revoked.slot, revoked._id);
  return revoked;
}
