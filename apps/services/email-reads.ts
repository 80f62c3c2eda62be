// Reads of sent emails from the email read model, within a key's scope: an email:read key
// sees its project, an email:send key only the emails it created.
import type { Status } from '../../domain/email/status.ts';
import { RelayError } from '../../domain/errors.ts';
import { asciiDomainName, canonicalHost } from '../../domain/dns-names.ts';
import { canonicalAddress } from '../../domain/mailbox.ts';
import type { Condition, DocumentStore, IndexSpec, Where } from '../../infra/ports/document-store.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import { applyToEmailView, type EmailView } from '../../projections/email-view.ts';
import { COLLECTIONS } from './collections.ts';
import { readEmailStream } from './email-stream.ts';
import { deliveryViewsOf } from './webhooks/deliveries.ts';

export interface ReadScope {
  projectId: string;
  /** Set for keys that may read only their own emails. */
  apiKeyId: string | null;
}

export interface ListQuery {
  sender?: string;
  domain?: string;
  after?: string;
  before?: string;
  limit?: number;
  cursor?: string;
  status?: Status;
  recipient?: string;
}

const inScope = (view: EmailView | null, scope: ReadScope): view is EmailView =>
  view !== null && view.projectId === scope.projectId && (scope.apiKeyId === null || view.apiKeyId === scope.apiKeyId);

const notInScope = (id: string) => new RelayError('not_found', `email ${id} was not found`);

/**
 * The read model is updated asynchronously; an email admitted a moment ago may not be in it
 * yet. Its stream is the source of truth, so a miss is answered by projecting the stream
 * on the spot: a client can always read back the id it was just given.
 */
async function viewOf(documents: DocumentStore, events: EventStore, id: string): Promise<EmailView | null> {
  const stored = await documents.collection<EmailView>(COLLECTIONS.emails).get(id);
  if (stored) return stored;
  return (await readEmailStream(events, id)).reduce(applyToEmailView, null as EmailView | null);
}

/**
 * The email with its timeline; its webhook deliveries (state and attempt logs, newest first,
 * at most 100) come from the webhooks processor's own collection, which changes with every
 * attempt rather than with the email's stream.
 */
export async function getEmail(documents: DocumentStore, events: EventStore, scope: ReadScope, id: string): Promise<EmailView> {
  const view = await viewOf(documents, events, id);
  if (!inScope(view, scope)) throw notInScope(id);
  return { ...view, webhookDeliveries: await deliveryViewsOf(documents, id) };
}

/**
 * The first instant in createdAt's whole milliseconds at or after `dateTime` (an RFC 3339
 * date-time, as the API checked it). A bound between two milliseconds (".0005") selects what
 * the next millisecond does, for `after` (>=) as for `before` (<); Date.parse would cut it
 * down to the previous one and shift both by one email. Upper-cased first: Date.parse reads
 * only "T" and "Z" by the standard (RFC 3339 allows "t" and "z").
 */
function storedInstantAtOrAfter(dateTime: string): number {
  const beyondMilliseconds = /\.\d{3}(\d*)/.exec(dateTime)?.[1] ?? '';
  return Date.parse(dateTime.toUpperCase()) + (/[1-9]/.test(beyondMilliseconds) ? 1 : 0);
}

// createdAt is stored as toISOString writes it, compared as a string: four-digit years only.
// Beyond them toISOString writes "+010000-…" or "-000001-…", which do not sort as instants
// ("+010000-…" before "2026-…"), so bounds outside are moved to the edges, where they select
// the same emails.
const FIRST_STORABLE = Date.parse('0000-01-01T00:00:00.000Z');
const LAST_STORABLE = Date.parse('9999-12-31T23:59:59.999Z');
const stored = (instant: number) => new Date(instant).toISOString();

/** `after` (inclusive) and `before` (exclusive) as a condition on createdAt, or null without either. */
function createdAtRange(after: string | undefined, before: string | undefined): Condition | null {
  const range: Condition = {};
  if (after !== undefined) {
    const from = storedInstantAtOrAfter(after);
    if (from > LAST_STORABLE) range.gt = stored(LAST_STORABLE);
    else range.gte = stored(Math.max(from, FIRST_STORABLE));
  }
  if (before !== undefined) {
    const to = storedInstantAtOrAfter(before);
    if (to > LAST_STORABLE) range.lte = stored(LAST_STORABLE);
    else range.lt = stored(Math.max(to, FIRST_STORABLE));
  }
  return Object.keys(range).length > 0 ? range : null;
}

