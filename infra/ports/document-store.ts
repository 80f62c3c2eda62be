// The document store port, shaped after MongoDB: collections of JSON documents with
// an `_id`, secondary and unique indexes, queries by equality and ranges with sort,
// limit and keyset cursors. There are no multi-document transactions: every write is
// one document, made safe by compare-and-set on the `_v` version field. Every adapter
// must pass test/contracts/document-store.contract.ts.
//
// Semantics every adapter honours (the contract tests them):
// - Equality is typed: 10 does not match "10", true does not match 1; null matches null
//   and missing fields; `ne` also matches documents that lack the field.
// - `contains` matches array fields only; an index's `arrayField` lets it seek them.
// - Ranges match values of the bound's type only.
// - Missing/null sort fields sort first ascending, last descending; cursors may hold null.
// - Unique indexes constrain only documents that have every indexed field non-null.
// - A `limit` of 0 returns nothing; reading a collection never written gives no results.
// - A find with `fields` returns those top-level fields that the document has, plus _id
//   and _v; a field the document lacks is absent, not null.

export type Scalar = string | number | boolean | null;

export interface Condition {
  eq?: Scalar;
  ne?: Scalar;
  in?: Scalar[];
  gt?: Scalar;
  gte?: Scalar;
  lt?: Scalar;
  lte?: Scalar;
  /** The field is an array holding this value. */
  contains?: Scalar;
}

/** Field paths may be dotted ("a.b"). A Scalar value means equality. All entries must hold. */
export type Where = Record<string, Scalar | Condition>;

export type Direction = 'asc' | 'desc';

export interface FindOptions {
  where?: Where;
  orderBy?: Array<[field: string, direction: Direction]>;
  limit?: number;
  /**
   * Keyset cursor: the orderBy field values of the last document already seen. Only
   * documents strictly after it in the orderBy order are returned. The orderBy must end
   * with a unique field (usually _id) for this to be exact.
   */
  after?: Record<string, Scalar>;
  /**
   * Projection: the top-level fields to return, for reads that need a few fields of large
   * documents. `_id` and `_v` always come back; a listed field the document lacks is absent
   * from the result (an explicit null stays null), and values keep their JSON types. Names
   * are plain top-level keys, checked by projectedFields. Absent: whole documents.
   */
  fields?: readonly string[];
}

/**
 * The projected field names of `fields` without _id and _v (which always come back), each
 * once. Throws on a name that is not a plain top-level key: empty, holding '.' (a path) or
 * '$' (a MongoDB operator), or '"', '\\' or a control character (which a SQLite JSON path
 * cannot quote). Shared so the adapters refuse the same names.
 */
