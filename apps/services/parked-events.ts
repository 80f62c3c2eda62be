// Parked events: what a consumer could not apply and went past, so that one event never stops
// a consumer group (apps/processors/processor.ts) or a rebuild (apps/services/rebuild.ts).
// One document per (consumer group, event): parking the same event again only counts the new
// attempts, so redeliveries and several instances agree on one record. `relay parked list`
// shows them, `relay parked retry <id>` runs one again; /readyz counts them.
// Parking must not fail on what it records, or the consumer it frees would be held for good: the
// failure's message is made storable (a driver's message may quote the data it failed on, NUL and
// all), and a record the store refuses all the same is written again with ids and counts only.
import type { DocumentStore, Stored } from '../../infra/ports/document-store.ts';
import type { StoredEvent } from '../../infra/ports/event-store.ts';
import { COLLECTIONS } from './collections.ts';
import { writeOver } from './write-over.ts';

export interface ParkedEvent {
  /** `<group>:<eventId>`: see parkedEventId. */
  _id: string;
  /** The processor's name (`projector`), or `rebuild:<projection>` for a rebuild. */
  processor: string;
  /** The consumer group (`<namespace>.<processor>`), or `rebuild.<projection>`. */
  group: string;
  eventId: string;
  streamId: string;
  revision: number | null;
  /** Position in the event store's global order, when known. */
  position: string | null;
  type: string | null;
  /** The last error's message (capped, made storable: see storableMessage), or UNSTORED_ERROR. */
  error: string;
  /** Failed attempts over every time it was parked. */
  attempts: number;
  firstFailedAt: string;
  lastFailedAt: string;
  /** Where the log held it; null for a rebuild. */
  topic: string | null;
  partition: number | null;
  offset: string | null;
  /** When `relay parked retry` last sent it again; null before. */
  retryRequestedAt: string | null;
}

export interface Parking {
  processor: string;
  group: string;
  event: Pick<StoredEvent, 'id' | 'streamId'> & { revision: number | null; position?: string | null; type: string | null };
  error: Error;
  /** Failed attempts this time. */
  attempts: number;
  firstFailedAt: Date;
  lastFailedAt: Date;
  record?: { topic: string; partition: number; offset: string };
}

const MAX_ERROR_CHARS = 2000;

/** The error of a record the store would only take without the failure's own text. */
export const UNSTORED_ERROR = 'the store refused the parked record holding the failure\'s message: look for it in the logs at lastFailedAt';

export const parkedEventId = (group: string, eventId: string): string => `${group}:${eventId}`;

/** The group that parks what `relay projections rebuild <name>` cannot apply. */
export const rebuildGroup = (projection: string): { processor: string; group: string } => ({ processor: `rebuild:${projection}`, group: `rebuild.${projection}` });

export const parkedEventsOf = (documents: DocumentStore) => documents.collection<ParkedEvent>(COLLECTIONS.parkedEvents);

export async function ensureParkedIndexes(documents: DocumentStore): Promise<void> {
  await parkedEventsOf(documents).ensureIndexes([
    { name: 'parked_by_processor', fields: [['processor', 'asc'], ['lastFailedAt', 'desc'], ['_id', 'asc']] },
    { name: 'parked_by_time', fields: [['lastFailedAt', 'desc'], ['_id', 'asc']] },
  ]);
}

/**
 * `text` as every store holds it: NUL (which PostgreSQL's jsonb cannot hold) and lone surrogates
 * (which UTF-8 cannot) as U+FFFD, at most `max` characters and an ellipsis. Other control
 * characters are kept as the failure said them: every store holds them, and `relay parked list`
 * escapes them when it shows them (apps/cli/printable.ts).
 */
export function storableText(text: string, max = MAX_ERROR_CHARS): string {
  const bounded = text.length > max ? `${text.slice(0, max)}…` : text;
  // Made well formed after the cut: a cut inside a surrogate pair leaves a lone one.
  return bounded.replaceAll('\u0000', '\ufffd').toWellFormed();
}