/**
 * The fields a list answer shows (EmailSummary, apps/api/plugins/emails.ts): a page reads only
 * these of each email, not its timeline, recipients and the rest. The scope and the cursor
 * need nothing more: the scope is in the query, and the next cursor is an _id.
 */
export const LISTED_FIELDS = ['fromAddress', 'toAddresses', 'subject', 'status', 'testMode', 'failureCode', 'createdAt', 'sentAt'] as const satisfies ReadonlyArray<keyof EmailView>;

export type ListedEmail = Pick<EmailView, '_id' | (typeof LISTED_FIELDS)[number]>;

/** A `domain` filter as admission keeps a sender's domain; a Unicode name with no ASCII form stays as written and matches nothing. */
function domainFilter(written: string): string {
  const name = canonicalHost(written);
  return (/[^\x00-\x7f]/.test(name) ? asciiDomainName(name) : null) ?? name;
}

export async function listEmails(documents: DocumentStore, events: EventStore, scope: ReadScope, query: ListQuery): Promise<{ items: ListedEmail[]; nextCursor: string | null }> {
  const limit = query.limit ?? 50;
  const where: Where = { projectId: scope.projectId };
  if (scope.apiKeyId !== null) where.apiKeyId = scope.apiKeyId;
  // Addresses and domains as admission stored them (domain/mailbox.ts): `"ann"@d` finds ann@d,
  // and a domain written in Unicode its ASCII form.
  if (query.sender !== undefined) where.fromAddress = canonicalAddress(query.sender.trim());
  if (query.domain !== undefined) where.fromDomain = domainFilter(query.domain);
  if (query.status !== undefined) where.status = query.status;
  if (query.recipient !== undefined) where.toAddresses = { contains: canonicalAddress(query.recipient.trim()) };
  const range = createdAtRange(query.after, query.before);
  if (range) where.createdAt = range;

  let after: Record<string, string> | undefined;
  if (query.cursor !== undefined) {
    // The cursor is any email of the key's scope, projected yet or not.
    const cursor = await viewOf(documents, events, query.cursor);
    if (!inScope(cursor, scope)) throw notInScope(query.cursor);
    after = { createdAt: cursor.createdAt, _id: cursor._id };
  }
  const page = await documents.collection<EmailView>(COLLECTIONS.emails).find({
    where,
    orderBy: [['createdAt', 'desc'], ['_id', 'desc']],
    limit: limit + 1,
    after,
    fields: LISTED_FIELDS,
  });
  // Keyset paging on (createdAt, _id), both fixed at admission: an email inserted while a
  // client pages lands before or after its cursor, never shifting what the next page holds.
  const items = page.slice(0, limit);
  return { items, nextCursor: page.length > limit ? items[items.length - 1]._id : null };
}

// Each filter's index ends in the list's order (createdAt, _id, both descending), so a filtered
// page is a seek into the filter's emails, newest first, and reads about a page of them; an
// index that stopped at createdAt would leave the planner walking the whole project in
// project_created's order, testing every email against the filter. ensureIndexes at start
// replaces an index whose definition under its name changed.
const LIST_ORDER: IndexSpec['fields'] = [['createdAt', 'desc'], ['_id', 'desc']];

export const EMAIL_VIEW_INDEXES: IndexSpec[] = [
  { name: 'project_created', fields: [['projectId', 'asc'], ...LIST_ORDER] },
  { name: 'key_created', fields: [['projectId', 'asc'], ['apiKeyId', 'asc'], ...LIST_ORDER] },
  { name: 'project_sender', fields: [['projectId', 'asc'], ['fromAddress', 'asc'], ...LIST_ORDER] },
  { name: 'project_domain', fields: [['projectId', 'asc'], ['fromDomain', 'asc'], ...LIST_ORDER] },
  { name: 'project_status', fields: [['projectId', 'asc'], ['status', 'asc'], ...LIST_ORDER] },
  // Each To address is an entry of its own (arrayField), so `recipient` seeks as the others do.
  { name: 'project_recipient', fields: [['projectId', 'asc'], ['toAddresses', 'asc'], ...LIST_ORDER], arrayField: 'toAddresses' },
];
