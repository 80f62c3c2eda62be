// Manual suppressions: workspace-wide blocks owners and admins add and remove. Bounces and
// complaints write entries of the same shape (same _id), so removing an address unblocks it
// whatever put it there.
//
// Every change is also an event on the workspace's stream `suppressions-<workspaceId>`
// (RecipientSuppressed, RecipientUnsuppressed: who or which report, domain/suppressions/events.ts),
// so the list's history replays like everything else. The list stays the document that admission
// reads, written as before; no transaction spans the two stores, so the order of the two writes
// decides what a crash between them leaves, and it is chosen so that the list may block more than
// its history says, never less: an addition writes the entry first and then the event (a crash
// leaves an entry whose event is missing; retrying finds the entry and answers 409), a removal
// appends the event first and then deletes the entry (a crash leaves the address blocked; the
// remover's retry deletes it and records the removal once more).
//
// An addition and a removal of one address may overlap, in any processes, with no lock across
// the stores; two rules keep the history's last word on the address the list's once both are
// done. A removal deletes the entry only at the version it read before appending its event, and
// otherwise reads and records again. An addition, once its event is appended, settles the entry
// (settleAddition): it rewrites whatever entry is there (a compare-and-set that changes only its
// version), so a removal that read it earlier, whose event may come before the addition's, fails
// to delete it and records itself again, after; or, finding the entry gone (removed while the
// addition was being recorded), it appends a RecipientUnsuppressed after its own event, naming
// its own cause: the addition gave way to that removal. (Only a new addition of the address
// between that read and that append can leave the list blocking more than the history says,
// which the order above allows anyway.)
import { conflict, notFound, validationError } from '../../../domain/errors.ts';
import { isPlainAddress, normalizeAddress, suppressionIdOf, type SuppressionEntry } from '../../../domain/management.ts';
import { asciiDomainName } from '../../../domain/dns-names.ts';
import { canonicalAddress, MAX_MAILBOX_LENGTH, parseAddress } from '../../../domain/mailbox.ts';
import { randomUUID } from 'node:crypto';
import { originOfRequest, type CommandOrigin } from '../../../domain/events/metadata.ts';
import { suppressionStreamId, SUPPRESSION_SCHEMA_VERSIONS, type RecipientSuppressed, type SuppressionCause, type SuppressionEvent } from '../../../domain/suppressions/events.ts';
import { DuplicateKeyError, type DocumentStore, type Where } from '../../../infra/ports/document-store.ts';
import type { EventStore } from '../../../infra/ports/event-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { CONTROL_CHARACTERS } from './names.ts';
import { markHandled } from './suppression-sources.ts';

export const suppressionsOf = (documents: DocumentStore) => documents.collection<SuppressionEntry>(COLLECTIONS.suppressions);

export interface SuppressionView { address: string; reason: SuppressionEntry['reason']; emailId: string | null; createdAt: string }

export const suppressionView = (entry: SuppressionEntry): SuppressionView => ({
  address: entry.address, reason: entry.reason, emailId: entry.emailId, createdAt: entry.createdAt,
});

/**
 * The address as the list keys it. An address admission accepts (parseAddress, the send side's
 * rule) is taken in the canonical form admission looks it up by (canonicalAddress), so one that
 * needs its quotes (`"ann x"@example.org`, which a bounce can put on the list) can be named,
 * added, removed and used as a cursor like any other, whichever way it is written. Text
 * admission refuses but the older, plainer rule accepted (isPlainAddress: non-ASCII local parts,
 * for one) is kept lower-cased as before, so entries added under that rule can still be named.
 */
export function normalizeSuppressedAddress(input: string, field: string): string {
  const trimmed = input.trim();
  if (!CONTROL_CHARACTERS.test(trimmed)) {
    if (parseAddress(trimmed).ok) return canonicalAddress(trimmed);
    const address = normalizeAddress(trimmed);
    if (isPlainAddress(address)) return address;
  }
  throw validationError(`${field} ${JSON.stringify(trimmed.slice(0, 254))} is not an email address`);
}

export interface SuppressionStores {
  documents: DocumentStore;
  events: EventStore;
}

/**
 * Appends a change of the list to its workspace's stream (any revision: changes of different
 * addresses do not conflict). `eventId` names a change that may be recorded again (an automatic
 * block whose report comes again): the store then keeps the first append only.
 */
export async function recordSuppressionChange(events: EventStore, change: SuppressionEvent, origin: CommandOrigin, eventId: string = randomUUID()): Promise<void> {
  await events.append(suppressionStreamId(change.data.workspaceId), [{
    id: eventId,
    type: change.type,
    data: change.data as unknown as Record<string, unknown>,
    metadata: { ...origin, schemaVersion: SUPPRESSION_SCHEMA_VERSIONS[change.type] },
  }], { expectedRevision: 'any' });
}

/**
 * Appends an addition's RecipientSuppressed, its entry being on the list, and settles the entry
 * (top of this file): after it, no removal that began before the event can leave the history
 * saying the address is blocked while the list does not.
 */
export async function recordAddition(stores: SuppressionStores, change: RecipientSuppressed, origin: CommandOrigin, now: () => Date, eventId?: string): Promise<void> {
  await recordSuppressionChange(stores.events, change, origin, eventId);
  await settleAddition(stores, change, origin, now);
}

/** The second half of recordAddition, for an addition whose event may already be appended. */
export async function settleAddition(stores: SuppressionStores, change: RecipientSuppressed, origin: CommandOrigin, now: () => Date): Promise<void> {
  const { workspaceId, address, reason, by } = change.data;
  const entries = suppressionsOf(stores.documents);
  for (;;) {
    const entry = await entries.get(suppressionIdOf(workspaceId, address));
    if (!entry) {
      await recordSuppressionChange(stores.events, { type: 'RecipientUnsuppressed', data: { workspaceId, address, reason, by, occurredAt: now().toISOString() } }, origin);
      return;
    }
    const { _v, ...unchanged } = entry;
    if (await entries.replace(unchanged, _v)) return;
  }
}

