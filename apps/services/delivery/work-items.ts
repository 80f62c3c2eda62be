// The sender's schedule: one document per email with a delivery step due, in the `deliveries`
// collection, found by due time. It is derived from the email's stream (never the other way
// round): the sender's consumer syncs it on every lifecycle event, and whoever finds it stale
// syncs it again, so a crash anywhere loses no step and a restart forgets no retry.
import { claimExpiresAt, type DeliveryPolicy } from '../../../domain/email/delivery.ts';
import { pendingRecipients, type EmailState } from '../../../domain/email/state.ts';
import type { CommandOrigin } from '../../../domain/events/metadata.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import type { EventStore } from '../../../infra/ports/event-store.ts';
import { COLLECTIONS } from '../collections.ts';
import type { Loaded } from '../command-handler.ts';
import { loadEmail } from '../email-stream.ts';
import { writeOver } from '../write-over.ts';

export interface WorkItem {
  _id: string;
  /** attempt: send attempt `attempt`; recover: declare attempt `attempt` delivery_unknown if its claim is still open. */
  step: 'attempt' | 'recover';
  attempt: number;
  dueAt: string;
  /** The stream revision this item was derived from: an older view never overwrites a newer one. */
  streamRevision: number;
  /** Correlation and cause for the events the step appends. */
  origin: CommandOrigin;
  /** The domain of the first recipient the step is for (its site schedules it); null when only BCC recipients are left. */
  domain?: string | null;
}

export const workItems = (documents: DocumentStore) => documents.collection<WorkItem>(COLLECTIONS.deliveries);

export async function ensureWorkItemIndexes(documents: DocumentStore): Promise<void> {
  await workItems(documents).ensureIndexes([{ name: 'dueAt', fields: [['dueAt', 'asc'], ['_id', 'asc']] }]);
}

/** Items due at `now`, earliest first. */
export const dueWorkItems = (documents: DocumentStore, now: Date, limit: number): Promise<WorkItem[]> =>
  workItems(documents).find({ where: { dueAt: { lte: now.toISOString() } }, orderBy: [['dueAt', 'asc'], ['_id', 'asc']], limit });

/** What the schedule should say for an email in `state`; null when nothing more is due. */
export function desiredWorkItem(state: EmailState, revision: number, origin: CommandOrigin, policy: DeliveryPolicy): WorkItem | null {
  const d = state.delivery;
  if (!state.emailId || state.admission?.status !== 'queued' || d.finished) return null;
  if (d.openClaim) {
    return { _id: state.emailId, step: 'recover', attempt: d.openClaim.attempt, dueAt: claimExpiresAt(state, policy)!, streamRevision: revision, origin };
  }
  const first = pendingRecipients(d).map((index) => state.visibleAddresses[index]).find((a) => a !== undefined);
  const domain = first ? first.slice(first.lastIndexOf('@') + 1).toLowerCase() : null;
  return { _id: state.emailId, step: 'attempt', attempt: d.attempts + 1, dueAt: d.nextAttemptAt ?? new Date(0).toISOString(), streamRevision: revision, origin, domain };
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
