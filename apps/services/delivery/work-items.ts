// The sender's schedule: one document per email with a delivery step due, in the `deliveries`
// collection, found by due time. It is derived from the email's stream (never the other way
// round): the sender's consumer syncs it on every lifecycle event, and whoever finds it stale
// syncs it again, so a crash anywhere loses no step and a restart forgets no retry.
import { claimDeadline, type DeliveryPolicy } from '../../../domain/email/delivery.ts';
import { pendingRecipients, type EmailState } from '../../../domain/email/state.ts';
import type { CommandOrigin } from '../../../domain/events/metadata.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import type { EventStore } from '../../../infra/ports/event-store.ts';
import { durableSoFar } from '../../../infra/ports/durability.ts';
import { COLLECTIONS } from '../collections.ts';
import type { Loaded } from '../command-handler.ts';
import { loadEmail } from '../email-stream.ts';
import { writeOver } from '../write-over.ts';

export interface WorkItem {
  _id: string;
  /**
   * attempt: claim and send attempt `attempt`; takeover: claim and send attempt `attempt`, whose
   * open claim never began a transaction, if it still has not; recover: declare the recipients
   * whose transaction began delivery_unknown if the claim of attempt `attempt` is still open.
   */
  step: 'attempt' | 'takeover' | 'recover';
  attempt: number;
  dueAt: string;
  /** The stream revision this item was derived from: an older view never overwrites a newer one. */
  streamRevision: number;
  /** Correlation and cause for the events the step appends. */
  origin: CommandOrigin;
  /** takeover and recover: when the open claim was appended. */
  claimedAt?: string;
  /** attempt and takeover: the domain of the first recipient the step is for (its site schedules it); null when only BCC recipients are left. */
  domain?: string | null;
  /**
   * The email's workspace: the sender gives workspaces turns at its schedule. Absent from items
   * written before it was recorded; those take their turns together, as one workspace
   * (workspaceOfItem).
   */
  workspaceId?: string;
}

/** The workspace whose turn an item takes: '' for items that do not name theirs. */
export const workspaceOfItem = (item: Pick<WorkItem, 'workspaceId'>): string => item.workspaceId ?? '';

export const workItems = (documents: DocumentStore) => documents.collection<WorkItem>(COLLECTIONS.deliveries);

export async function ensureWorkItemIndexes(documents: DocumentStore): Promise<void> {
  await workItems(documents).ensureIndexes([
    { name: 'dueAt', fields: [['dueAt', 'asc'], ['_id', 'asc']] },
    // Open claims, for the sender's start and /metrics.
    { name: 'step_dueAt', fields: [['step', 'asc'], ['dueAt', 'asc'], ['_id', 'asc']] },
    // Workspaces' turns: which workspaces have items due (the first due item past a workspace,
    // one seek each) and one workspace's due items, earliest first (dueWorkspaceItems).
    { name: 'workspaceId_dueAt', fields: [['workspaceId', 'asc'], ['dueAt', 'asc'], ['_id', 'asc']] },
  ]);
}

/** Items of open claims (steps takeover and recover), earliest due first. */
export const openClaimItems = (documents: DocumentStore, limit: number): Promise<WorkItem[]> =>
  workItems(documents).find({ where: { step: { in: ['takeover', 'recover'] } }, orderBy: [['step', 'asc'], ['dueAt', 'asc'], ['_id', 'asc']], limit });

/** Open claims and when the oldest was appended (metrics: relay_delivery_open_claims, …_oldest_open_claim_age_seconds). */
export async function openClaimsSummary(documents: DocumentStore): Promise<{ count: number; oldestClaimedAt: string | null }> {
  const items = workItems(documents);
  const count = await items.count({ step: { in: ['takeover', 'recover'] } });
  if (count === 0) return { count, oldestClaimedAt: null };
  const firsts = await Promise.all((['takeover', 'recover'] as const).map((step) =>
    items.find({ where: { step }, orderBy: [['step', 'asc'], ['dueAt', 'asc'], ['_id', 'asc']], limit: 1 })));
  const times = firsts.flat().map((item) => item.claimedAt ?? item.dueAt);
  return { count, oldestClaimedAt: times.length === 0 ? null : times.reduce((a, b) => (a < b ? a : b)) };
}

/** Items due at `now`, earliest first. */
export const dueWorkItems = (documents: DocumentStore, now: Date, limit: number): Promise<WorkItem[]> =>
  workItems(documents).find({ where: { dueAt: { lte: now.toISOString() } }, orderBy: [['dueAt', 'asc'], ['_id', 'asc']], limit });

/**
 * The first workspace after `after` that has items in the schedule, in workspace order (the
 * items that name no workspace first, after = null, then by workspaceId), and whether any of its
 * items is due: its earliest item says, read whatever its due time, so that one read passes a
 * workspace whose mail is all due later (a filter on due time in the same read would walk all
 * of it). Null past the last. Repeated from the workspace it returns, it walks every workspace
 * with items, one read each.
 */
