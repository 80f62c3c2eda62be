// Writes the email read model: applies one email event (and any missing predecessors) to its
// document with compare-and-set. The stream revision stored in the document guards every
// write, so a redelivered event changes nothing; a gap (an event whose predecessors are
// missing) is filled from the event store, the source of truth. Used by the projector
// processor, by reads that find an email not projected yet, and by rebuilds.
import { EMAIL_STREAM_PREFIX } from '../../domain/email/events.ts';
import { upcastEmailEvent } from '../../domain/email/upcast.ts';
import { DuplicateKeyError, type DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore, StoredEvent } from '../../infra/ports/event-store.ts';
import { applyToEmailView, type EmailView } from '../../projections/email-view.ts';
import { COLLECTIONS } from './collections.ts';

/** The read model document of an email's stream event. */
export const emailViewIdOf = (event: StoredEvent): string => event.streamId.slice(EMAIL_STREAM_PREFIX.length);

/**
 * The view after `event` (and any predecessors `current` lacks, read from the event store),
 * without writing it: `current` itself when the event changes nothing (already applied, or
 * no admission to place it on). What projectEmailEvent writes; rebuilds fold batches with it.
 */
export async function foldEmailEvent(events: EventStore, current: EmailView | null, event: StoredEvent): Promise<EmailView | null> {
  const applied = current?.streamRevision ?? -1;
  if (event.revision <= applied) return current;
  const pending = event.revision === applied + 1
    ? [event]
    : await events.readStream(event.streamId, { fromRevision: applied + 1, maxCount: event.revision - applied });
  let next: EmailView | null = current;
  for (const e of pending) next = applyToEmailView(next, upcastEmailEvent(e));
  return next;
}

export async function projectEmailEvent(documents: DocumentStore, events: EventStore, event: StoredEvent, collection: string = COLLECTIONS.emails): Promise<void> {
  const views = documents.collection<EmailView>(collection);
  const emailId = emailViewIdOf(event);
  // The stream's first event makes the document: inserted without a read (on FerretDB every
  // read scans the collection). Taken means it is there already: read it and go on as below.
  let first = event.revision === 0;
  for (;;) {
    const current = first ? null : await views.get(emailId);
    const next = await foldEmailEvent(events, current, event);
    if (next === null || next === current) return;
    if (current === null) {
      try {
        await views.insert(next);
        return;
      } catch (error) {
        // Projected already (a redelivery), or another instance inserted first: re-read.
        if (error instanceof DuplicateKeyError) {
          first = false;
          continue;
        }
        throw error;
      }
    }
    const { _v, ...body } = next as EmailView & { _v?: number };
    void _v;
    if (await views.replace(body, current._v)) return;
    // Lost a compare-and-set race with another instance: re-read and re-apply.
  }
}