/** The failure's message as a parked record holds it. */
export function storableMessage(error: Error): string {
  return storableText(error.message || error.name || String(error));
}

/**
 * Records the event as parked (or adds these attempts to its record). Idempotent per (group, event).
 * When the store refuses the record, a record of ids and counts with UNSTORED_ERROR is written
 * instead (the type is left out, and a stream id made storable, as they come from the log for a
 * record that could not be decoded); when it refuses that too (it takes no writes), the first
 * refusal is thrown.
 */
export async function parkEvent(documents: DocumentStore, parking: Parking): Promise<Stored<ParkedEvent>> {
  try {
    return await writeParked(documents, parking, false);
  } catch (error) {
    try {
      return await writeParked(documents, parking, true);
    } catch {
      throw error;
    }
  }
}

async function writeParked(documents: DocumentStore, parking: Parking, minimal: boolean): Promise<Stored<ParkedEvent>> {
  const parked = parkedEventsOf(documents);
  const id = parkedEventId(parking.group, parking.event.id);
  for (;;) {
    const current = await parked.get(id);
    const next: ParkedEvent = {
      _id: id,
      processor: parking.processor,
      group: parking.group,
      eventId: parking.event.id,
      streamId: minimal ? storableText(parking.event.streamId, Infinity) : parking.event.streamId,
      revision: parking.event.revision,
      position: parking.event.position ?? current?.position ?? null,
      type: minimal ? null : parking.event.type,
      error: minimal ? UNSTORED_ERROR : storableMessage(parking.error),
      attempts: (current?.attempts ?? 0) + parking.attempts,
      firstFailedAt: current?.firstFailedAt ?? parking.firstFailedAt.toISOString(),
      lastFailedAt: parking.lastFailedAt.toISOString(),
      topic: parking.record?.topic ?? current?.topic ?? null,
      partition: parking.record?.partition ?? current?.partition ?? null,
      offset: parking.record?.offset ?? current?.offset ?? null,
      retryRequestedAt: current?.retryRequestedAt ?? null,
    };
    const written = await writeOver(parked, current, next);
    if (written) return written;
    // Another instance parked it meanwhile: add to its record.
  }
}

/** Forgets a parked event (it was applied after all, or an operator dismissed it). */
export async function resolveParked(documents: DocumentStore, id: string): Promise<boolean> {
  return parkedEventsOf(documents).delete(id);
}

export async function listParked(documents: DocumentStore, options: { processor?: string; limit?: number } = {}): Promise<Array<Stored<ParkedEvent>>> {
  return parkedEventsOf(documents).find({
    where: options.processor === undefined ? {} : { processor: options.processor },
    orderBy: [['lastFailedAt', 'desc'], ['_id', 'asc']],
    limit: options.limit ?? 100,
  });
}

/** How many events are parked, in all and by processor (those with any). */
export async function countParked(documents: DocumentStore, processors: readonly string[]): Promise<{ total: number; byProcessor: Record<string, number> }> {
  const parked = parkedEventsOf(documents);
  const total = await parked.count();
  const byProcessor: Record<string, number> = {};
  if (total === 0) return { total, byProcessor };
  for (const processor of processors) {
    const count = await parked.count({ processor });
    if (count > 0) byProcessor[processor] = count;
  }
  return { total, byProcessor };
}

/** Marks a retry as requested (the CLI then waits for the record to go, or to fail again). */
export async function markRetryRequested(documents: DocumentStore, id: string, at: Date): Promise<Stored<ParkedEvent> | null> {
  const parked = parkedEventsOf(documents);
  for (;;) {
    const current = await parked.get(id);
    if (!current) return null;
    const { _v, ...body } = current;
    const replaced = await parked.replace({ ...body, retryRequestedAt: at.toISOString() }, _v);
    if (replaced) return replaced;
  }
}
