// The distributed adapter of the document store port, on MongoDB; also run against
// FerretDB v1 (MongoDB wire protocol on PostgreSQL, or SQLite), the engine available for tests here.
// Documents are stored as given plus the `_v` version field, through the encoding of
// storable.ts (the identity for ordinary data) so that any JSON the port takes can be stored on
// either engine; the database is the URL's path ('relay' when the URL has none).
//
// Compare-and-set. On MongoDB replace is `replaceOne({_id, _v: expected}, {...doc, _v:
// expected + 1})` and delete-at-version is `deleteOne({_id, _v})`: a single-document write
// evaluates its filter and writes atomically, so exactly one of N racing writers wins, across
// any number of clients and processes.
// FerretDB v1 does NOT give that guarantee: it reads the matching document, then writes it
// back by _id without re-checking the filter, so two connections can both "win" one version.
// On FerretDB the adapter therefore runs compare-and-set itself, and these are the only
// serialised operations: replace and delete-at-version of one document run one at a time in
// this process (a lock keyed by collection and _id), each reading the version by _id and then
// writing by _id. Within one process CAS holds against any number of concurrent callers, as
// it did when the adapter used a single connection for that; between processes it is NOT
// atomic, and concurrent replaces can lose updates. FerretDB is for development and tests;
// run several writer processes on MongoDB. (A version-claim scheme built on FerretDB's atomic
// unique inserts was rejected: a crash between the claim and the write wedges the document,
// and reinserted documents reuse versions, so it needs a recovery protocol heavier than the
// problem it solves.)
// Everything else runs on the driver's connection pool, on both engines: reads see committed
// writes, inserts against a unique index are atomic everywhere (FerretDB included), and
// unconditional deletes need no order. A slow scan no longer holds up every other request.
//
// Reads on FerretDB v1 + SQLite. Its SQLite backend answers every query by scanning the
// collection's table: no secondary index is ever used for a read, and the _id lookup it pushes
// down to SQL (only a filter that is exactly `{_id: "<string>"}`) does not match the _id
// index's expression either, so it is a scan in SQL (~20 µs a document); any other filter
// decodes every document in Go (~170 µs a document). See infra/engines/README.md. So on
// FerretDB the adapter keeps every lookup by _id in that bare form: get, compare-and-set and
// finds by a few _ids (point reads instead of one decoding scan).
//
// Durability. Writes ask for `w: 'majority', j: true`: MongoDB acknowledges them once they
// are in the journal of a majority of the replica set, so nothing Relay has answered for (a
// 202, a processed event) is lost with one node. FerretDB accepts and ignores write concerns;
// its SQLite backend commits every write to its WAL with an fsync (synchronous=FULL).
//
// Unique indexes. The port lets only documents that hold every indexed field with a
// non-null value collide. On MongoDB a unique index is partial on `{field: {$type:
// NON_NULL_TYPES}}` for each field (not `$exists`, which would keep explicit nulls); see
// document-query.ts for how queries are shaped so the planner still uses it.
// FerretDB v1 has no partial indexes; its unique indexes already ignore documents that
// lack a field, but documents holding an explicit null do collide (a deviation from the
// port that the contract leaves unspecified).
//
// Other FerretDB v1 gaps handled here: createIndexes with an existing name and another
// definition is silently ignored (so definitions are compared and replaced by hand);
// a unique violation on replace is InternalError (code 1) naming the SQLite index, and
// on insert an E11000 without the index name (so the index is found by re-checking); a
// unique index over existing duplicates fails with InternalError; renameCollection has no
// dropTarget (so rename drops the target first: not atomic, unlike on MongoDB).
import { MongoBulkWriteError, MongoClient, MongoError, MongoServerError, type Collection as MongoCollection, type Db, type Document, type IndexDescription } from 'mongodb';
import {
  checkArrayField,
  DuplicateKeyError,
  insertVersion,
  projectedFields,
  type Collection,
  type DocumentStore,
  type FindOptions,
  type IndexSpec,
  type InsertOptions,
  type Stored,
  type Where,
} from '../ports/document-store.ts';
import { and, checkField, compileFind, uniquePartialFilter, whereClauses } from './document-query.ts';
import { fromStored, storedKey, storedString, toStored } from './storable.ts';
import { wholeNumberProblem, type WholeNumberOption } from '../url-whole-numbers.ts';
import { PERCENT_ENCODE_USERINFO } from '../url-refusals.ts';

