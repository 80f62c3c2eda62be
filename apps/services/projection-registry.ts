// The read models that can be rebuilt from the event store, and how each applies an event.
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore, StoredEvent } from '../../infra/ports/event-store.ts';
import { EMAIL_STREAM_PREFIX } from '../../domain/email/events.ts';
import { projectEmailEvent } from './email-view-writer.ts';
import { COLLECTIONS } from './collections.ts';
import { ensureEmailViewIndexes } from './email-reads.ts';

export interface RebuildableProjection {
  /** The collection the service reads. */
  collection: string;
  streamPrefixes: string[];
  ensureIndexes(documents: DocumentStore, collection: string): Promise<void>;
  apply(documents: DocumentStore, events: EventStore, event: StoredEvent, collection: string): Promise<void>;
}

export const PROJECTIONS: Record<string, RebuildableProjection> = {
  emails: {
    collection: COLLECTIONS.emails,
    streamPrefixes: [EMAIL_STREAM_PREFIX],
    ensureIndexes: ensureEmailViewIndexes,
    apply: (documents, events, event, collection) => projectEmailEvent(documents, events, event, collection),
  },
};
