// Scratch collections: what `relay projections rebuild` writes into before it swaps a read
// model in, or leaves behind with `--into` for comparison. Each is recorded while it exists,
// so that `relay projections drop` can tell a scratch collection (dropped on request) from one
// Relay or anyone else keeps data in (refused), and `relay projections scratch` lists them.
import { DuplicateKeyError, type DocumentStore, type Stored } from '../../infra/ports/document-store.ts';
import { COLLECTIONS } from './collections.ts';

export interface ScratchCollection {
  /** The collection's name. */
  _id: string;
  /** The projection rebuilt into it (a name in PROJECTIONS). */
  projection: string;
  /**
   * building: a rebuild is writing it, or died doing so; built: an `--into` rebuild finished it;
   * swapped: renamed over the live collection (or about to be), and the catch-up after the swap
   * is owed until it finishes (apps/services/rebuild.ts, resumeCatchUps).
   */
  state: 'building' | 'built' | 'swapped';
  createdAt: string;
  builtAt: string | null;
  /** swapped: when the swap was recorded. */
  swappedAt?: string;
  /** swapped: the position the rebuild's pass read up to (null: no event); the catch-up reads what follows. */
  catchUpAfter?: string | null;
  /** swapped: the version the rebuild's documents start at, which the catch-up's inserts take too. */
  firstVersion?: number;
}

const scratchOf = (documents: DocumentStore) => documents.collection<ScratchCollection>(COLLECTIONS.scratchCollections);

/** Why `name` cannot name a collection here (its form), or null. */
export function collectionNameProblem(name: string, label = 'the collection'): string | null {
  if (!/^[a-z0-9][a-z0-9_]{0,63}$/.test(name)) return `${label} must be 1 to 64 lower-case letters, digits and _, got ${JSON.stringify(name)}`;
  return null;
}

/** One of the collections Relay keeps its state and read models in (never a scratch collection). */
export const isRelayCollection = (name: string): boolean => (Object.values(COLLECTIONS) as string[]).includes(name);

async function put(documents: DocumentStore, record: ScratchCollection): Promise<void> {
  const scratch = scratchOf(documents);
  for (;;) {
    const current = await scratch.get(record._id);
    if (current) {
      if (await scratch.replace(record, current._v)) return;
      continue;
    }
    try {
      await scratch.insert(record);
      return;
    } catch (error) {
      if (!(error instanceof DuplicateKeyError)) throw error;
    }
  }
}

/** Records `name` as a scratch collection a rebuild of `projection` is writing. */
export async function recordScratch(documents: DocumentStore, name: string, projection: string, now = new Date()): Promise<void> {
  await put(documents, { _id: name, projection, state: 'building', createdAt: now.toISOString(), builtAt: null });
}

/** The rebuild of `projection` into `name` finished and left it there (`--into`). */
export async function markScratchBuilt(documents: DocumentStore, name: string, projection: string, now = new Date()): Promise<void> {
  const current = await scratchOf(documents).get(name);
  await put(documents, { _id: name, projection, state: 'built', createdAt: current?.createdAt ?? now.toISOString(), builtAt: now.toISOString() });
}

/**
 * The rebuild of `projection` into `name` is about to rename it over the live collection: from
 * now on, until forgetScratch, the catch-up after `catchUpAfter` is owed to the live collection.
 */
export async function markScratchSwapped(
  documents: DocumentStore, name: string, projection: string, swap: { catchUpAfter: string | null; firstVersion: number }, now = new Date(),
): Promise<void> {
  const current = await scratchOf(documents).get(name);
  await put(documents, {
    _id: name, projection, state: 'swapped', createdAt: current?.createdAt ?? now.toISOString(), builtAt: now.toISOString(),
    swappedAt: now.toISOString(), catchUpAfter: swap.catchUpAfter, firstVersion: swap.firstVersion,
  });
}

/** `name` is no scratch collection any more: swapped in (renamed) and caught up, or dropped. */
export async function forgetScratch(documents: DocumentStore, name: string): Promise<void> {
  await scratchOf(documents).delete(name);
}

export async function listScratch(documents: DocumentStore): Promise<Array<Stored<ScratchCollection>>> {
  return scratchOf(documents).find({ orderBy: [['createdAt', 'asc'], ['_id', 'asc']], limit: 10_000 });
}

export type DropOutcome =
  | { dropped: true; scratch: ScratchCollection | null }
  /** A swap's record only (with `force`): its collection was renamed over the live one, and its owed catch-up is given up. */
  | { dropped: false; forgotten: ScratchCollection }
  | { dropped: false; reason: string };

/**
 * Drops a scratch collection. Refused: Relay's own collections, always (a live read model is
 * rebuilt, never dropped); a collection no rebuild recorded, or one a rebuild is still writing
 * (or died writing), unless `force` (leftovers of a killed rebuild, of older versions).
 *
 * A swap's record is never a collection to drop. Not renamed yet (its collection still exists),
 * the collection is the rebuilt read model, and maybe its only copy (FerretDB's rename drops the
 * target first): refused even with `force`, the rebuild finishes it. Renamed, there is nothing to
 * drop, only the catch-up it owes the live read model: `force` forgets the record, giving that up.
 */
export async function dropScratch(documents: DocumentStore, name: string, options: { force?: boolean } = {}): Promise<DropOutcome> {
  if (isRelayCollection(name)) {
    return { dropped: false, reason: `${name} is one of Relay's own collections, not a scratch collection; it is never dropped (a read model is rebuilt in place: relay projections rebuild)` };
  }
  const record = await scratchOf(documents).get(name);
  if (!record && !options.force) {
    return { dropped: false, reason: `${name} is not a scratch collection made by relay projections rebuild (relay projections scratch lists those); --force drops it anyway` };
  }
  if (record?.state === 'building' && !options.force) {
    return { dropped: false, reason: `a rebuild of ${record.projection} has been writing ${name} since ${record.createdAt} (or died doing so); --force drops it anyway` };
  }
  if (record?.state === 'swapped') return forgetSwap(documents, record, Boolean(options.force));
  await documents.drop(name);
  if (record) await forgetScratch(documents, name);
  return { dropped: true, scratch: record };
}

async function forgetSwap(documents: DocumentStore, record: ScratchCollection, force: boolean): Promise<DropOutcome> {
  const finish = `relay projections rebuild ${record.projection}`;
  if (await documents.exists(record._id)) {
    return {
      dropped: false,
      reason: `a rebuild of ${record.projection} recorded at ${record.swappedAt} the swap of ${record._id} over its live read model and has not renamed it yet (it is under way, or died renaming): ${record._id} is the rebuilt read model, maybe its only copy, so it is never dropped, not even with --force; ${finish} finishes the swap and its catch-up`,
    };
  }
  if (!force) {
    return {
      dropped: false,
      reason: `${record._id} was renamed over the live read model of ${record.projection} at ${record.swappedAt} and is no collection any more; its record stays while the catch-up after the swap is owed, and goes once ${finish}, or a start of its processor, finishes it. --force forgets the record and the catch-up is never done: the read model may then lack what the live projector applied to the old collection while that rebuild ran, until the next rebuild`,
    };
  }
  await forgetScratch(documents, record._id);
  return { dropped: false, forgotten: record };
}