const DEFAULT_DATABASE = 'relay';
const PING_TIMEOUT_MS = 2000;

const NAMESPACE_NOT_FOUND = 26;
const NAMESPACE_EXISTS = 48;
const INDEX_NOT_FOUND = 27;
const INDEX_OPTIONS_CONFLICT = 85;
const INDEX_KEY_SPECS_CONFLICT = 86;
const DUPLICATE_KEY = 11000;

type Flavor = 'mongodb' | 'ferretdb';

export interface MongoDocumentStoreOptions {
  /** Connection pool size (default: the driver's, or the URL's maxPoolSize). */
  maxPoolSize?: number;
  /** How long an operation waits for each answer of the server (default: the URL's socketTimeoutMS, else SOCKET_TIMEOUT_MS). */
  socketTimeoutMs?: number;
}

/**
 * How long an operation waits for an answer on its connection before it fails (a
 * MongoNetworkTimeoutError, and the connection is dropped), unless the URL sets socketTimeoutMS.
 * The driver's default is no limit: a connection that stops answering (a stalled server, a
 * half-open connection after a failover or a NAT dropping its state) would leave the operation
 * pending for good, and the compare-and-set lock it holds with it, while new connections, and
 * so ping(), work again. A failure is what the processors and the forwarder retry. Under the
 * API's 30 s idle timeout (apps/api/connection-limits.ts), so that a request waiting on such a
 * connection gets an error answer rather than a dropped connection. (The driver's timeoutMS
 * does nothing in this major version.) A single query the server works on for longer without
 * answering fails too: on MongoDB, with its indexes, none of Relay's comes close; on FerretDB a
 * scan of a very large collection may (raise it in the URL then).
 */
export const SOCKET_TIMEOUT_MS = 25_000;

/** Finds by at most this many _ids run as point reads on FerretDB (see the header). */
const FERRETDB_POINT_READS = 16;

/** The database named by the URL's path, which the driver would otherwise default to 'test'. */
export function databaseName(url: string): string {
  const path = /^mongodb(?:\+srv)?:\/\/[^/?#]*(?:\/([^?#]*))?/i.exec(url)?.[1] ?? '';
  return decodeURIComponent(path) || DEFAULT_DATABASE;
}

function serverCode(err: unknown): number | undefined {
  return err instanceof MongoServerError && typeof err.code === 'number' ? err.code : undefined;
}

function isDuplicateKey(err: unknown): err is MongoServerError {
  if (!(err instanceof MongoServerError)) return false;
  // FerretDB reports unique violations on update and index builds as InternalError, with
  // its backend's message: SQLite's, or PostgreSQL's unique_violation (SQLSTATE 23505).
  return err.code === DUPLICATE_KEY || (err.code === 1 && /UNIQUE constraint failed|\(SQLSTATE 23505\)/.test(err.message));
}

function valueAt(doc: Document, path: string): unknown {
  let value: unknown = doc;
  for (const segment of path.split('.')) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Record<string, unknown>)[segment];
  }
  return value;
}

function splitDocument(doc: { _id: string }): { id: string; body: Document } {
  const { _id, _v, ...body } = doc as { _id: unknown; _v?: unknown };
  if (typeof _id !== 'string') throw new TypeError('document _id must be a string');
  return { id: _id, body };
}

interface ExistingIndex {
  name: string;
  key: Record<string, unknown>;
  unique?: boolean;
  partialFilterExpression?: Document;
}

/** The connection-level state the collections share. */
class Engine {
  readonly client: MongoClient;
  readonly db: Db;
  readonly flavor: Flavor;
  readonly #locks = new Map<string, Promise<void>>();
  #closed = false;

  constructor(client: MongoClient, db: Db, flavor: Flavor) {
    this.client = client;
    this.db = db;
    this.flavor = flavor;
  }

