// Reads of sent emails from the email read model, within a key's scope: an email:read key
// sees its project, an email:send key only the emails it created.
import type { Status } from '../../domain/email/status.ts';
import { RelayError } from '../../domain/errors.ts';
import type { DocumentStore, IndexSpec, Where } from '../../infra/ports/document-store.ts';
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
 * The first instant in createdAt's whole milliseconds at or after `dateTime`. A bound between
 * two milliseconds (".0005") selects what the next millisecond does, for `after` (>=) as for
 * `before` (<); Date.parse would cut it down to the previous one and shift both by one email.
 */
function storedInstantAtOrAfter(dateTime: string): string {
  const beyondMilliseconds = /\.\d{3}(\d*)/.exec(dateTime)?.[1] ?? '';
  return new Date(Date.parse(dateTime) + (/[1-9]/.test(beyondMilliseconds) ? 1 : 0)).toISOString();
}

/**
 * The fields a list answer shows (EmailSummary, apps/api/plugins/emails.ts): a page reads only
 * these of each email, not its timeline, recipients and the rest. The scope and the cursor
 * need nothing more: the scope is in the query, and the next cursor is an _id.
 */
export const LISTED_FIELDS = ['fromAddress', 'toAddresses', 'subject', 'status', 'testMode', 'failureCode', 'createdAt', 'sentAt'] as const satisfies ReadonlyArray<keyof EmailView>;

export type ListedEmail = Pick<EmailView, '_id' | (typeof LISTED_FIELDS)[number]>;

export async function listEmails(documents: DocumentStore, events: EventStore, scope: ReadScope, query: ListQuery): Promise<{ items: ListedEmail[]; nextCursor: string | null }> {
  const limit = query.limit ?? 50;
  const where: Where = { projectId: scope.projectId };
  if (scope.apiKeyId !== null) where.apiKeyId = scope.apiKeyId;
  if (query.sender !== undefined) where.fromAddress = query.sender.trim().toLowerCase();
  if (query.domain !== undefined) where.fromDomain = query.domain.trim().toLowerCase().replace(/\.$/, '');
  if (query.status !== undefined) where.status = query.status;
  if (query.recipient !== undefined) where.toAddresses = { contains: query.recipient.trim().toLowerCase() };
  // Dates are compared as UTC ISO strings, the form in which createdAt is stored.
  const range: { gte?: string; lt?: string } = {};
  if (query.after !== undefined) range.gte = storedInstantAtOrAfter(query.after);
  if (query.before !== undefined) range.lt = storedInstantAtOrAfter(query.before);
  if (range.gte !== undefined || range.lt !== undefined) where.createdAt = range;

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

export const EMAIL_VIEW_INDEXES: IndexSpec[] = [
  { name: 'project_created', fields: [['projectId', 'asc'], ['createdAt', 'desc'], ['_id', 'desc']] },
  { name: 'key_created', fields: [['projectId', 'asc'], ['apiKeyId', 'asc'], ['createdAt', 'desc'], ['_id', 'desc']] },
  { name: 'project_sender', fields: [['projectId', 'asc'], ['fromAddress', 'asc'], ['createdAt', 'desc']] },
  { name: 'project_domain', fields: [['projectId', 'asc'], ['fromDomain', 'asc'], ['createdAt', 'desc']] },
  { name: 'project_status', fields: [['projectId', 'asc'], ['status', 'asc'], ['createdAt', 'desc']] },
  { name: 'project_recipient', fields: [['projectId', 'asc'], ['toAddresses', 'asc'], ['createdAt', 'desc']] },
];