export async function addSuppression(stores: SuppressionStores, workspaceId: string, input: string, now: Date, by: SuppressionCause, origin: CommandOrigin = originOfRequest(randomUUID())): Promise<SuppressionEntry> {
  const address = normalizeSuppressedAddress(input, 'body.address');
  let entry: SuppressionEntry;
  try {
    entry = await suppressionsOf(stores.documents).insert({
      _id: suppressionIdOf(workspaceId, address), workspaceId, address, reason: 'manual', emailId: null, createdAt: now.toISOString(), lastEventId: null,
    });
  } catch (error) {
    if (error instanceof DuplicateKeyError) throw conflict(`${address} is already suppressed in this workspace`);
    throw error;
  }
  await recordAddition(stores, { type: 'RecipientSuppressed', data: { workspaceId, address, reason: 'manual', by, occurredAt: now.toISOString() } }, origin, () => now);
  return entry;
}

/**
 * An address as the list keys it (normalizeSuppressedAddress), or, for text today's rules refuse,
 * as an older rule keyed it: lower-cased (a quoted local part holding "<", blocked before
 * admission refused such addresses), with today's refusal beside it. So no block outlives the
 * rules that made it: it can end a page (the cursor) and be removed.
 */
function keyedAddress(input: string, field: string): { address: string; refusal: unknown } {
  try {
    return { address: normalizeSuppressedAddress(input, field), refusal: null };
  } catch (refusal) {
    const trimmed = input.trim();
    if (CONTROL_CHARACTERS.test(trimmed) || trimmed.length > MAX_MAILBOX_LENGTH) throw refusal;
    return { address: normalizeAddress(trimmed), refusal };
  }
}

/** A list cursor: the last address of a page, as the list keys it. */
export const suppressionCursor = (input: string): string => keyedAddress(input, 'query.cursor').address;

/** The address of an entry to remove; text today's rules refuse names only an entry that exists (else its 400 stands). */
async function addressToRemove(documents: DocumentStore, workspaceId: string, input: string): Promise<string> {
  const { address, refusal } = keyedAddress(input, 'path.address');
  if (refusal !== null && !(await suppressionsOf(documents).get(suppressionIdOf(workspaceId, address)))) throw refusal;
  return address;
}

/** Removes the entry; resolves with its address as the list keys it. */
export async function removeSuppression(stores: SuppressionStores, workspaceId: string, input: string, now: Date, by: SuppressionCause, origin: CommandOrigin = originOfRequest(randomUUID())): Promise<string> {
  const address = await addressToRemove(stores.documents, workspaceId, input);
  const entries = suppressionsOf(stores.documents);
  for (;;) {
    const entry = await entries.get(suppressionIdOf(workspaceId, address));
    if (!entry) throw notFound(`${address} is not suppressed in this workspace`);
    await recordSuppressionChange(stores.events, { type: 'RecipientUnsuppressed', data: { workspaceId, address, reason: entry.reason, by, occurredAt: now.toISOString() } }, origin);
    // Before the entry goes: its bounce or complaint, handled again later, must not bring it back.
    if (entry.lastEventId !== null) await markHandled(stores.documents, { workspaceId, eventId: entry.lastEventId, address: entry.address }, now);
    // Changed or gone since it was read: an addition settled it after its own event, which may
    // come after this removal's, so the removal is recorded again (or another removal took it).
    if (await entries.delete(entry._id, entry._v)) return address;
  }
}

/**
 * A `prefix` as entries keep addresses (normalizeSuppressedAddress): a whole address in its
 * canonical form, a domain written in Unicode in its ASCII form ("kunde@münchen.example" finds
 * kunde@xn--mnchen-3ya.example). A Unicode label cut short ("kunde@münch") is converted as the
 * whole label it could be, whose ASCII form begins no longer label's: it finds nothing of
 * münchen.example (apps/api/INTERFACE-DECISIONS.md).
 */
function prefixFilter(written: string): string {
  const trimmed = written.trim();
  if (parseAddress(trimmed).ok) return canonicalAddress(trimmed);
  const prefix = normalizeAddress(trimmed);
  const at = prefix.lastIndexOf('@');
  if (at < 0 || !/[^\x00-\x7f]/.test(prefix.slice(at + 1))) return prefix;
  const domain = asciiDomainName(prefix.slice(at + 1));
  return domain === null ? prefix : `${prefix.slice(0, at + 1)}${domain}`;
}

/**
 * A page of the list in address order; `cursor` is the last address of the previous page.
 * `prefix` (prefixFilter) keeps the addresses that begin with it: "bob@" finds bob at every
 * domain, "bob@example.com" that one.
 */
export async function listSuppressions(
  documents: DocumentStore,
  workspaceId: string,
  page: { limit: number; cursor?: string; prefix?: string },
): Promise<{ entries: SuppressionEntry[]; nextCursor: string | null }> {
  const prefix = page.prefix === undefined ? '' : prefixFilter(page.prefix);
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

/**
 * The whole list in address order, one page of `pageSize` entries at a time. A page is read only
 * when the consumer asks for the next one, so a list of millions is never in memory at once and a
 * consumer that stops asking (an export whose client stops reading) stops the reads.
 */
export async function* suppressionPages(documents: DocumentStore, workspaceId: string, pageSize: number): AsyncGenerator<SuppressionEntry[], void, undefined> {
  let cursor: string | undefined;
  do {
    const page = await listSuppressions(documents, workspaceId, { limit: pageSize, cursor });
    yield page.entries;
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
}