  get closed(): boolean {
    return this.#closed;
  }

  markClosed(): void {
    this.#closed = true;
  }

  collection(name: string): MongoCollection<Document> {
    // The driver reconnects on use after close; a closed store must fail instead.
    if (this.#closed) throw new Error('document store is closed');
    return this.db.collection(name);
  }

  /** Runs `work` once every earlier call with the same key has settled: a lock per key, in this process. */
  serialized<R>(key: string, work: () => Promise<R>): Promise<R> {
    const previous = this.#locks.get(key) ?? Promise.resolve();
    const result = previous.then(work);
    const settled = result.then(() => {}, () => {});
    this.#locks.set(key, settled);
    void settled.then(() => {
      if (this.#locks.get(key) === settled) this.#locks.delete(key);
    });
    return result;
  }
}

/**
 * The _ids a find asks for when it asks for nothing else (`{_id: x}` or `{_id: {in: [...]}}`,
 * no order, no cursor) and they are few: answered by point reads on FerretDB. Null otherwise.
 */
function pointReadIds(options: FindOptions): string[] | null {
  const { where, orderBy, after } = options;
  if (!where || after || (orderBy && orderBy.length > 0)) return null;
  const keys = Object.keys(where);
  if (keys.length !== 1 || keys[0] !== '_id') return null;
  const condition = where._id;
  let ids: unknown[];
  if (typeof condition === 'string') ids = [condition];
  else if (condition === null || typeof condition !== 'object') return null;
  else {
    const ops = Object.keys(condition).filter((op) => (condition as Record<string, unknown>)[op] !== undefined);
    if (ops.length !== 1) return null;
    if (ops[0] === 'eq') ids = [condition.eq];
    else if (ops[0] === 'in' && Array.isArray(condition.in)) ids = condition.in;
    else return null;
  }
  if (ids.length > FERRETDB_POINT_READS || !ids.every((id): id is string => typeof id === 'string')) return null;
  return [...new Set(ids)];
}

class MongoDocumentCollection<T extends { _id: string }> implements Collection<T> {
  readonly #engine: Engine;
  readonly #name: string;

  constructor(engine: Engine, name: string) {
    if (name === '' || name.includes('$') || name.includes('\u0000') || name.startsWith('system.')) {
      throw new Error(`invalid collection name: ${JSON.stringify(name)}`);
    }
    this.#engine = engine;
    this.#name = name;
  }

  get #coll(): MongoCollection<Document> {
    return this.#engine.collection(this.#name);
  }

  async get(id: string): Promise<Stored<T> | null> {
    return fromStored(await this.#coll.findOne({ _id: storedString(id) as never })) as Stored<T> | null;
  }

  async insert(doc: T, options?: InsertOptions): Promise<Stored<T>> {
    const version = insertVersion(options);
    const { id, body } = splitDocument(doc);
    const stored = { _id: id, ...body, _v: version };
    const written = toStored(stored);
    try {
      // A copy: the driver would otherwise write into the document it is given.
      await this.#coll.insertOne({ ...written } as Document);
    } catch (err) {
      if (isDuplicateKey(err)) throw await this.#duplicateKey(err, written, true);
      throw err;
    }
    return stored as unknown as Stored<T>;
  }

  async insertMany(docs: T[], options?: InsertOptions): Promise<{ duplicates: string[] }> {
    const version = insertVersion(options);
    if (docs.length === 0) return { duplicates: [] };
    const ids: string[] = [];
    const stored = docs.map((doc) => {
      const { id, body } = splitDocument(doc);
      ids.push(id);
      return toStored({ _id: id, ...body, _v: version }) as Document;
    });
    try {
      // Unordered: a taken _id refuses that document only, as separate inserts would.
      await this.#coll.insertMany(stored, { ordered: false });
      return { duplicates: [] };
    } catch (err) {
      if (!(err instanceof MongoBulkWriteError)) throw err;
      const writeErrors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
      // As isDuplicateKey reads a single write's error (FerretDB may say InternalError).
      const duplicate = (e: { code: number; errmsg?: string }) => e.code === DUPLICATE_KEY || (e.code === 1 && /UNIQUE constraint failed|\(SQLSTATE 23505\)/.test(e.errmsg ?? ''));
      if (writeErrors.length === 0 || !writeErrors.every(duplicate)) throw err;
      return { duplicates: writeErrors.map((e) => ids[e.index]) };
    }
  }

  async replace(doc: T, expectedVersion: number): Promise<Stored<T> | null> {
    const { id, body } = splitDocument(doc);
    if (!Number.isInteger(expectedVersion)) throw new TypeError(`expected version must be an integer, got ${expectedVersion}`);
    const replacement = { ...body, _v: expectedVersion + 1 };
    const written = toStored(replacement);
    const storedId = storedString(id);
    let matched: number;
    try {
      matched = this.#engine.flavor === 'ferretdb'
        ? await this.#atVersion(storedId, expectedVersion, async (coll) => (await coll.replaceOne({ _id: storedId as never }, written)).matchedCount)
        : (await this.#coll.replaceOne({ _id: storedId as never, _v: expectedVersion }, written)).matchedCount;
    } catch (err) {
      if (isDuplicateKey(err)) throw await this.#duplicateKey(err, { _id: storedId, ...written }, false);
      throw err;
    }
    return matched === 1 ? ({ _id: id, ...replacement } as unknown as Stored<T>) : null;
  }

  async delete(id: string, expectedVersion?: number): Promise<boolean> {
    const storedId = storedString(id);
    if (expectedVersion === undefined) return (await this.#coll.deleteOne({ _id: storedId as never })).deletedCount === 1;
    if (this.#engine.flavor === 'ferretdb') {
      return (await this.#atVersion(storedId, expectedVersion, async (coll) => (await coll.deleteOne({ _id: storedId as never })).deletedCount)) === 1;
    }
    return (await this.#coll.deleteOne({ _id: storedId as never, _v: expectedVersion })).deletedCount === 1;
  }

  /**
   * FerretDB's compare-and-set (see the header): `write` runs only if the document is at
   * `expectedVersion`, with no other compare-and-set on it in this process in between.
   * Both steps filter by the bare _id, the one filter FerretDB does not decode documents for.
   * `id` is the _id as stored.
   */
  #atVersion(id: string, expectedVersion: number, write: (coll: MongoCollection<Document>) => Promise<number>): Promise<number> {
    return this.#engine.serialized(`${this.#name}\u0000${id}`, async () => {
      const coll = this.#coll;
      const current = await coll.findOne({ _id: id as never }, { projection: { _v: 1 } });
      if (current?._v !== expectedVersion) return 0;
      return write(coll);
    });
  }

  find<K extends keyof T & string>(options: FindOptions & { fields: readonly K[] }): Promise<Array<Stored<Pick<T, K>>>>;
  find(options?: FindOptions): Promise<Array<Stored<T>>>;
  async find(options: FindOptions = {}): Promise<Array<Stored<T>>> {
    const { filter, sort, limit } = compileFind(options);
    // The driver reads limit 0 as "no limit"; the port means none.
    if (limit === 0) return [];
    // Inclusion projection: _id comes by default, _v is asked for; absent fields stay absent.
    const projection = options.fields === undefined
      ? undefined
      : Object.fromEntries([['_v', 1], ...projectedFields(options.fields).map((field) => [storedKey(field), 1])]) as Document;
    const ids = this.#engine.flavor === 'ferretdb' ? pointReadIds(options) : null;
    if (ids) {
      const found = (await Promise.all(ids.map((id) => this.#coll.findOne({ _id: storedString(id) as never }, projection && { projection })))).filter((doc) => doc !== null);
      return (limit === undefined ? found : found.slice(0, limit)).map(fromStored) as unknown as Array<Stored<T>>;
    }
    return (await this.#coll.find(filter, { sort, limit, ...(projection && { projection }) }).toArray()).map(fromStored) as unknown as Array<Stored<T>>;
  }

  async deleteWhere(where: Where): Promise<number> {
    return (await this.#coll.deleteMany(and(whereClauses(where)))).deletedCount;
  }

  async count(where?: Where): Promise<number> {
    return this.#coll.countDocuments(and(whereClauses(where)));
  }

  async ensureIndexes(indexes: IndexSpec[]): Promise<void> {
    const wanted = indexes.map((spec) => this.#describe(spec));
    let existing = await this.#existingIndexes();
    let skipped = false;
    for (const [i, description] of wanted.entries()) {
      const spec = indexes[i];
      const current = existing.find((index) => index.name === spec.name);
      // On FerretDB only unique indexes are made. It never reads through a secondary index (its
      // backends scan: infra/engines/README.md, "Query plans"), so a non-unique one only costs
      // every write; and it indexes a field's whole value as one entry, so an index over an array
      // or a long value refuses documents MongoDB takes (on PostgreSQL a btree entry holds at most
      // 2,704 bytes: fifty long addresses of an email's toAddresses pass it). One found under the
      // name is dropped, as it would go on refusing them. Unique indexes stay: they enforce rules.
      if (this.#engine.flavor === 'ferretdb' && !description.unique) {
        if (current) await this.#dropIndex(spec.name);
        skipped = true;
        continue;
      }
      if (current && this.#sameDefinition(current, description)) continue;
      // Same name, other definition: the caller's current definition wins.
      if (current) await this.#dropIndex(spec.name);
      try {
        await this.#createIndex(spec, description);
      } catch (err) {
        const code = serverCode(err);
        if (code !== INDEX_OPTIONS_CONFLICT && code !== INDEX_KEY_SPECS_CONFLICT) throw err;
        // The same key under another name, left by an earlier definition: replace it too,
        // unless this very call still wants it.
        existing = await this.#existingIndexes();
        const clash = existing.find((index) => index.name !== spec.name && index.name !== '_id_'
          && sameKey(index.key, description.key as Map<string, 1 | -1>) && !indexes.some((s) => s.name === index.name));
        if (!clash) throw err;
        await this.#dropIndex(clash.name);
        await this.#createIndex(spec, description);
      }
    }
    // ensureIndexes makes the collection (the port's exists(): a rebuild of no document).
    if (skipped && existing.length === 0) await this.#createCollection();
  }

  async #createCollection(): Promise<void> {
    try {
      await this.#engine.db.createCollection(this.#name);
    } catch (err) {
      if (serverCode(err) !== NAMESPACE_EXISTS) throw err;
    }
  }

  #describe(spec: IndexSpec): IndexDescription {
    if (spec.name === '' || spec.name === '_id_') throw new Error(`invalid index name ${JSON.stringify(spec.name)}`);
    if (spec.fields.length === 0) throw new Error(`index ${spec.name} has no fields`);
    // MongoDB makes any index over an array field multikey: arrayField asks nothing more of it.
    checkArrayField(spec);
    // A Map keeps the field order even for names JavaScript would reorder (integer-like keys).
    const key = new Map(spec.fields.map(([field, direction]): [string, 1 | -1] => [checkField(field), direction === 'desc' ? -1 : 1]));
    const description: IndexDescription = { key, name: spec.name };
    if (spec.unique) {
      description.unique = true;
      // FerretDB has no partial indexes, and its unique indexes skip missing fields anyway.
      if (this.#engine.flavor === 'mongodb') description.partialFilterExpression = uniquePartialFilter([...key.keys()]);
    }
    return description;
  }

  #sameDefinition(current: ExistingIndex, wanted: IndexDescription): boolean {
    return sameKey(current.key, wanted.key as Map<string, 1 | -1>)
      && Boolean(current.unique) === Boolean(wanted.unique)
      && JSON.stringify(current.partialFilterExpression ?? null) === JSON.stringify(wanted.partialFilterExpression ?? null);
  }

  async #existingIndexes(): Promise<ExistingIndex[]> {
    try {
      return (await this.#coll.listIndexes().toArray()) as ExistingIndex[];
    } catch (err) {
      if (serverCode(err) === NAMESPACE_NOT_FOUND) return [];
      throw err;
    }
  }

  async #createIndex(spec: IndexSpec, description: IndexDescription): Promise<void> {
    try {
      await this.#coll.createIndexes([description]);
    } catch (err) {
      if (isDuplicateKey(err)) throw new DuplicateKeyError(this.#name, spec.name);
      throw err;
    }
  }

  async #dropIndex(name: string): Promise<void> {
    try {
      await this.#coll.dropIndex(name);
    } catch (err) {
      // Another process replacing the same definition may have dropped it first.
      if (serverCode(err) !== INDEX_NOT_FOUND && serverCode(err) !== NAMESPACE_NOT_FOUND) throw err;
    }
  }

  /**
   * Names the index a write collided on. MongoDB says it in the message; FerretDB names
   * the SQLite index on updates and nothing on inserts, so then the taken values are looked
   * up: the colliding document is another one holding every value of a unique index.
   */
  async #duplicateKey(err: MongoServerError, doc: Document, inserting: boolean): Promise<DuplicateKeyError> {
    const named = / index: (\S+) dup key/.exec(err.message)?.[1];
    if (named) return new DuplicateKeyError(this.#name, named === '_id_' ? '_id' : named);
    const unique = (await this.#existingIndexes()).filter((index) => index.unique && index.name !== '_id_');
    // No other unique index: an insert can only have collided on _id.
    if (inserting && unique.length === 0) return new DuplicateKeyError(this.#name, '_id');
    const sqliteIndex = /UNIQUE constraint failed: index '([^']+)'/.exec(err.message)?.[1];
    if (sqliteIndex) {
      const byName = unique
        .filter((index) => sqliteIndex.endsWith(`_${index.name}`))
        .sort((a, b) => b.name.length - a.name.length)[0];
      if (byName) return new DuplicateKeyError(this.#name, byName.name);
    }
    if (inserting && (await this.#coll.countDocuments({ _id: doc._id }, { limit: 1 })) > 0) {
      return new DuplicateKeyError(this.#name, '_id');
    }
    for (const index of unique) {
      const fields = Object.keys(index.key);
      const values = fields.map((field) => valueAt(doc, field));
      if (values.some((value) => value === undefined)) continue;
      const filter: Document = { _id: { $ne: doc._id } };
      fields.forEach((field, i) => (filter[field] = { $eq: values[i] }));
      if ((await this.#coll.countDocuments(filter, { limit: 1 })) > 0) return new DuplicateKeyError(this.#name, index.name);
    }
    // The holder of the value is gone already; name the likeliest index.
    const candidate = unique.find((index) => Object.keys(index.key).every((field) => valueAt(doc, field) != null));
    return new DuplicateKeyError(this.#name, candidate?.name ?? '_id');
  }
}

function sameKey(current: Record<string, unknown>, wanted: Map<string, 1 | -1>): boolean {
  const entries = Object.entries(current);
  if (entries.length !== wanted.size) return false;
  const wantedEntries = [...wanted.entries()];
  return entries.every(([field, direction], i) => field === wantedEntries[i][0] && Number(direction) === wantedEntries[i][1]);
}

async function serverFlavor(client: MongoClient): Promise<Flavor> {
  const info = await client.db('admin').command({ buildInfo: 1 });
  return 'ferretdbVersion' in info || 'ferretdb' in info ? 'ferretdb' : 'mongodb';
}

/** A URL the driver refuses. The message holds none of the URL's user information. */
export class MongoUrlError extends Error {
  override name = 'MongoUrlError';
}

/**
 * The URL options the driver reads as numbers, with parseInt (mongodb/lib/utils.js parseInteger,
 * through getIntFromOptions and getUIntFromOptions in lib/connection_string.js, 7.9.0: the
 * options of type 'uint' and 'int' there and those whose transform calls one of the two). It
 * stops at the first character that is not a digit and takes no unit, so socketTimeoutMS=10s
 * would be a 10 ms timeout, connectTimeoutMS=1e4 1 ms and socketTimeoutMS=0x10 none at all:
 * only a whole number as written is accepted. The driver matches option names ignoring case.
 * Check this list against that file when the driver is upgraded.
 */
const WHOLE_NUMBER_OPTIONS: Array<[string, WholeNumberOption]> = [
  ...['connectTimeoutMS', 'heartbeatFrequencyMS', 'localThresholdMS', 'maxIdleTimeMS', 'minHeartbeatFrequencyMS', 'serverSelectionTimeoutMS',
    'socketTimeoutMS', 'waitQueueTimeoutMS', 'wtimeoutMS', 'wtimeout', 'autoSelectFamilyAttemptTimeout'].map((option): [string, WholeNumberOption] => [option, { unit: 'milliseconds', min: 0 }]),
  ['maxPoolSize', { unit: 'connections', min: 0 }],
  ['minPoolSize', { unit: 'connections', min: 0 }],
  ['maxConnecting', { unit: 'connections', min: 1 }],
  ['maxStalenessSeconds', { unit: 'seconds', min: 0 }],
  ['maxAdaptiveRetries', { unit: 'retries', min: 0 }],
  ['srvMaxHosts', { unit: 'hosts', min: 0 }],
  ['minInternalBufferSize', { unit: 'bytes', min: 0 }],
  ['mongodbLogMaxDocumentLength', { unit: 'characters', min: 0 }],
  ['proxyPort', { unit: '', min: 0 }],
  ['family', { unit: '', min: 4 }],
  ['zlibCompressionLevel', { unit: '', min: -1, minMeans: '-1: the default' }],
];
const NUMBER_OPTION_BY_KEY = new Map(WHOLE_NUMBER_OPTIONS.map(([option, spec]) => [option.toLowerCase(), { option, spec }]));

/** A number option of the URL's query the driver would misread (see WHOLE_NUMBER_OPTIONS), or null. */
function urlNumberProblem(url: string): string | null {
  // The query as the driver finds it: after the user information, which runs to the first "@"
  // (a password cut short at an unescaped "?" is no query, and never quoted as one).
  const query = /\?([^#]*)/.exec(withoutUserinfoPart(url))?.[1] ?? '';
  for (const [key, value] of new URLSearchParams(query)) {
    const known = NUMBER_OPTION_BY_KEY.get(key.toLowerCase());
    const problem = known ? wholeNumberProblem(known.option, value.trim(), known.spec, 'driver') : null;
    if (problem !== null) return problem;
  }
  return null;
}

/**
 * The client for `url` and the database it names. The driver reads the URL (and its options)
 * as the client is made, synchronously, and connects only when asked to.
 */
function clientOf(url: string, options: MongoDocumentStoreOptions): { client: MongoClient; database: string } {
  const misread = urlNumberProblem(url);
  if (misread !== null) throw new MongoUrlError(misread);
  try {
    const client = new MongoClient(url, {
      // An undefined field is absent, as in the JSON the other adapter stores.
      ignoreUndefined: true,
      // Acknowledged once it survives the loss of a node (see the header).
      writeConcern: { w: 'majority', journal: true },
      ...(options.maxPoolSize === undefined ? {} : { maxPoolSize: options.maxPoolSize }),
      // An option given here would override the URL's.
      ...(options.socketTimeoutMs === undefined && urlSets(url, 'socketTimeoutMS') ? {} : { socketTimeoutMS: options.socketTimeoutMs ?? SOCKET_TIMEOUT_MS }),
    });
    return { client, database: databaseName(url) };
  } catch (error) {
    if (error instanceof URIError) throw new MongoUrlError('the database name (the path) is not percent-encoded correctly');
    // The driver's own MongoParseError is a MongoError; the URL library under it throws one
    // that is a plain Error of that name (a password with an unescaped ":", a user name with "[").
    if (error instanceof MongoError || (error as Error | null)?.name === 'MongoParseError') {
      const message = withoutUserinfo((error as Error).message, url);
      throw new MongoUrlError(/unescaped characters/i.test(message) ? `${message}; ${PERCENT_ENCODE_USERINFO}` : message);
    }
    throw error;
  }
}

/** Whether the URL's query names `option` (the driver reads option names in any case). */
function urlSets(url: string, option: string): boolean {
  const query = url.split('?')[1] ?? '';
  return query.split('&').some((pair) => pair.split('=')[0].toLowerCase() === option.toLowerCase());
}

/**
 * The user information as the driver reads it (mongodb-connection-string-url's HOSTS_REGEX):
 * everything from "://" to the first "@", an unescaped "/", "?" or "#" in it included.
 */
const USERINFO = /^([^:/?#]+:\/\/)([^@]*)@/;

/** The URL without its user information (and the "@" after it). */
const withoutUserinfoPart = (url: string): string => url.replace(USERINFO, '$1');

/** `message` with the URL's user name and password, as written and decoded, replaced by ***. */
export function withoutUserinfo(message: string, url: string): string {
  const userinfo = USERINFO.exec(url)?.[2];
  if (!userinfo) return message;
  const decoded = (part: string) => {
    try {
      return decodeURIComponent(part);
    } catch {
      return part;
    }
  };
  const secrets = [userinfo, ...userinfo.split(':')].flatMap((part) => [part, decoded(part)]).filter((part) => part !== '');
  return secrets.sort((a, b) => b.length - a.length).reduce((text, secret) => text.split(secret).join('***'), message);
}

/** What the driver finds wrong with `url`, or null. Makes a client but never connects it: nothing to close. */
export function mongoUrlProblem(url: string): string | null {
  try {
    clientOf(url, {});
    return null;
  } catch (error) {
    if (error instanceof MongoUrlError) return error.message;
    throw error;
  }
}

export class MongoDocumentStore implements DocumentStore {
  readonly #engine: Engine;

  private constructor(engine: Engine) {
    this.#engine = engine;
  }

  /**
   * Connects and identifies the server; fails if it cannot be reached. A URL the driver refuses
   * is a MongoUrlError.
   */
  static async connect(url: string, options: MongoDocumentStoreOptions = {}): Promise<MongoDocumentStore> {
    const { client, database } = clientOf(url, options);
    let flavor: Flavor;
    try {
      await client.connect();
      flavor = await serverFlavor(client);
    } catch (err) {
      await client.close().catch(() => {});
      throw err;
    }
    return new MongoDocumentStore(new Engine(client, client.db(database), flavor));
  }

  /** 'ferretdb' when the server identified as FerretDB, whose CAS is atomic only within one process. */
  get flavor(): Flavor {
    return this.#engine.flavor;
  }

  collection<T extends { _id: string }>(name: string): Collection<T> {
    return new MongoDocumentCollection<T>(this.#engine, name);
  }

  async drop(name: string): Promise<void> {
    try {
      await this.#engine.collection(name).drop();
    } catch (err) {
      if (serverCode(err) !== NAMESPACE_NOT_FOUND) throw err;
    }
  }

  async rename(from: string, to: string): Promise<void> {
    if (from === to) return;
    const source = this.#engine.collection(from);
    if (this.#engine.flavor === 'mongodb') {
      try {
        // Atomic on MongoDB: readers of `to` see the old collection, then the new one.
        await source.rename(to, { dropTarget: true });
      } catch (err) {
        if (serverCode(err) === NAMESPACE_NOT_FOUND) throw new Error(`cannot rename collection ${from}: it does not exist`, { cause: err });
        throw err;
      }
      return;
    }
    // FerretDB has no dropTarget. Check the source first so a failed rename cannot cost the target.
    const found = await this.#engine.db.listCollections({ name: from }, { nameOnly: true }).toArray();
    if (found.length === 0) throw new Error(`cannot rename collection ${from}: it does not exist`);
    await this.drop(to);
    await source.rename(to);
  }

  async exists(name: string): Promise<boolean> {
    return (await this.#engine.db.listCollections({ name }, { nameOnly: true }).toArray()).length > 0;
  }

  async ping(): Promise<boolean> {
    if (this.#engine.closed) return false;
    try {
      // The driver ignores timeoutMS; a signal does end the wait.
      const reply = await this.#engine.client.db('admin').command({ ping: 1 }, { signal: AbortSignal.timeout(PING_TIMEOUT_MS) });
      return reply.ok === 1;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    if (this.#engine.closed) return;
    this.#engine.markClosed();
    await this.#engine.client.close();
  }
}
