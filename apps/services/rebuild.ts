// Rebuilds a read model from the event store into a fresh collection, then swaps it in.
// The service keeps reading the old model until the swap; events that the live projector
// applied to the old model while the rebuild ran are re-read from the store after the
// swap (every write is guarded by the stream revision, so re-applying is harmless).
//
// That catch-up is owed from the swap on: the old collection and what the projector wrote to it
// are gone, and the projector, past those events, never sees them again. So it is recorded
// before the rename (the scratch record's `swapped` state, with the position to read after) and
// forgotten only once done; an interrupted one (Ctrl-C, a crash) is finished by the next
// rebuild of the projection, or by the projection's processor when it starts
// (resumeCatchUps), and `relay projections scratch` lists it meanwhile.
//
// Batched, in two passes over the event store. The first counts each document's events; the
// second folds them in memory with the projection's own fold (the revision guard and gap
// filling of the live path) and writes each document once, after its last event, in bulk with
// others (insertMany where the store has it); the indexes are built after the load. The
// scratch collection is the rebuild's alone (dropped at the start), so nothing is read back
// from it (see BatchFolder). After the swap, the catch-up reads and writes each batch's
// documents by compare-and-set, racing the live projector.
//
// An event the projection cannot apply does not abort the rebuild: that document goes to the
// one-event path (the live processor's: read, apply, compare-and-set), where the event is tried
// again a few times and then skipped, counted in the result and parked (processor
// `rebuild:<name>`, see apps/services/parked-events.ts), as the live processor would. So does
// a document whose batched write is refused (a lost compare-and-set, a taken _id). Only while
// both stores answer: a failure while one of them does not is an outage, and aborts the
// rebuild (run it again).
//
// Scratch collections are recorded (apps/services/scratch-collections.ts) while they exist
// or owe their catch-up; a rebuild that fails before the swap drops its scratch collection again.
//
// A swapped-in document must not take a write the live projector prepared on the old one (read
// before the swap, written after: the old document's fields, which may be what the rebuild is
// run to correct, would come back). The live path writes by compare-and-set on `_v`, the only
// compare-and-set the document store has, so the rebuild's documents start at a version no
// document of the collection they replace holds or will reach (firstVersionAbove): such a write
// then fails as a lost race does, and the projector re-reads and re-applies. (A generation field
// would need a compare-and-set on it too; the port has none.)
import { DuplicateKeyError, type Collection, type DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore, StoredEvent } from '../../infra/ports/event-store.ts';
import { ensureParkedIndexes, parkEvent, rebuildGroup } from './parked-events.ts';
import type { StreamDocument, StreamProjection as RebuildableProjection } from './stream-projection.ts';
import {
  collectionNameProblem, forgetScratch, isRelayCollection, listScratch, markScratchBuilt, markScratchSwapped, recordScratch, type ScratchCollection,
} from './scratch-collections.ts';

/**
 * Why `name` cannot be a rebuild's scratch collection (the rebuild drops it first), or null:
 * it must never be one Relay keeps data in.
 */
export function scratchCollectionProblem(name: string, label = 'the target collection'): string | null {
  const form = collectionNameProblem(name, label);
  if (form) return form;
  if (isRelayCollection(name)) return `${label} ${name} is one of Relay's own collections; the rebuild would drop it first`;
  return null;
}

/** A rebuild refused its target before touching anything: the message says why and what to do instead. */
export class RebuildRefusedError extends Error {}

/**
 * Why an `--into` rebuild may not drop `target` and write `name`'s rebuild into it, or null. It
 * refuses what `relay projections drop` (dropScratch) refuses without --force, since the rebuild
 * drops it first and has no --force: a collection no rebuild recorded, one a rebuild is writing
 * (or died writing), a swap's record whatever its state. A swap not renamed yet is the rebuilt
 * read model, maybe its only copy; renamed, its record is the catch-up it owes: overwritten, that
 * catch-up would never be done. Its own projection's swaps are finished before this is asked.
 * One built for another projection is refused too: that comparison is someone's work in progress.
 */
