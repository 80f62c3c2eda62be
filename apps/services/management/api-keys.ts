// API keys: "rr_test_"/"rr_live_" + 32 random bytes (base64url). Only the sha256 of the
// whole secret is stored (unique index), so the secret is shown once, at creation, and a
// leaked database holds no usable key. Revocation is a timestamp, kept for the audit trail.
import { notFound, validationError } from '../../../domain/errors.ts';
import { keyPrefixOf, PERMISSIONS, type ApiKey, type Environment, type Permission, type Project } from '../../../domain/management.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { insertUnique, updateDocument } from './documents.ts';
import { newId, newSecret, sha256Hex } from './ids.ts';
import { normalizeName } from './names.ts';
import { reusedReads } from './reused-reads.ts';

export const apiKeysOf = (documents: DocumentStore) => documents.collection<ApiKey>(COLLECTIONS.apiKeys);

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
  const key = await insertUnique(
    apiKeysOf(documents),
    {
      _id: newId('key'),
      workspaceId: input.project.workspaceId,
      projectId: input.project._id,
      name,
      environment: input.project.environment,
      secretHash: secretHashOf(secret),
      preview: secret.slice(0, prefix.length + PREVIEW_CHARS),
      permissions,
      createdAt: now.toISOString(),
      revokedAt: null,
    },
    // 256 random bits never collide; reaching this means the random source is broken.
    'could not create a unique key; try again',
  );
  return { key, secret };
}

export async function listApiKeys(documents: DocumentStore, projectId: string): Promise<ApiKey[]> {
  return apiKeysOf(documents).find({ where: { projectId }, orderBy: [['projectId', 'asc'], ['createdAt', 'asc'], ['_id', 'asc']] });
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

/** Idempotent: revoking a revoked key keeps its first revocation time. */
export async function revokeApiKey(documents: DocumentStore, keyId: string, now: Date): Promise<ApiKey> {
  if (!(await apiKeysOf(documents).get(keyId))) throw notFound(`API key ${keyId} not found`);
  // Once written (or failed), no key found before it is trusted again in this process: every
  // write of updateDocument ends the reuse of earlier reads.
  return updateDocument(apiKeysOf(documents), keyId, 'API key', (current) =>
    current.revokedAt ? null : { ...current, revokedAt: now.toISOString() },
  );
}
