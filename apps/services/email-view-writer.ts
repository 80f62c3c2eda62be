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

export async function projectEmailEvent(documents: DocumentStore, events: EventStore, event: StoredEvent, collection: string = COLLECTIONS.emails): Promise<void> {
  const views = documents.collection<EmailView>(collection);
  const emailId = event.streamId.slice(EMAIL_STREAM_PREFIX.length);
  for (;;) {
    const current = await views.get(emailId);
    const applied = current?.streamRevision ?? -1;
    if (event.revision <= applied) return;
    const pending = event.revision === applied + 1
      ? [event]
      : await events.readStream(event.streamId, { fromRevision: applied + 1, maxCount: event.revision - applied });
    let next: EmailView | null = current;
    for (const e of pending) next = applyToEmailView(next, upcastEmailEvent(e));
    if (next === null || next === current) return;
    if (current === null) {
      try {
        await views.insert(next);
        return;
      } catch (error) {
        if (error instanceof DuplicateKeyError) continue; // another instance inserted first: re-read
        throw error;
      }
    }
    const { _v, ...body } = next as EmailView & { _v?: number };
    void _v;
    if (await views.replace(body, current._v)) return;
    // Lost a compare-and-set race with another instance: re-read and re-apply.
  }
}
