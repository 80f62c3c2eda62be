// Rebuilds a read model from the event store into a fresh collection, then swaps it in.
// The service keeps reading the old model until the swap; events that the live projector
// applied to the old model while the rebuild ran are re-read from the store after the
// swap (every write is guarded by the stream revision, so re-applying is harmless).
//
// An event the projection cannot apply does not abort the rebuild: it is tried again a few
// times and then skipped, counted in the result and parked (processor `rebuild:<name>`, see
// apps/services/parked-events.ts), as the live processor would. Only while both stores answer:
// a failure while one of them does not is an outage, and aborts the rebuild (run it again).
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore, StoredEvent } from '../../infra/ports/event-store.ts';
import { COLLECTIONS } from './collections.ts';
import { ensureParkedIndexes, parkEvent, rebuildGroup } from './parked-events.ts';
import type { RebuildableProjection } from './projection-registry.ts';

/**
 * Why `name` cannot be a rebuild's scratch collection (the rebuild drops it first), or null:
 * it must never be one Relay keeps data in.
 */
export function scratchCollectionProblem(name: string, label = 'the target collection'): string | null {
  if (!/^[a-z0-9][a-z0-9_]{0,63}$/.test(name)) return `${label} must be 1 to 64 lower-case letters, digits and _, got ${JSON.stringify(name)}`;
  if ((Object.values(COLLECTIONS) as string[]).includes(name)) return `${label} ${name} is one of Relay's own collections; the rebuild would drop it first`;
  return null;
}

export interface RebuildProgress {
  phase: 'counting' | 'rebuilding' | 'catching-up' | 'swapped';
  done: number;
  total: number;
}

export interface RebuildOptions {
  /** The projection's name in PROJECTIONS: names what it parks (`rebuild:<name>`). Default: its collection. */
  name?: string;
  /** Rebuild into this collection and leave it there (no swap): for comparing with the live model. */
  into?: string;
  /** Attempts of an event that fails while the stores answer, before it is skipped. Default 3. */
  attempts?: number;
  batchSize?: number;
  onProgress?: (progress: RebuildProgress) => void;
}

export interface SkippedEvent {
  eventId: string;
  streamId: string;
  revision: number;
  type: string;
  error: string;
  /** Its record in parked_events (`relay parked list --processor rebuild:<name>`). */
  parkedId: string;
}

export interface RebuildResult {
  /** Events read (applied or skipped). */
  events: number;
  documents: number;
  collection: string;
  swapped: boolean;
  /** Events the projection could not apply: skipped and parked. */
  skipped: number;
  /** The first MAX_LISTED_SKIPS of them. */
  skippedEvents: SkippedEvent[];
}

const MAX_LISTED_SKIPS = 100;

/** Applies one event, or skips it (parking it) when it fails while the stores answer. */
type Apply = (event: StoredEvent, collection: string) => Promise<void>;

function skippingApply(
  documents: DocumentStore, events: EventStore, projection: RebuildableProjection, name: string, attempts: number,
  skipped: { count: number; listed: SkippedEvent[] },
): Apply {
  const storesAnswer = async () => (await Promise.all([events.ping().catch(() => false), documents.ping().catch(() => false)])).every(Boolean);
  const { processor, group } = rebuildGroup(name);
  return async (event, collection) => {
    let firstFailedAt: Date | null = null;
    for (let attempt = 1; ; attempt++) {
      try {
        await projection.apply(documents, events, event, collection);
        return;
      } catch (error) {
        if (!(await storesAnswer())) throw error;
        firstFailedAt ??= new Date();
        if (attempt < attempts) continue;
        const failure = error instanceof Error ? error : new Error(String(error));
        const parked = await parkEvent(documents, {
          processor, group, event, error: failure, attempts, firstFailedAt, lastFailedAt: new Date(),
        });
        skipped.count++;
        if (skipped.listed.length < MAX_LISTED_SKIPS) {
          skipped.listed.push({ eventId: event.id, streamId: event.streamId, revision: event.revision, type: event.type, error: parked.error, parkedId: parked._id });
        }
        return;
      }
    }
  };
}

async function applyAll(
  events: EventStore, projection: RebuildableProjection, apply: Apply, collection: string,
  after: string | null, batchSize: number, onEvent: () => void,
): Promise<{ position: string | null; count: number }> {
  let position = after;
  let count = 0;
  for (;;) {
    const batch = await events.readAll({ after: position, maxCount: batchSize, filter: { streamPrefixes: projection.streamPrefixes } });
    for (const event of batch) {
      await apply(event, collection);
      position = event.position;
      count++;
      onEvent();
    }
    if (batch.length < batchSize) return { position, count };
  }
}

async function countEvents(events: EventStore, projection: RebuildableProjection, batchSize: number): Promise<number> {
  let position: string | null = null;
  let total = 0;
  for (;;) {
    const batch = await events.readAll({ after: position, maxCount: batchSize, filter: { streamPrefixes: projection.streamPrefixes } });
    total += batch.length;
    if (batch.length < batchSize) return total;
    position = batch[batch.length - 1].position;
  }
}

export async function rebuildProjection(
  documents: DocumentStore, events: EventStore, projection: RebuildableProjection, options: RebuildOptions = {},
): Promise<RebuildResult> {
  const batchSize = options.batchSize ?? 500;
  const report = options.onProgress ?? (() => {});
  const target = options.into ?? `${projection.collection}__rebuild_${Date.now()}`;
  const problem = options.into === undefined ? null : scratchCollectionProblem(options.into);
  if (problem) throw new Error(problem);
  await documents.drop(target);
  await projection.ensureIndexes(documents, target);
  await ensureParkedIndexes(documents);
  const skipped = { count: 0, listed: [] as SkippedEvent[] };
  const apply = skippingApply(documents, events, projection, options.name ?? projection.collection, Math.max(1, options.attempts ?? 3), skipped);

  report({ phase: 'counting', done: 0, total: 0 });
  const total = await countEvents(events, projection, batchSize);
  let done = 0;
  const tick = () => report({ phase: 'rebuilding', done: ++done, total: Math.max(total, done) });
  const first = await applyAll(events, projection, apply, target, null, batchSize, tick);

  if (options.into) {
    return { events: first.count, documents: await documents.collection(target).count(), collection: target, swapped: false, skipped: skipped.count, skippedEvents: skipped.listed };
  }
  await documents.rename(target, projection.collection);
  report({ phase: 'catching-up', done, total: Math.max(total, done) });
  const rest = await applyAll(events, projection, apply, projection.collection, first.position, batchSize, () => {});
  await projection.ensureIndexes(documents, projection.collection);
  const count = await documents.collection(projection.collection).count();
  report({ phase: 'swapped', done: first.count + rest.count, total: first.count + rest.count });
  return { events: first.count + rest.count, documents: count, collection: projection.collection, swapped: true, skipped: skipped.count, skippedEvents: skipped.listed };
}