async function intoProblem(documents: DocumentStore, target: string, name: string): Promise<string | null> {
  const record = (await listScratch(documents)).find((r) => r._id === target);
  const drop = `relay projections drop ${target}`;
  if (!record) {
    if (!(await documents.exists(target))) return null;
    return `${target} exists and is not a scratch collection made by relay projections rebuild (relay projections scratch lists those): the rebuild would drop it first; choose another name, or ${drop} --force if it is only a leftover`;
  }
  if (record.state === 'swapped') {
    const finish = `relay projections rebuild ${record.projection}`;
    if (await documents.exists(target)) {
      return `a rebuild of ${record.projection} recorded at ${record.swappedAt} the swap of ${target} over its live read model and has not renamed it yet: ${target} is the rebuilt read model, maybe its only copy; ${finish} finishes the swap, then the name is free`;
    }
    return `${target} was swapped in as the live read model of ${record.projection} at ${record.swappedAt} and its record stays while the catch-up after the swap is owed; ${finish} (or a start of its processor) finishes it, then the name is free`;
  }
  if (record.state === 'building') {
    return `a rebuild of ${record.projection} has been writing ${target} since ${record.createdAt} (or died doing so); choose another name, or ${drop} --force once no rebuild is writing it`;
  }
  if (record.projection !== name) {
    return `${target} holds a rebuild of ${record.projection} (built ${record.builtAt}); choose another name, or ${drop} first`;
  }
  return null;
}

export interface RebuildProgress {
  phase: 'counting' | 'rebuilding' | 'catching-up' | 'swapped';
  done: number;
  total: number;
}

export interface RebuildOptions {
  /** Names what it parks (`rebuild:<name>`). Default: the projection's name. */
  name?: string;
  /** Rebuild into this collection and leave it there (no swap): for comparing with the live model. */
  into?: string;
  /** Attempts of an event that fails while the stores answer, before it is skipped. Default 3. */
  attempts?: number;
  /** Events read from the store at a time. Default 2000. */
  batchSize?: number;
  /** Documents held in memory at most before the least recently touched are written early. Default 20,000. */
  maxHeld?: number;
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
  /** Scratch records of earlier rebuilds interrupted after their swap whose catch-up this one finished first. */
  resumed: string[];
}

const MAX_LISTED_SKIPS = 100;

/** Applies one event, or skips it (parking it) when it fails while the stores answer; inserts at `firstVersion`. */
type Apply = (event: StoredEvent, collection: string, firstVersion: number) => Promise<void>;

