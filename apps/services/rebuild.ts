// Rebuilds a read model from the event store into a fresh collection, then swaps it in.
// The service keeps reading the old model until the swap; events that the live projector
// applied to the old model while the rebuild ran are re-read from the store after the
// swap (every write is guarded by the stream revision, so re-applying is harmless).
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import { COLLECTIONS } from './collections.ts';
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
  /** Rebuild into this collection and leave it there (no swap): for comparing with the live model. */
  into?: string;
  batchSize?: number;
  onProgress?: (progress: RebuildProgress) => void;
}

export interface RebuildResult {
  events: number;
  documents: number;
  collection: string;
  swapped: boolean;
}

async function applyAll(
  documents: DocumentStore, events: EventStore, projection: RebuildableProjection, collection: string,
  after: string | null, batchSize: number, onEvent: () => void,
): Promise<{ position: string | null; count: number }> {
  let position = after;
  let count = 0;
  for (;;) {
    const batch = await events.readAll({ after: position, maxCount: batchSize, filter: { streamPrefixes: projection.streamPrefixes } });
    for (const event of batch) {
      await projection.apply(documents, events, event, collection);
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

  report({ phase: 'counting', done: 0, total: 0 });
  const total = await countEvents(events, projection, batchSize);
  let done = 0;
  const tick = () => report({ phase: 'rebuilding', done: ++done, total: Math.max(total, done) });
  const first = await applyAll(documents, events, projection, target, null, batchSize, tick);

  if (options.into) {
    return { events: first.count, documents: await documents.collection(target).count(), collection: target, swapped: false };
  }
  await documents.rename(target, projection.collection);
  report({ phase: 'catching-up', done, total: Math.max(total, done) });
  const rest = await applyAll(documents, events, projection, projection.collection, first.position, batchSize, () => {});
  await projection.ensureIndexes(documents, projection.collection);
  const count = await documents.collection(projection.collection).count();
  report({ phase: 'swapped', done: first.count + rest.count, total: first.count + rest.count });
  return { events: first.count + rest.count, documents: count, collection: projection.collection, swapped: true };
}
