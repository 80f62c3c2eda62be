// Manual suppressions: workspace-wide blocks owners and admins add and remove. Bounces and
// complaints write entries of the same shape (same _id), so removing an address unblocks it
// whatever put it there.
import { conflict, notFound, validationError } from '../../../domain/errors.ts';
import { isPlainAddress, normalizeAddress, suppressionIdOf, type SuppressionEntry } from '../../../domain/management.ts';
import { DuplicateKeyError, type DocumentStore, type Where } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { CONTROL_CHARACTERS } from './names.ts';

export const suppressionsOf = (documents: DocumentStore) => documents.collection<SuppressionEntry>(COLLECTIONS.suppressions);

export interface SuppressionView { address: string; reason: SuppressionEntry['reason']; emailId: string | null; createdAt: string }

export const suppressionView = (entry: SuppressionEntry): SuppressionView => ({
  address: entry.address, reason: entry.reason, emailId: entry.emailId, createdAt: entry.createdAt,
});

export function normalizeSuppressedAddress(input: string, field: string): string {
  const address = normalizeAddress(input);
  if (!isPlainAddress(address) || CONTROL_CHARACTERS.test(address)) {
    throw validationError(`${field} ${JSON.stringify(input.trim().slice(0, 254))} is not an email address`);
  }
  return address;
}

export async function addSuppression(documents: DocumentStore, workspaceId: string, input: string, now: Date): Promise<SuppressionEntry> {
  const address = normalizeSuppressedAddress(input, 'body.address');
  try {
    return await suppressionsOf(documents).insert({
      _id: suppressionIdOf(workspaceId, address), workspaceId, address, reason: 'manual', emailId: null, createdAt: now.toISOString(), lastEventId: null,
    });
  } catch (error) {
    if (error instanceof DuplicateKeyError) throw conflict(`${address} is already suppressed in this workspace`);
    throw error;
  }
}

export async function removeSuppression(documents: DocumentStore, workspaceId: string, input: string): Promise<void> {
  const address = normalizeSuppressedAddress(input, 'path.address');
  if (!(await suppressionsOf(documents).delete(suppressionIdOf(workspaceId, address)))) {
    throw notFound(`${address} is not suppressed in this workspace`);
  }
}

/** A page in address order; `cursor` is the last address of the previous page. */
/**
 * A page of the list in address order. `prefix` (normalized like an address) keeps the
 * addresses that begin with it: "bob@" finds bob at every domain, "bob@example.com" that one.
 */
export async function listSuppressions(
  documents: DocumentStore,
  workspaceId: string,
  page: { limit: number; cursor?: string; prefix?: string },
): Promise<{ entries: SuppressionEntry[]; nextCursor: string | null }> {
  const prefix = page.prefix === undefined ? '' : normalizeAddress(page.prefix);
  // _id is "<workspaceId>:<address>", so a prefix of the address is a range of _id.
  const where: Where = { workspaceId };
  if (prefix !== '') where._id = { gte: `${workspaceId}:${prefix}`, lt: `${workspaceId}:${prefix}\u{10ffff}` };
  const entries = await suppressionsOf(documents).find({
    where,
    orderBy: [['workspaceId', 'asc'], ['_id', 'asc']],
    after: page.cursor === undefined ? undefined : { workspaceId, _id: suppressionIdOf(workspaceId, page.cursor) },
    limit: page.limit + 1,
  });
  const more = entries.length > page.limit;
  const shown = more ? entries.slice(0, page.limit) : entries;
  return { entries: shown, nextCursor: more ? shown[shown.length - 1].address : null };
}