export function projectedFields(fields: readonly string[]): string[] {
  const names = new Set<string>();
  for (const field of fields) {
    if (typeof field !== 'string' || field === '' || /[.$"\\\u0000-\u001f]/.test(field)) {
      throw new Error(`invalid projected field: ${JSON.stringify(field)}`);
    }
    if (field !== '_id' && field !== '_v') names.add(field);
  }
  return [...names];
}

export interface IndexSpec {
  name: string;
  fields: Array<[field: string, direction: Direction]>;
  unique?: boolean;
  /**
   * The one field of `fields` that holds arrays: the index holds each element (MongoDB's
   * multikey index), so a find with `contains` on it seeks the index like an equality would,
   * in the index's order. Not with `unique`, nor with `_v` among the fields. Declared because
   * an adapter without multikey indexes (SQLite) must know which field to take apart; it
   * changes no query's answer.
   */
  arrayField?: string;
}

/** Throws on an arrayField the adapters cannot index: shared so they refuse the same specs. */
export function checkArrayField(spec: IndexSpec): void {
  if (spec.arrayField === undefined) return;
  const problem = !spec.fields.some(([field]) => field === spec.arrayField) ? 'is not one of its fields'
    : spec.arrayField === '_id' || spec.arrayField === '_v' ? 'cannot be _id or _v'
    : spec.unique ? 'cannot be in a unique index'
    : spec.fields.some(([field]) => field === '_v') ? 'cannot be indexed with _v'
    : null;
  if (problem) throw new Error(`index ${spec.name}: arrayField ${JSON.stringify(spec.arrayField)} ${problem}`);
}

export interface Versioned {
  _id: string;
  /** Version, set by the store: 1 on insert (or the insert's InsertOptions.version), +1 on each replace. */
  _v: number;
}

export interface InsertOptions {
  /**
   * The version to store the document at instead of 1: a safe integer of at least 1. For a
   * collection that is to replace another (a rebuild's, renamed over the live one): starting
   * above every version of the one it replaces, none of its versions equals one read there, so
   * a compare-and-set prepared on the old collection fails on the new one.
   */
  version?: number;
}

/** The version an insert stores its documents at; throws on one that is no safe integer of at least 1. Shared so the adapters agree. */
export function insertVersion(options?: InsertOptions): number {
  const version = options?.version ?? 1;
  if (!Number.isSafeInteger(version) || version < 1) throw new Error(`invalid document version: ${String(version)}`);
  return version;
}

export type Stored<T> = T & Versioned;

export interface Collection<T extends { _id: string }> {
  get(id: string): Promise<Stored<T> | null>;
  /** Throws DuplicateKeyError when the _id or a unique index value is taken. */
  insert(doc: T, options?: InsertOptions): Promise<Stored<T>>;
  /**
   * Bulk load (rebuilds): inserts the documents at version 1 (or `options.version`) in as
   * few round trips as the store allows. Each document is inserted or refused on its own, as
   * `insert` would; the batch is not atomic. Returns the _ids refused because their _id or a
   * unique index value was taken. Any other failure throws, and some documents may be stored by
   * then. Optional: without it, callers insert one by one.
   */
  insertMany?(docs: T[], options?: InsertOptions): Promise<{ duplicates: string[] }>;
  /**
   * Compare-and-set: replaces the document only if its current version is `expectedVersion`.
   * Returns the stored document, or null when the version did not match or the document is gone.
   * Throws DuplicateKeyError when a unique index value would be taken.
   */
  replace(doc: T, expectedVersion: number): Promise<Stored<T> | null>;
  /** Deletes the document (only at that version when given). Returns whether one was deleted. */
  delete(id: string, expectedVersion?: number): Promise<boolean>;
  /** With `fields`, each result holds only those fields (and _id, _v): see FindOptions.fields. */
  find<K extends keyof T & string>(options: FindOptions & { fields: readonly K[] }): Promise<Array<Stored<Pick<T, K>>>>;
  find(options?: FindOptions): Promise<Array<Stored<T>>>;
  count(where?: Where): Promise<number>;
  /**
   * Deletes every document matching `where`, whatever its version, in one request; returns how
   * many. Not atomic across documents: for clean-ups (expired documents), not for decisions.
   */
  deleteWhere(where: Where): Promise<number>;
  ensureIndexes(indexes: IndexSpec[]): Promise<void>;
}

export interface DocumentStore {
  collection<T extends { _id: string }>(name: string): Collection<T>;
  /** Removes a collection and its indexes. */
  drop(name: string): Promise<void>;
  /** Renames `from` to `to`, replacing `to` if it exists (used to swap in a rebuilt read model). */
  rename(from: string, to: string): Promise<void>;
  /**
   * Whether the collection exists: made by a write or ensureIndexes (and kept when emptied),
   * not dropped or renamed away since. Reads never make one. A rebuild's swap tells by it
   * whether its rename happened, which an empty collection cannot tell.
   */
  exists(name: string): Promise<boolean>;
  ping(): Promise<boolean>;
  /**
   * Why the store takes no writes now, as far as it knows, or null: /readyz shows it beside a
   * check its ping failed (the embedded store: its WAL could not be synced, or writes fail on
   * the file, a full disk, until one succeeds). Absent: the store cannot tell.
   */
  writeFailure?(): string | null;
  close(): Promise<void>;
  /**
   * Makes deleted documents unrecoverable from the store's own files, where the engine can
   * (the embedded store empties its WAL; MongoDB cannot: see README, Data at rest). False when
   * it could not finish now (try again later). Absent when the store has no such operation.
   */
  purgeDeleted?(): Promise<boolean>;
}

export class DuplicateKeyError extends Error {
  readonly collection: string;
  /** The index whose value is taken ('_id' for the primary key). */
  readonly index: string;
  constructor(collection: string, index: string) {
    super(`duplicate key in ${collection} (index ${index})`);
    this.name = 'DuplicateKeyError';
    this.collection = collection;
    this.index = index;
  }
}
