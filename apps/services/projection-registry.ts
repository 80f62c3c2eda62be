// The read models that can be rebuilt from the event store, and how each applies an event.
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore, StoredEvent } from '../../infra/ports/event-store.ts';
import { EMAIL_STREAM_PREFIX } from '../../domain/email/events.ts';
import { emailViewIdOf, foldEmailEvent, projectEmailEvent } from './email-view-writer.ts';
import { COLLECTIONS } from './collections.ts';
import { ensureEmailViewIndexes } from './email-reads.ts';
import type { EmailView } from '../../projections/email-view.ts';

export interface RebuildableProjection<D extends { _id: string } = { _id: string }> {
  /** The collection the service reads. */
  collection: string;
  streamPrefixes: string[];
  ensureIndexes(documents: DocumentStore, collection: string): Promise<void>;
  /** Applies one event to its document in the store, guarded by the document's revision: the live path. */
  apply(documents: DocumentStore, events: EventStore, event: StoredEvent, collection: string): Promise<void>;
  /** The _id of the document an event belongs to: one document per stream. */
  documentIdOf(event: StoredEvent): string;
  /**
   * What `apply` would write, without writing it: the document after `event`, folded from
   * `current` (as stored, or as folded so far, with the same revision guard; gaps read from
   * the event store), or `current` itself when the event changes nothing. Batched rebuilds
   * fold many events per document in memory and write each document once.
   */
  fold(events: EventStore, current: D | null, event: StoredEvent): Promise<D | null>;
}

export const PROJECTIONS: Record<string, RebuildableProjection> = {
  emails: {
    collection: COLLECTIONS.emails,
    streamPrefixes: [EMAIL_STREAM_PREFIX],
    ensureIndexes: ensureEmailViewIndexes,
    apply: (documents, events, event, collection) => projectEmailEvent(documents, events, event, collection),
    documentIdOf: emailViewIdOf,
    fold: foldEmailEvent,
  } satisfies RebuildableProjection<EmailView>,
};
