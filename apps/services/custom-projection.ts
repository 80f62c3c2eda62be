// Runs an analyst's projection (`relay projections run ./my-projection.mjs`): a module with
// `init`, `apply` and `flush` hooks, fed the event store's global order in the rebuild's
// batches with the projections' decoding and upcasting (event-reading.ts), from its checkpoint.
//
// Per batch: every event goes to `apply(event)`, then `flush({position, count})`, and only
// then is the checkpoint (the batch's last position) saved, by compare-and-set in the
// `checkpoints` collection (`projection:<name>`). A crash before the save hands the batch to
// `apply` again after the restart: at least once, as a consumer group does; a module that must
// count each event once keeps the position `flush` gives it with its own results.
import { DuplicateKeyError, type DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore, StoredEvent } from '../../infra/ports/event-store.ts';
import { COLLECTIONS } from './collections.ts';
import { readGlobalOrder, upcastStored } from './event-reading.ts';

export interface CustomProjectionContext {
  /** The checkpoint's name. */
  name: string;
  /** The position the run starts after (null: the beginning). */
  position: string | null;
}

/** What the module exports; only `apply` is required. */
export interface CustomProjectionModule {
  init?(context: CustomProjectionContext): unknown | Promise<unknown>;
  apply(event: StoredEvent): unknown | Promise<unknown>;
  flush?(progress: { position: string; count: number }): unknown | Promise<unknown>;
}

interface Checkpoint {
  _id: string;
  position: string | null;
  updatedAt: string;
}

export const CUSTOM_BATCH = 2000;

export function checkModule(module: Record<string, unknown>, path: string): CustomProjectionModule {
  if (typeof module.apply !== 'function') throw new Error(`${path} exports no apply(event) function`);
  for (const hook of ['init', 'flush'] as const) {
    if (module[hook] !== undefined && typeof module[hook] !== 'function') throw new Error(`${path}: ${hook} must be a function`);
  }
  return module as unknown as CustomProjectionModule;
}

export interface RunOptions {
  name: string;
  follow?: boolean;
  /** How long a following run waits before looking for new events again. Default 200 ms. */
  pollMs?: number;
  signal?: AbortSignal;
  onProgress?: (progress: { applied: number; position: string | null }) => void;
}

export async function runCustomProjection(
  stores: { events: EventStore; documents: DocumentStore }, module: CustomProjectionModule, options: RunOptions,
): Promise<{ applied: number; startedAfter: string | null; position: string | null }> {
  const checkpoints = stores.documents.collection<Checkpoint>(COLLECTIONS.checkpoints);
  const id = `projection:${options.name}`;
  let stored = await checkpoints.get(id);
  if (!stored) {
    try {
      stored = await checkpoints.insert({ _id: id, position: null, updatedAt: new Date().toISOString() });
    } catch (error) {
      if (!(error instanceof DuplicateKeyError)) throw error;
      stored = await checkpoints.get(id);
    }
  }
  let version = stored!._v;
  const startedAfter = stored!.position;
  let position = startedAfter;
  let applied = 0;
  await module.init?.({ name: options.name, position });
  for (;;) {
    let read = 0;
    for await (const batch of readGlobalOrder(stores.events, { from: position ? { position } : null, batchSize: CUSTOM_BATCH })) {
      for (const event of batch) await module.apply(upcastStored(event));
      const last = batch[batch.length - 1].position;
      await module.flush?.({ position: last, count: batch.length });
      const saved = await checkpoints.replace({ _id: id, position: last, updatedAt: new Date().toISOString() }, version);
      if (!saved) throw new Error(`checkpoint ${id} was moved by another run: is the same projection running twice?`);
      version = saved._v;
      position = last;
      applied += batch.length;
      read += batch.length;
      options.onProgress?.({ applied, position });
      if (options.signal?.aborted) break;
    }
    if (!options.follow || options.signal?.aborted) break;
    if (read === 0) await pause(options.pollMs ?? 200, options.signal);
  }
  return { applied, startedAfter, position };
}

const pause = (ms: number, signal?: AbortSignal) => new Promise<void>((resolve) => {
  const timer = setTimeout(done, ms);
  function done() {
    clearTimeout(timer);
    signal?.removeEventListener('abort', done);
    resolve();
  }
  signal?.addEventListener('abort', done, { once: true });
});