export async function scanNextWorkspace(documents: DocumentStore, now: Date, after: string | null): Promise<{ workspace: string; due: boolean } | null> {
  const items = workItems(documents);
  const dueBy = now.toISOString();
  if (after === null) {
    const [unnamed] = await items.find({ where: { workspaceId: null }, orderBy: [['dueAt', 'asc'], ['_id', 'asc']], limit: 1 });
    if (unnamed) return { workspace: '', due: unnamed.dueAt <= dueBy };
  }
  // A range matches strings only: never the items without a workspace, which came first.
  const [first] = await items.find({ where: { workspaceId: { gt: after ?? '' } }, orderBy: [['workspaceId', 'asc'], ['dueAt', 'asc'], ['_id', 'asc']], limit: 1 });
  return first ? { workspace: workspaceOfItem(first), due: first.dueAt <= dueBy } : null;
}

/** A workspace's items due at `now` after `after` (by dueAt, then _id; null: from its earliest), earliest first. */
export function dueWorkspaceItems(documents: DocumentStore, workspace: string, now: Date, after: WorkItem | null, limit: number): Promise<WorkItem[]> {
  return workItems(documents).find({
    // By dueAt and _id within the workspace: the cursor then bounds dueAt, a range the index seeks.
    where: { workspaceId: workspace === '' ? null : workspace, dueAt: { lte: now.toISOString() } },
    orderBy: [['dueAt', 'asc'], ['_id', 'asc']],
    ...(after ? { after: { dueAt: after.dueAt, _id: after._id } } : {}),
    limit,
  });
}

/** What the schedule should say for an email in `state`; null when nothing more is due. */
export function desiredWorkItem(state: EmailState, revision: number, origin: CommandOrigin, policy: DeliveryPolicy): WorkItem | null {
  const d = state.delivery;
  if (!state.emailId || state.admission?.status !== 'queued' || d.finished) return null;
  const pending = pendingRecipients(d);
  // Nobody left to send to (reports made every recipient final): no attempt or takeover has
  // anything to do, and an item left due would be run again and again. The state finishes such
  // a delivery when no claim is open (state.ts); this holds under a claim too, whose holder, if
  // it lives, still records its outcome. Only a claim whose transactions began owes a recovery.
  if (pending.length === 0 && (d.openClaim?.begun.length ?? 0) === 0) return null;
  const first = pending.map((index) => state.visibleAddresses[index]).find((a) => a !== undefined);
  const domain = first ? first.slice(first.lastIndexOf('@') + 1).toLowerCase() : null;
  const deadline = claimDeadline(state, policy);
  const workspaceId = state.message?.workspaceId;
  const of = workspaceId === undefined ? {} : { workspaceId };
  if (d.openClaim && deadline) {
    // A takeover sends, so its site schedules it as it does an attempt.
    return deadline.kind === 'takeover'
      ? { _id: state.emailId, step: 'takeover', attempt: d.openClaim.attempt, dueAt: deadline.at, streamRevision: revision, origin, claimedAt: d.openClaim.claimedAt, domain, ...of }
      : { _id: state.emailId, step: 'recover', attempt: d.openClaim.attempt, dueAt: deadline.at, streamRevision: revision, origin, claimedAt: d.openClaim.claimedAt, ...of };
  }
  return { _id: state.emailId, step: 'attempt', attempt: d.attempts + 1, dueAt: d.nextAttemptAt ?? new Date(0).toISOString(), streamRevision: revision, origin, domain, ...of };
}

/**
 * Brings the email's work item in line with its stream (`loaded`, or read now). Safe to run
 * anywhere, any number of times: it only moves forward in stream revision.
 */
export async function syncWorkItem(
  documents: DocumentStore, events: EventStore, emailId: string, origin: CommandOrigin, policy: DeliveryPolicy, loaded?: Loaded<EmailState>,
): Promise<WorkItem | null> {
  const { state, revision } = loaded ?? (await loadEmail(events, emailId));
  const desired = desiredWorkItem(state, revision, origin, policy);
  const items = workItems(documents);
  // The schedule follows the stream, in another store: the events it follows must be durable
  // before it changes, or a crash in between (a group commit not yet made) keeps the new
  // schedule and loses the events (a recovery's item gone, its DeliveryFailed never written).
  await durableSoFar();
  if (!desired) {
    // Nothing is due once a delivery finished (or never started), and it never starts again:
    // whatever item there is can go, without reading it first.
    await items.delete(emailId);
    return null;
  }
  for (;;) {
    const current = await items.get(emailId);
    if (current && current.streamRevision > revision) return current;
    if (current && current.streamRevision === revision && current.step === desired.step && current.attempt === desired.attempt) return current;
    const written = await writeOver(items, current, desired);
    if (written) return written;
    // Someone else wrote it meanwhile: look again.
  }
}
