// One definition per read model made of one document per email stream: the pure evolve (from
// projections/), its collection and indexes, how one event is applied and how the whole model
// is rebuilt. The live consumer group (apps/processors/projection-processors.ts) and
// `relay projections rebuild <name>` (apps/services/rebuild.ts) are both derived from it, so
// the two can only differ by what the store hands them, never by the rules.
//
// Applying an event: the stream revision stored in the document guards every write, so a
// redelivered event changes nothing; a gap (an event whose predecessors are missing: a
// rebuild's swap, an event parked and retried) is filled from the event store, the source of
// truth; the write is an insert for the stream's first event and a compare-and-set after.
// A processor that is behind (the event waited in the log) also folds the stream's later events
// the event store already holds into the same write, so that catching up writes each document
// once rather than once per event; their own records then find them applied and write nothing.
import { EMAIL_STREAM_PREFIX, emailIdOfStream, type RecordedEmailEvent } from '../../domain/email/events.ts';
import { EMAIL_SCHEMA_VERSIONS, upcastEmailEvent } from '../../domain/email/upcast.ts';
import { DuplicateKeyError, type DocumentStore, type IndexSpec } from '../../infra/ports/document-store.ts';
import type { EventStore, StoredEvent } from '../../infra/ports/event-store.ts';

/** What every document of a stream projection holds besides its own fields. */
export interface StreamDocument {
  _id: string;
  /** Revision of the last stream event applied: the guard that makes replays no-ops. */
  streamRevision: number;
}

export interface StreamProjectionSpec<D extends StreamDocument, P extends string = string> {
  /** `relay projections rebuild <name>`; rebuilds park as `rebuild:<name>`. */
  name: string;
  /** The live processor: `relay processor <processor>`, consumer group `<ns>.<processor>`. */
  processor: P;
  /** One line for `relay processor --help`. */
  summary: string;
  /** The collection the service reads. */
  collection: string;
  indexes: IndexSpec[];
  /**
   * Pure (projections/): the document after `event`, or `current` itself (the same object)
   * when the event changes nothing; null while there is nothing to place it on. Called only
   * with the next revision of the stream, after the revision guard.
   */
  evolve(current: D | null, event: RecordedEmailEvent): D | null;
  /**
   * Event types `evolve` never changes a document for (it returns it as it is, revision
   * included): the live processor skips their records unread, and the next event that does
   * change the document reads them from the event store as part of its gap.
   */
  ignores?: readonly string[];
}

export interface StreamProjection<D extends StreamDocument = StreamDocument, P extends string = string> extends StreamProjectionSpec<D, P> {
  streamPrefixes: string[];
  /** The email event types the live processor applies: all but those the projection ignores. */
  eventTypes: readonly string[];
  ensureIndexes(documents: DocumentStore, collection?: string): Promise<void>;
  /** The _id of the document an event belongs to: one document per stream. */
  documentIdOf(event: StoredEvent): string;
  /**
   * What `apply` would write, without writing it: the document after `event`, folded from
   * `current` (as stored, or as folded so far, with the revision guard; gaps read from the
   * event store), or `current` itself when the event changes nothing. Batched rebuilds fold
   * many events per document in memory and write each document once.
   */
  fold(events: EventStore, current: D | null, event: StoredEvent): Promise<D | null>;
  /**
   * Applies one event to its document in the store: the live path. `firstVersion`: the version
   * a document it inserts starts at (a rebuild's documents: apps/services/rebuild.ts); default 1.
   */
  apply(documents: DocumentStore, events: EventStore, event: StoredEvent, collection?: string, firstVersion?: number): Promise<void>;
}

/** An event recorded at least this long ago means the processor is behind: it looks ahead. */
const LOOK_AHEAD_AFTER_MS = 200;
/** Later events folded into one write at most. */
const LOOK_AHEAD_MAX = 50;

export function defineStreamProjection<D extends StreamDocument, P extends string>(spec: StreamProjectionSpec<D, P>): StreamProjection<D, P> {
  const documentIdOf = (event: StoredEvent): string => emailIdOfStream(event.streamId);

  async function fold(events: EventStore, current: D | null, event: StoredEvent): Promise<D | null> {
    const applied = current?.streamRevision ?? -1;
    if (event.revision <= applied) return current;
    const pending = event.revision === applied + 1
      ? [event]
      : await events.readStream(event.streamId, { fromRevision: applied + 1, maxCount: event.revision - applied });
    return evolveAll(current, pending);
  }

  function evolveAll(current: D | null, pending: StoredEvent[]): D | null {
    let next: D | null = current;
    for (const e of pending) next = spec.evolve(next, upcastEmailEvent(e));
    return next;
  }

  /**
   * fold, then (when the event has waited) the stream's later events already stored, read
   * together with the gap in one read; a later event that cannot be folded ends the look-ahead.
   */
  async function foldAhead(events: EventStore, current: D | null, event: StoredEvent): Promise<D | null> {
    const applied = current?.streamRevision ?? -1;
    if (event.revision <= applied || !(Date.now() - Date.parse(event.recordedAt) >= LOOK_AHEAD_AFTER_MS)) return fold(events, current, event);
    // The gap before the event (when there is one), the event, and the later events: one read.
    const readFrom = event.revision === applied + 1 ? event.revision + 1 : applied + 1;
    const read = await events.readStream(event.streamId, { fromRevision: readFrom, maxCount: event.revision + 1 + LOOK_AHEAD_MAX - readFrom });
    const split = event.revision + 1 - readFrom;
    const next = evolveAll(current, split === 0 ? [event] : read.slice(0, split));
    if (next === null) return next;
    let folded = next;
    for (const later of read.slice(split)) {
      try {
        const after = spec.evolve(folded, upcastEmailEvent(later));
        if (after === null) break;
        folded = after;
      } catch {
        // Its own record applies it, or parks it, as it would have without the look-ahead.
        break;
      }
    }
    return folded;
  }

  async function apply(documents: DocumentStore, events: EventStore, event: StoredEvent, collection: string = spec.collection, firstVersion?: number): Promise<void> {
    const docs = documents.collection<D>(collection);
    const id = documentIdOf(event);
    // The stream's first event makes the document: inserted without a read (on FerretDB every
    // read scans the collection). Taken means it is there already: read it and go on as below.
    let first = event.revision === 0;
    for (;;) {
      const current = first ? null : await docs.get(id);
      const next = await foldAhead(events, current, event);
      if (next === null || next === current) return;
      if (current === null) {
        try {
          await docs.insert(next, { version: firstVersion });
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
      const { _v, ...body } = next as D & { _v?: number };
      void _v;
      // A rebuild swapped in since the read holds none of the old collection's versions
      // (apps/services/rebuild.ts, firstVersionAbove): this then fails like any lost race.
      if (await docs.replace(body as D, current._v)) return;
      // Lost a compare-and-set race with another instance, or a rebuild's swap: re-read and re-apply.
    }
  }

  return {
    ...spec,
    streamPrefixes: [EMAIL_STREAM_PREFIX],
    eventTypes: Object.keys(EMAIL_SCHEMA_VERSIONS).filter((type) => !spec.ignores?.includes(type)),
    ensureIndexes: (documents, collection = spec.collection) => documents.collection<D>(collection).ensureIndexes(spec.indexes),
    documentIdOf,
    fold,
    apply,
  };
}
