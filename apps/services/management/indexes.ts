// The management collections' indexes, created at start by every process that serves them.
// Unique indexes are what settle concurrent creation: the loser of a race gets a
// DuplicateKeyError (409 conflict), never a second document. Then, once after an upgrade from a
// version before 2026-11-28, the suppression entries (and email read models) that version keyed
// by an older form of an address are put under its canonical form (./canonical-addresses.ts):
// before any process serving them answers, since admission looks a block up by that form only.
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { canonicalizeStoredAddresses } from './canonical-addresses.ts';
import { ensureSuppressionSourceIndexes } from './suppression-sources.ts';

export async function ensureManagementIndexes(documents: DocumentStore): Promise<void> {
  await Promise.all([
    documents.collection(COLLECTIONS.users).ensureIndexes([{ name: 'email', fields: [['email', 'asc']], unique: true }]),
    documents.collection(COLLECTIONS.sessions).ensureIndexes([{ name: 'user', fields: [['userId', 'asc'], ['expiresAt', 'asc']] }]),
    documents.collection(COLLECTIONS.memberships).ensureIndexes([
      { name: 'user', fields: [['userId', 'asc'], ['workspaceId', 'asc']] },
      { name: 'workspace', fields: [['workspaceId', 'asc'], ['createdAt', 'asc']] },
    ]),
    documents.collection(COLLECTIONS.projects).ensureIndexes([
      { name: 'workspace_name', fields: [['workspaceId', 'asc'], ['name', 'asc']], unique: true },
      // The DNS re-check's pass (apps/services/domain-recheck.ts): the verified domains due.
      { name: 'recheck_due', fields: [['status', 'asc'], ['verifiedBy', 'asc'], ['lastCheckedAt', 'asc']] },
    ]),
    documents.collection(COLLECTIONS.domains).ensureIndexes([
      { name: 'workspace_name', fields: [['workspaceId', 'asc'], ['name', 'asc']], unique: true },
      // The DNS re-check's pass (apps/services/domain-recheck.ts): the verified domains due.
      { name: 'recheck_due', fields: [['status', 'asc'], ['verifiedBy', 'asc'], ['lastCheckedAt', 'asc']] },
    ]),
    documents.collection(COLLECTIONS.apiKeys).ensureIndexes([
      { name: 'secret', fields: [['secretHash', 'asc']], unique: true },
      { name: 'project', fields: [['projectId', 'asc'], ['createdAt', 'asc']] },
      // The live keys a creation counts and a list shows, and the revoked ones by time of revocation (api-keys.ts).
      { name: 'project_revoked', fields: [['projectId', 'asc'], ['revokedAt', 'asc'], ['_id', 'asc']] },
    ]),
    documents.collection(COLLECTIONS.invitations).ensureIndexes([
      { name: 'email', fields: [['email', 'asc']] },
      { name: 'workspace', fields: [['workspaceId', 'asc'], ['createdAt', 'asc']] },
    ]),
    documents.collection(COLLECTIONS.suppressions).ensureIndexes([
      { name: 'workspace', fields: [['workspaceId', 'asc'], ['_id', 'asc']] },
    ]),
    ensureSuppressionSourceIndexes(documents),
  ]);
  await canonicalizeStoredAddresses(documents);
}