function skippingApply(
  documents: DocumentStore, events: EventStore, projection: RebuildableProjection, name: string, attempts: number,
  skipped: { count: number; listed: SkippedEvent[] },
): Apply {
  const storesAnswer = async () => (await Promise.all([events.ping().catch(() => false), documents.ping().catch(() => false)])).every(Boolean);
  const { processor, group } = rebuildGroup(name);
  return async (event, collection, firstVersion) => {
    let firstFailedAt: Date | null = null;
    for (let attempt = 1; ; attempt++) {
      try {
        await projection.apply(documents, events, event, collection, firstVersion);
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

/** A document as folded so far. */
interface Held {
  id: string;
  doc: StreamDocument | null;
  /** Its version in the store; null while it is not stored. */
  version: number | null;
  /** The last event folded into it: what the one-event path re-applies if its write is refused. */
  last: StoredEvent;
  dirty: boolean;
}

/** Documents held in memory at most, by default; past it the least recently touched are written early and let go. */
const MAX_HELD = 20_000;
/** Documents per bulk write. */
const WRITE_CHUNK = 2000;
/** Bulk writes under way at once: a store converts one batch while it commits another. */
const WRITES_AT_ONCE = 2;

const withoutVersion = (doc: StreamDocument): StreamDocument => {
  const { _v, ...body } = doc as StreamDocument & { _v?: number };
  void _v;
  return body;
};

/**
 * Folds events into their documents in memory and writes each document once.
 *
 * Into a scratch collection (`eventsPerDocument` given: the collection was dropped at the start
 * and only this rebuild writes it), a document is held until its last event, as counted before
 * the pass, and then written once, in bulk with others: on engines where every write or read
 * by _id costs a scan of the collection (FerretDB v1 on SQLite) nothing else scales. A document
 * is never read from the document store here: its state before an event it does not hold is
 * folded again from its stream (the projection's gap filling, from the event store). Memory is
 * bounded: past `maxHeld` documents the least recently touched are written early.
 *
 * Into the live collection (catching up after the swap): each document is read when a batch
 * first touches it and written at the batch's end by compare-and-set, racing the live projector.
 */
class BatchFolder {
  readonly #held = new Map<string, Held>();
  readonly #events: EventStore;
  readonly #projection: RebuildableProjection;
  readonly #collection: string;
  readonly #documents: Collection<StreamDocument>;
  readonly #apply: Apply;
  readonly #firstVersion: number;
  readonly #maxHeld: number;
  /** Events still to come per document, for a scratch collection; null on the live one. */
  readonly #remaining: EventCounts | null;
  /** Versions of the documents written before their last event (scratch collection). */
  readonly #writtenEarly = new Map<string, number>();
  /** Documents past their last event, written in bulk. */
  #ready: Held[] = [];
  /** Bulk writes of ready documents under way: folding goes on meanwhile, so this process and the store work at once. */
  readonly #writing: Array<Promise<void>> = [];

  constructor(
    documents: DocumentStore, events: EventStore, projection: RebuildableProjection, collection: string, apply: Apply,
    eventsPerDocument: EventCounts | null, firstVersion: number, maxHeld = MAX_HELD,
  ) {
    this.#firstVersion = firstVersion;
    this.#maxHeld = Math.max(1, maxHeld);
    this.#events = events;
    this.#projection = projection;
    this.#collection = collection;
    this.#documents = documents.collection(collection);
    this.#apply = apply;
    this.#remaining = eventsPerDocument;
  }

  async fold(event: StoredEvent): Promise<void> {
    const id = this.#projection.documentIdOf(event);
    let held = this.#held.get(id);
    // Deleted and set again below: the map stays in least-recently-touched order.
    if (held) this.#held.delete(id);
    else held = await this.#load(id, event);
    const last = this.#countDown(id);
    let next: StreamDocument | null;
    try {
      next = await this.#projection.fold(this.#events, held.doc, event);
    } catch {
      // The one-event path takes this document from here; it reads the store, so what is held goes there first.
      await this.#write([held]);
      this.#writtenEarly.delete(id);
      await this.#handOver(id, event);
      return;
    }
    if (next !== held.doc) {
      held.doc = next;
      held.dirty = true;
    }
    held.last = event;
    if (!last) {
      this.#held.set(id, held);
      return;
    }
    this.#ready.push(held);
    if (this.#ready.length >= WRITE_CHUNK) await this.#writeReady(false);
  }

  /** Whether this is the document's last event, as counted (scratch collection only). */
  #countDown(id: string): boolean {
    // Not counted (0): a stream that began after the count, or the live collection.
    return this.#remaining !== null && this.#remaining.countDown(id) === 1;
  }

  async #load(id: string, event: StoredEvent): Promise<Held> {
    if (this.#remaining) {
      // Scratch: nothing held means nothing folded yet, or written early (then folded again from the stream).
      return { id, doc: null, version: this.#writtenEarly.get(id) ?? null, last: event, dirty: false };
    }
    const stored = await this.#documents.get(id);
    return { id, doc: stored, version: stored?._v ?? null, last: event, dirty: false };
  }

  /** The end of a batch read from the store. */
  async endBatch(): Promise<void> {
    if (!this.#remaining) return this.flush();
    const early: Held[] = [];
    for (const [id, held] of this.#held) {
      if (this.#held.size <= this.#maxHeld) break;
      this.#held.delete(id);
      early.push(held);
    }
    await this.#write(early);
    for (const held of early) if (held.version !== null) this.#writtenEarly.set(held.id, held.version);
  }

  /** Writes and lets go of every held document. */
  async flush(): Promise<void> {
    await this.#writeReady(true);
    const all = [...this.#held.values()];
    this.#held.clear();
    await this.#write(all);
    this.#writtenEarly.clear();
  }

  /** Starts writing the ready documents, with at most WRITES_AT_ONCE under way; `wait`: and waits for all. */
  async #writeReady(wait: boolean): Promise<void> {
    const ready = this.#ready;
    this.#ready = [];
    if (this.#writing.length >= WRITES_AT_ONCE) await this.#writing.shift();
    const writing = this.#write(ready).then(() => {
      for (const held of ready) this.#writtenEarly.delete(held.id);
    });
    // A failure surfaces where the write is awaited (a later write, or the flush), not as an unhandled rejection.
    writing.catch(() => {});
    this.#writing.push(writing);
    if (wait) while (this.#writing.length > 0) await this.#writing.shift();
  }

  async #write(helds: Held[]): Promise<void> {
    const inserts = helds.filter((h) => h.dirty && h.doc !== null && h.version === null);
    for (let i = 0; i < inserts.length; i += WRITE_CHUNK) {
      const chunk = inserts.slice(i, i + WRITE_CHUNK);
      let refused: Set<string>;
      try {
        refused = new Set(await this.#insertMany(chunk.map((h) => withoutVersion(h.doc!))));
      } catch {
        // Some may be stored by now: the one-event path reads each and finishes it.
        refused = new Set(chunk.map((h) => h.doc!._id));
      }
      for (const held of chunk) {
        if (refused.has(held.doc!._id)) await this.#handOver(held.id, held.last);
        else this.#written(held, this.#firstVersion);
      }
    }
    for (const held of helds) {
      if (!held.dirty || held.doc === null || held.version === null) continue;
      let stored: { _v: number } | null;
      try {
        stored = await this.#documents.replace(withoutVersion(held.doc), held.version);
      } catch {
        // As for an insert: the one-event path tries again, and tells an outage from a bad event.
        stored = null;
      }
      if (stored) this.#written(held, stored._v);
      else await this.#handOver(held.id, held.last);
    }
  }

  #written(held: Held, version: number): void {
    held.version = version;
    held.dirty = false;
  }

  /** The one-event path applies `event` to the document as stored. */
  async #handOver(id: string, event: StoredEvent): Promise<void> {
    await this.#apply(event, this.#collection, this.#firstVersion);
  }


  async #insertMany(docs: StreamDocument[]): Promise<string[]> {
    const options = { version: this.#firstVersion };
    if (this.#documents.insertMany) return (await this.#documents.insertMany(docs, options)).duplicates;
    const refused: string[] = [];
    for (const doc of docs) {
      try {
        await this.#documents.insert(doc, options);
      } catch (error) {
        if (!(error instanceof DuplicateKeyError)) throw error;
        refused.push(doc._id);
      }
    }
    return refused;
  }
}

async function applyAll(
  events: EventStore, projection: RebuildableProjection, folder: BatchFolder,
  after: string | null, batchSize: number, onEvent: () => void, signal?: AbortSignal,
): Promise<{ position: string | null; count: number }> {
  let position = after;
  let count = 0;
  for (;;) {
    signal?.throwIfAborted();
    const batch = await events.readAll({ after: position, maxCount: batchSize, filter: { streamPrefixes: projection.streamPrefixes } });
    for (const event of batch) {
      await folder.fold(event);
      position = event.position;
      count++;
      onEvent();
    }
    if (batch.length < batchSize) break;
    await folder.endBatch();
  }
  await folder.flush();
  return { position, count };
}

/** The events to replay, in all and per document: the first of the rebuild's two passes. */
/**
 * Events still to come per document, in a few bytes per document whatever the history's length
 * (an open-addressing table of 32-bit FNV-1a hashes of the ids): memory stays flat where a map
 * of ids would grow by about 100 bytes per email. Two ids with one hash share a count, which
 * only keeps the first of them held until the last event of both (it is written then, or when
 * too many are held): the result is the same.
 */
export class EventCounts {
  #keys = new Uint32Array(1 << 16);
  #counts = new Uint32Array(1 << 16);
  #used = 0;

  static #hash(id: string): number {
    let h = 0x811c9dc5;
    for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
    // 0 marks a free slot.
    return (h >>> 0) || 1;
  }

  #slot(key: number): number {
    const mask = this.#keys.length - 1;
    let i = key & mask;
    while (this.#keys[i] !== 0 && this.#keys[i] !== key) i = (i + 1) & mask;
    return i;
  }

  add(id: string): void {
    if ((this.#used + 1) * 2 > this.#keys.length) this.#grow();
    const key = EventCounts.#hash(id);
    const i = this.#slot(key);
    if (this.#keys[i] === 0) {
      this.#keys[i] = key;
      this.#used++;
    }
    this.#counts[i]++;
  }

  /** The count before this event (0: not counted), and one less from now on. */
  countDown(id: string): number {
    const i = this.#slot(EventCounts.#hash(id));
    const left = this.#counts[i];
    if (left > 0) this.#counts[i] = left - 1;
    return left;
  }

  #grow(): void {
    const keys = this.#keys;
    const counts = this.#counts;
    this.#keys = new Uint32Array(keys.length * 2);
    this.#counts = new Uint32Array(keys.length * 2);
    for (let j = 0; j < keys.length; j++) {
      if (keys[j] === 0) continue;
      const i = this.#slot(keys[j]);
      this.#keys[i] = keys[j];
      this.#counts[i] = counts[j];
    }
  }
}

async function countEvents(events: EventStore, projection: RebuildableProjection, batchSize: number): Promise<{ total: number; perDocument: EventCounts }> {
  let position: string | null = null;
  let total = 0;
  const perDocument = new EventCounts();
  for (;;) {
    const batch = await events.readAll({ after: position, maxCount: batchSize, filter: { streamPrefixes: projection.streamPrefixes } });
    total += batch.length;
    for (const event of batch) {
      perDocument.add(projection.documentIdOf(event));
    }
    if (batch.length < batchSize) return { total, perDocument };
    position = batch[batch.length - 1].position;
  }
}

/** More writes than one document ever gets (at most one per event of its stream): the room each rebuild leaves below the next one's versions. */
const VERSION_SPAN = 2 ** 32;

/**
 * The version a swapped-in rebuild's documents start at: VERSION_SPAN above the highest the live
 * collection holds when the rebuild starts. The live documents stay below that whatever they are
 * written meanwhile, so no version read there before the swap is one a rebuilt document holds
 * after it; and the next rebuild starts above this one's the same way.
 */
async function firstVersionAbove(documents: DocumentStore, collection: string): Promise<number> {
  const [highest] = await documents.collection<StreamDocument>(collection).find({ orderBy: [['_v', 'desc']], limit: 1, fields: [] });
  return (highest?._v ?? 0) + VERSION_SPAN;
}

/** Reads the events after `after` into the live collection (each document read, then written by compare-and-set); then its indexes. */
async function catchUp(
  documents: DocumentStore, events: EventStore, projection: RebuildableProjection, apply: Apply,
  after: string | null, firstVersion: number, batchSize: number, signal?: AbortSignal,
): Promise<number> {
  const folder = new BatchFolder(documents, events, projection, projection.collection, apply, null, firstVersion);
  const { count } = await applyAll(events, projection, folder, after, batchSize, () => {}, signal);
  await projection.ensureIndexes(documents, projection.collection);
  return count;
}

export interface ResumeOptions {
  /** The rebuilds' name (their records' projection, `rebuild:<name>` for what they park). Default: the projection's name. */
  name?: string;
  /** As RebuildOptions. */
  attempts?: number;
  batchSize?: number;
  /** Stops between batches; what is not finished stays owed. */
  signal?: AbortSignal;
  /**
   * Also finish a swap that was recorded but not renamed (its scratch collection still exists:
   * the rename failed, or the rebuild died in it) by renaming it first. A rebuild does; the
   * processor does not, since a rebuild may be between recording and renaming now.
   */
  finishSwaps?: boolean;
  /** Told before each catch-up it resumes. */
  onResume?: (record: ScratchCollection) => void;
}

export interface ResumeResult {
  /** The scratch records whose catch-up was finished (and forgotten). */
  resumed: string[];
  /** Swaps recorded and not renamed, left to the next rebuild (without finishSwaps). */
  unrenamed: string[];
  events: number;
  skipped: number;
}

async function finishOwed(
  documents: DocumentStore, events: EventStore, projection: RebuildableProjection, name: string, apply: Apply, batchSize: number,
  options: Pick<ResumeOptions, 'signal' | 'finishSwaps' | 'onResume'>,
): Promise<Omit<ResumeResult, 'skipped'>> {
  const result: Omit<ResumeResult, 'skipped'> = { resumed: [], unrenamed: [], events: 0 };
  for (const record of await listScratch(documents)) {
    if (record.projection !== name || record.state !== 'swapped') continue;
    // Still there: not renamed yet. Its emptiness would not tell (a projection of no document),
    // and a processor that took an unrenamed swap for done would catch the old collection up and
    // forget the record, leaving nothing owed if the rebuild then died after its rename.
    if (await documents.exists(record._id)) {
      if (!options.finishSwaps) {
        result.unrenamed.push(record._id);
        continue;
      }
      await documents.rename(record._id, projection.collection);
    }
    options.onResume?.(record);
    result.events += await catchUp(documents, events, projection, apply, record.catchUpAfter ?? null, record.firstVersion ?? 1, batchSize, options.signal);
    await forgetScratch(documents, record._id);
    result.resumed.push(record._id);
  }
  return result;
}

/**
 * Finishes the catch-ups that rebuilds of `projection` interrupted after their swap still owe
 * its live collection. Safe beside the live projector and beside another resume: every write is
 * a compare-and-set under the stream revision guard, so an event applied twice changes nothing.
 */
export async function resumeCatchUps(
  documents: DocumentStore, events: EventStore, projection: RebuildableProjection, options: ResumeOptions = {},
): Promise<ResumeResult> {
  const name = options.name ?? projection.name;
  const skipped = { count: 0, listed: [] as SkippedEvent[] };
  const apply = skippingApply(documents, events, projection, name, Math.max(1, options.attempts ?? 3), skipped);
  const finished = await finishOwed(documents, events, projection, name, apply, options.batchSize ?? 2000, options);
  return { ...finished, skipped: skipped.count };
}

export async function rebuildProjection(
  documents: DocumentStore, events: EventStore, projection: RebuildableProjection, options: RebuildOptions = {},
): Promise<RebuildResult> {
  const batchSize = options.batchSize ?? 2000;
  const report = options.onProgress ?? (() => {});
  const name = options.name ?? projection.name;
  const target = options.into ?? `${projection.collection}__rebuild_${Date.now()}`;
  const problem = options.into === undefined ? null : scratchCollectionProblem(options.into);
  if (problem) throw new Error(problem);
  await ensureParkedIndexes(documents);
  const skipped = { count: 0, listed: [] as SkippedEvent[] };
  const apply = skippingApply(documents, events, projection, name, Math.max(1, options.attempts ?? 3), skipped);

  // What an earlier rebuild interrupted after its swap owes the live collection comes first.
  const { resumed } = await finishOwed(documents, events, projection, name, apply, batchSize, {
    finishSwaps: true, onResume: () => report({ phase: 'catching-up', done: 0, total: 0 }),
  });
  const refused = options.into === undefined ? null : await intoProblem(documents, target, name);
  if (refused) throw new RebuildRefusedError(refused);
  // Taken before the pass: the live documents stay below it, whatever the projector writes meanwhile.
  const firstVersion = options.into === undefined ? await firstVersionAbove(documents, projection.collection) : 1;
  await documents.drop(target);
  await recordScratch(documents, target, name);
  let done = 0;
  let first: { position: string | null; count: number };
  let swapping = false;
  try {
    report({ phase: 'counting', done: 0, total: 0 });
    const { total, perDocument } = await countEvents(events, projection, batchSize);
    const tick = () => report({ phase: 'rebuilding', done: ++done, total: Math.max(total, done) });
    const folder = new BatchFolder(documents, events, projection, target, apply, perDocument, firstVersion, options.maxHeld);
    first = await applyAll(events, projection, folder, null, batchSize, tick);
    // After the bulk load: building an index once costs less than keeping it up on every insert.
    await projection.ensureIndexes(documents, target);
    if (options.into) {
      await markScratchBuilt(documents, target, name);
      return { events: first.count, documents: await documents.collection(target).count(), collection: target, swapped: false, skipped: skipped.count, skippedEvents: skipped.listed, resumed };
    }
    // The catch-up is owed from the rename on: recorded before it. The indexes just built make
    // the scratch collection exist even with no document, so its existence tells whether the
    // rename has happened (finishOwed).
    await markScratchSwapped(documents, target, name, { catchUpAfter: first.position, firstVersion });
    swapping = true;
    await documents.rename(target, projection.collection);
  } catch (error) {
    // A half-built scratch collection is of no use. Once its swap is recorded it stays, and so
    // does its record: the rename may have begun (FerretDB drops the target first, so it may be
    // the only copy of the read model), and the next rebuild finishes the swap and its catch-up.
    if (!swapping) {
      await documents.drop(target).catch(() => {});
      await forgetScratch(documents, target).catch(() => {});
    }
    throw error;
  }
  report({ phase: 'catching-up', done, total: done });
  const rest = await catchUp(documents, events, projection, apply, first.position, firstVersion, batchSize);
  await forgetScratch(documents, target);
  const count = await documents.collection(projection.collection).count();
  report({ phase: 'swapped', done: first.count + rest, total: first.count + rest });
  return { events: first.count + rest, documents: count, collection: projection.collection, swapped: true, skipped: skipped.count, skippedEvents: skipped.listed, resumed };
}
