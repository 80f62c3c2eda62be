// The embedded adapter of the document store port: one SQLite table per collection,
// (id TEXT PRIMARY KEY, v INTEGER, doc TEXT JSON), and for each field a secondary index names
// a column holding json_extract(doc, path), which the indexes are built on (filled from the
// documents already there in batches, ./field-fills.ts; kept by every write, ./field-columns.ts:
// an update leaves the indexes of the fields it does not change alone); an index over an array
// field is a side table kept by triggers (./array-indexes.ts). Unique indexes do not
// constrain documents where any indexed field is missing or null (SQLite treats NULLs as
// distinct), i.e. sparse semantics.
// Tables are created on first write; reads of a collection that does not exist see it
// empty. Several adapters may share one database file or connection.
import { setImmediate } from 'node:timers/promises';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
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
import { connect, type ConnectOptions, type SqliteConnections } from './connections.ts';
import { truncateWal } from './database.ts';
import { dropArrayIndex, ensureArrayIndex, renameArrayIndexes, sideTablesOf, sideTableName } from './array-indexes.ts';
import { chooseAccess, fieldSql, findTail, fromSql, indexProbes, quoteIdent, whereSql, type Access, type ArrayIndexes, type FieldColumns, type IndexLayout, type Tail } from './document-query.ts';
import { FIELD_COLUMN_PREFIX, fieldColumnsOf, filterColumnsOf, forgetFieldColumns, readLayoutOf } from './field-columns.ts';
import { checkFormat, columnsFilling, dropFillMarkers, fillBatch, markFill, renameFillMarkers, tablesFilling, type FieldFillReport } from './field-fills.ts';

export type { FieldFillReport } from './field-fills.ts';

export interface DocumentStoreOptions extends ConnectOptions {
  /**
   * The start's abort signal: a fill of field columns (ensureIndexes) stops before its next
   * batch once it aborts, rejecting with its reason; the next ensureIndexes goes on from there.
   */
  abandon?: AbortSignal;
  /** Told how fills of field columns go (./field-fills.ts): the first start after an upgrade may fill large tables. */
  onFieldFill?: (report: FieldFillReport) => void;
}

const TABLE_PREFIX = 'doc_';
const INDEX_SEPARATOR = '__';
const STATEMENT_CACHE_LIMIT = 256;
const COLLECTION_CACHE_LIMIT = 1_000;
/** Rows one statement of deleteWhere deletes at most (a few milliseconds of the event loop). */
const DELETE_BATCH = 1_000;
/** purgeDeleted's tries while a reader keeps the WAL in use: the first after firstMs, doubling up to maxMs, for forMs in all. */
const PURGE_RETRY = { firstMs: 5, maxMs: 100, forMs: 1_000 };

interface Row {
  id: string;
  v: number;
  doc: string;
}

function tableName(collection: string): string {
  if (collection === '') throw new Error('collection name must not be empty');
  return TABLE_PREFIX + collection;
}

function indexName(table: string, index: string): string {
  if (index === '') throw new Error('index name must not be empty');
  return table + INDEX_SEPARATOR + index;
}

function sqliteErrcode(err: unknown): number | undefined {
  return typeof err === 'object' && err !== null && 'errcode' in err ? Number((err as { errcode: unknown }).errcode) : undefined;
}

const SQLITE_CONSTRAINT_PRIMARYKEY = 1555;
const SQLITE_CONSTRAINT_UNIQUE = 2067;

function isNoSuchTable(err: unknown): boolean {
  return err instanceof Error && sqliteErrcode(err) === 1 && err.message.startsWith('no such table');
}

/** A column of a field column's or a side table's (./array-indexes.ts) that a read knew of. */
function isNoSuchFieldColumn(err: unknown): boolean {
  return err instanceof Error && sqliteErrcode(err) === 1 && /^no such column: "?(field|key|each|type):/.test(err.message);
}

/** An index that a read knew of (and named, INDEXED BY) is gone. */
function isNoSuchIndex(err: unknown): boolean {
  return err instanceof Error && sqliteErrcode(err) === 1 && err.message.startsWith('no such index');
}

/** A table other than `table` is missing: a side table that a read knew of. */
function isNoSuchSideTable(err: unknown, table: string): boolean {
  return isNoSuchTable(err) && !(err as Error).message.endsWith(`: ${table}`) && !(err as Error).message.endsWith(`: main.${table}`);
}

function isUniqueViolation(err: unknown): err is Error {
  const code = sqliteErrcode(err);
  return code === SQLITE_CONSTRAINT_UNIQUE || code === SQLITE_CONSTRAINT_PRIMARYKEY;
}

function toRow(doc: { _id: string }): { id: string; json: string } {
  const { _id, _v, ...body } = doc as { _id: unknown; _v?: unknown };
  if (typeof _id !== 'string') throw new TypeError('document _id must be a string');
  return { id: _id, json: JSON.stringify(body) };
}

function fromRow<T>(row: Row): Stored<T> {
  return { _id: row.id, ...JSON.parse(row.doc), _v: Number(row.v) } as Stored<T>;
}

/**
 * The connection-level services the collections share. Writes run on the writer inside its
 * group commit (they settle once durable); reads run on the reader, which sees committed
 * documents only (./connections.ts).
 */
class Engine {
  readonly connections: SqliteConnections;
  readonly db: DatabaseSync;
  readonly #statements = new Map<string, StatementSync>();
  readonly #readStatements = new Map<string, StatementSync>();
  readonly #existing = new Set<string>();
  /** Counts schemaChanged(): a failed write that changed the schema is rolled back with it. */
  #schemaChanges = 0;
  #closed = false;
  readonly #fillOptions: Pick<DocumentStoreOptions, 'abandon' | 'onFieldFill'>;
  /** The format check and the fills it found pending, once per engine (prepare()). */
  #ready: Promise<void> | null = null;
  /** The fills under way, by table: a second ensureIndexes of the table waits for the same one. */
  readonly #fills = new Map<string, Promise<void>>();

  constructor(connections: SqliteConnections, fillOptions: Pick<DocumentStoreOptions, 'abandon' | 'onFieldFill'> = {}) {
    this.connections = connections;
    this.db = connections.writer;
    this.#fillOptions = fillOptions;
  }

  get closed(): boolean {
    return this.#closed;
  }

  markClosed(): void {
    this.#closed = true;
    this.#statements.clear();
    this.#readStatements.clear();
  }

  /** A statement of the writer: only inside a group-commit write (commit()). */
  statement(sql: string): StatementSync {
    return this.#prepared(this.#statements, this.db, sql);
  }

  /** The indexed fields' columns of `table` for a write: call inside commit(). */
  writeColumns(table: string): FieldColumns {
    return fieldColumnsOf(this.db, table, this.connections.commits.batch);
  }

  /** writeColumns for a filter: those being filled left out. */
  filterColumns(table: string): FieldColumns {
    return filterColumnsOf(this.db, table, this.connections.commits.batch);
  }

  /**
   * Before the first ensureIndexes: refuses a file of a newer storage format, marks the columns a
   * build that does not keep them may have left wrong, and fills every column marked (cut short
   * by a stop or a crash, too), whether or not this process indexes its table.
   */
  prepare(): Promise<void> {
    this.#ready ??= this.#prepare().catch((err: unknown) => {
      this.#ready = null;
      throw err;
    });
    return this.#ready;
  }

  async #prepare(): Promise<void> {
    const check = await this.commit(() => {
      const found = checkFormat(this.db);
      this.schemaChanged();
      return found;
    });
    if (check.legacyIndexes.length > 0 || check.marked.length > 0) {
      this.#fillOptions.onFieldFill?.({ phase: 'repair', format: check.format, legacyIndexes: check.legacyIndexes, tables: check.marked });
    }
    for (const table of await this.commit(() => tablesFilling(this.db))) await this.fill(table);
  }

  /** Fills the columns of `table` being filled (./field-fills.ts), in batches; rejects with the abort signal's reason when it aborts. */
  fill(table: string): Promise<void> {
    let fill = this.#fills.get(table);
    if (!fill) {
      fill = this.#fill(table).finally(() => this.#fills.delete(table));
      this.#fills.set(table, fill);
    }
    return fill;
  }

  async #fill(table: string): Promise<void> {
    const { abandon, onFieldFill } = this.#fillOptions;
    const found = await this.commit(() => {
      const columns = columnsFilling(this.db, table);
      return { columns, rows: columns.length === 0 ? 0 : Number((this.statement(`SELECT count(*) AS n FROM ${quoteIdent(table)}`).get() as { n: number }).n) };
    });
    const { columns } = found;
    if (columns.length === 0) return;
    onFieldFill?.({ phase: 'start', table, columns, rows: found.rows });
    const done = { batches: 0, scanned: 0, updated: 0 };
    for (let after: string | null = null; ;) {
      if (abandon?.aborted) {
        onFieldFill?.({ phase: 'stopped', table, columns, ...done });
        throw abandon.reason;
      }
      const from: string | null = after;
      const batch = await this.commit(() => {
        const filled = fillBatch(this.db, table, columns, from);
        if (filled.next === null) this.schemaChanged();
        return filled;
      });
      done.batches++;
      done.scanned += batch.scanned;
      done.updated += batch.updated;
      onFieldFill?.({ phase: 'batch', table, columns, batch: done.batches, scanned: batch.scanned, updated: batch.updated });
      if (batch.next === null) break;
      after = batch.next;
      // The event loop's turn: timers (a stop's deadline), signals, other writes.
      await setImmediate();
    }
    onFieldFill?.({ phase: 'done', table, columns, ...done });
  }

  /** This connection changed the schema: what it knew of the field columns may be wrong. */
  schemaChanged(): void {
    this.#schemaChanges++;
    forgetFieldColumns(this.db);
  }

  /**
   * A read that names `table`'s field columns, array indexes' side tables and indexes as the
   * reader saw them lately (committed ones only); `absent` when the table does not exist. A
   * column, side table or index that has gone since (the table was dropped and made again
   * elsewhere, an index redefined) makes it look at the schema again, once.
   */
  readColumns<R>(table: string, fn: (columns: FieldColumns, arrays: ArrayIndexes, indexes: IndexLayout[]) => R, absent: R): R {
    const run = () => {
      try {
        const { columns, arrays, indexes } = readLayoutOf(this.connections.reader, table);
        return fn(columns, arrays, indexes);
      } catch (err) {
        if (isNoSuchTable(err) && !isNoSuchSideTable(err, table)) return absent;
        throw err;
      }
    };
    try {
      return run();
    } catch (err) {
      if (!isNoSuchFieldColumn(err) && !isNoSuchSideTable(err, table) && !isNoSuchIndex(err)) throw err;
      forgetFieldColumns(this.connections.reader);
      return run();
    }
  }

  readStatement(sql: string): StatementSync {
    return this.#prepared(this.#readStatements, this.connections.reader, sql);
  }

  #prepared(cache: Map<string, StatementSync>, db: DatabaseSync, sql: string): StatementSync {
    if (this.#closed) throw new Error('document store is closed');
    let stmt = cache.get(sql);
    if (!stmt) {
      stmt = db.prepare(sql);
      // Query shapes vary with the where clause; bound the cache rather than grow forever.
      if (cache.size >= STATEMENT_CACHE_LIMIT) cache.clear();
      cache.set(sql, stmt);
    }
    return stmt;
  }

  /**
   * Runs `fn` as one all-or-nothing write in the writer's group commit; settles once durable.
   * `refused` tells a result that is a refusal (a version that did not match, nothing to
   * delete), which settles only once durable even in a deferred-durability scope.
   */
  commit<R>(fn: () => R, bytes = 0, refused?: (result: R) => boolean): Promise<R> {
    if (this.#closed) return Promise.reject(new Error('document store is closed'));
    return this.connections.commits.run(() => {
      const changes = this.#schemaChanges;
      try {
        return fn();
      } catch (err) {
        // Its savepoint is rolled back, the columns it added too: the batch's next writes
        // must not go by what it saw.
        if (this.#schemaChanges !== changes) this.schemaChanged();
        throw err;
      }
    }, bytes, refused);
  }

  /** commit() for `fn` that changes the database with one statement (and maybe its table's creation, which may stay). */
  commitStatement<R>(fn: () => R, bytes = 0, refused?: (result: R) => boolean): Promise<R> {
    if (this.#closed) return Promise.reject(new Error('document store is closed'));
    return this.connections.commits.runStatement(fn, bytes, refused);
  }

  ensureTable(table: string): void {
    if (this.#existing.has(table)) return;
    this.statement(`CREATE TABLE IF NOT EXISTS ${quoteIdent(table)} (id TEXT PRIMARY KEY NOT NULL, v INTEGER NOT NULL, doc TEXT NOT NULL)`).run();
    this.schemaChanged();
    this.#existing.add(table);
  }

  forget(table: string): void {
    this.#existing.delete(table);
  }

  remember(table: string): void {
    this.#existing.add(table);
  }

  /** Runs a write; another connection may have dropped or renamed the table since we last looked. */
  write<R>(table: string, fn: () => R): R {
    this.ensureTable(table);
    try {
      return fn();
    } catch (err) {
      if (!isNoSuchTable(err)) throw err;
      this.forget(table);
      this.ensureTable(table);
      return fn();
    }
  }

  read<R>(fn: () => R, absent: R): R {
    try {
      return fn();
    } catch (err) {
      if (isNoSuchTable(err)) return absent;
      throw err;
    }
  }

  /** Maps a SQLite unique violation to the port's error, naming the index as the caller did. */
  duplicateKey(collection: string, table: string, err: Error): DuplicateKeyError {
    const named = /UNIQUE constraint failed: index '(.*)'$/.exec(err.message);
    if (named) {
      const prefix = table + INDEX_SEPARATOR;
      return new DuplicateKeyError(collection, named[1].startsWith(prefix) ? named[1].slice(prefix.length) : named[1]);
    }
    const columns = /UNIQUE constraint failed: (.*)$/.exec(err.message)?.[1]
      .split(', ')
      .map((c) => c.slice(c.lastIndexOf('.') + 1)) ?? [];
    if (columns.length === 1 && columns[0] === 'id') return new DuplicateKeyError(collection, '_id');
    // A unique index on plain columns only (e.g. ['_id', '_v']): find it by its columns.
    for (const index of this.db.prepare(`PRAGMA index_list(${quoteIdent(table)})`).all() as Array<{ name: string; unique: number; origin: string }>) {
      if (!index.unique || index.origin !== 'c') continue;
      const indexed = (this.db.prepare(`PRAGMA index_info(${quoteIdent(index.name)})`).all() as Array<{ name: string }>).map((c) => c.name);
      if (indexed.join(',') === columns.join(',')) return this.duplicateKey(collection, table, new Error(`UNIQUE constraint failed: index '${index.name}'`));
    }
    return new DuplicateKeyError(collection, columns.join(','));
  }
}

interface ColumnWrites {
  insert: string;
  /** The indexed fields, in the order of the columns `compare` tells about (s0, s1, …). */
  fields: string[];
  /** Finds the document at the expected version and tells, per column, whether the new document leaves it as it is; null without columns. */
  compare: string | null;
  /** The update setting the columns of these fields (a subset of `fields`, in their order). */
  update(changed: string[]): string;
}

/** The rows of a tail, then of the tails that follow it (Tail.then) while the limit is not reached. */
function readTails<R>(tail: Tail, limit: number | undefined, read: (tail: Tail) => R[]): R[] {
  const rows = read(tail);
  for (let next = tail.then; next && (limit === undefined || rows.length < limit); next = next.then) {
    const more = read(next);
    rows.push(...(limit === undefined ? more : more.slice(0, limit - rows.length)));
  }
  return rows;
}

function columnWrites(table: string, columns: FieldColumns, plainInsert: string): ColumnWrites {
  const fields = [...columns.keys()];
  if (fields.length === 0) return { insert: plainInsert, fields, compare: null, update: () => { throw new Error('no field columns'); } };
  const extract = (field: string, doc = '?1') => `json_extract(${doc}, ${fieldSql(field).path})`;
  const updates = new Map<string, string>();
  return {
    // The arguments of the plain statements, in their order: the insert's (id, document,
    // version), the updates' (document, id, version).
    insert: `INSERT INTO ${table} (id, v, doc, ${fields.map((f) => columns.get(f)).join(', ')}) VALUES (?1, ?3, ?2, ${fields.map((f) => extract(f, '?2')).join(', ')})`,
    fields,
    compare: `SELECT ${fields.map((f, i) => `${columns.get(f)} IS ${extract(f)} AS s${i}`).join(', ')} FROM ${table} WHERE id = ?2 AND v = ?3`,
    update(changed) {
      const key = changed.join('\u0000');
      let sql = updates.get(key);
      if (sql === undefined) {
        sql = `UPDATE ${table} SET v = v + 1, doc = ?1${changed.map((f) => `, ${columns.get(f)} = ${extract(f)}`).join('')} WHERE id = ?2 AND v = ?3 RETURNING v`;
        updates.set(key, sql);
      }
      return sql;
    },
  };
}

class SqliteCollection<T extends { _id: string }> implements Collection<T> {
  readonly #engine: Engine;
  readonly #name: string;
  readonly #table: string;
  readonly #quoted: string;
  /** The fixed statements' text, made once: the statement cache hashes it on every call. */
  readonly #sql: { get: string; insert: string; replace: string; delete: string; deleteVersion: string };
  /** The writes' text for a set of field columns (made once per set, as #sql). */
  readonly #columnSql = new WeakMap<FieldColumns, ColumnWrites>();

  constructor(engine: Engine, name: string) {
    this.#engine = engine;
    this.#name = name;
    this.#table = tableName(name);
    const quoted = this.#quoted = quoteIdent(this.#table);
    this.#sql = {
      get: `SELECT id, v, doc FROM ${quoted} WHERE id = ?`,
      insert: `INSERT INTO ${quoted} (id, v, doc) VALUES (?1, ?3, ?2)`,
      replace: `UPDATE ${quoted} SET v = v + 1, doc = ? WHERE id = ? AND v = ? RETURNING v`,
      delete: `DELETE FROM ${quoted} WHERE id = ?`,
      deleteVersion: `DELETE FROM ${quoted} WHERE id = ? AND v = ?`,
    };
  }

  async get(id: string): Promise<Stored<T> | null> {
    const row = this.#engine.read(() => this.#engine.readStatement(this.#sql.get).get(id) as Row | undefined, undefined);
    return row ? fromRow<T>(row) : null;
  }

  async insert(doc: T, options?: InsertOptions): Promise<Stored<T>> {
    const version = insertVersion(options);
    const { id, json } = toRow(doc);
    await this.#uniqueWrite(() => this.#engine.statement(this.#writes().insert).run(id, json, version), json.length);
    return fromRow<T>({ id, v: version, doc: json });
  }

  async replace(doc: T, expectedVersion: number): Promise<Stored<T> | null> {
    const { id, json } = toRow(doc);
    const row = await this.#uniqueWrite(() => {
      const writes = this.#writes();
      if (writes.compare === null) return this.#engine.statement(this.#sql.replace).get(json, id, expectedVersion) as { v: number } | undefined;
      // Which indexed fields the new version changes, told by SQLite's own json_extract: the
      // update sets those columns only, so the other fields' indexes are not touched.
      const same = this.#engine.statement(writes.compare).get(json, id, expectedVersion) as Record<string, number> | undefined;
      if (same === undefined) return undefined;
      return this.#engine.statement(writes.update(writes.fields.filter((_, i) => same[`s${i}`] !== 1))).get(json, id, expectedVersion) as { v: number } | undefined;
    }, json.length, (found) => found === undefined);
    return row ? fromRow<T>({ id, v: row.v, doc: json }) : null;
  }

  /** The write statements for the table's field columns as the writer sees them now: inside a write only. */
  #writes(): ColumnWrites {
    const columns = this.#engine.writeColumns(this.#table);
    let writes = this.#columnSql.get(columns);
    if (!writes) {
      writes = columnWrites(this.#quoted, columns, this.#sql.insert);
      this.#columnSql.set(columns, writes);
    }
    return writes;
  }

  async delete(id: string, expectedVersion?: number): Promise<boolean> {
    const engine = this.#engine;
    const result = await engine.commitStatement(() => engine.read(() => expectedVersion === undefined
      ? engine.statement(this.#sql.delete).run(id)
      : engine.statement(this.#sql.deleteVersion).run(id, expectedVersion), { changes: 0, lastInsertRowid: 0 }), 0, (done) => Number(done.changes) === 0);
    return Number(result.changes) > 0;
  }

  find<K extends keyof T & string>(options: FindOptions & { fields: readonly K[] }): Promise<Array<Stored<Pick<T, K>>>>;
  find(options?: FindOptions): Promise<Array<Stored<T>>>;
  async find(options: FindOptions = {}): Promise<Array<Stored<T>>> {
    const engine = this.#engine;
    const tailOf = (columns: FieldColumns, arrays: ArrayIndexes, indexes: IndexLayout[]) =>
      findTail(options, columns, arrays, this.#access(options.where, columns, arrays, indexes));
    if (options.fields !== undefined) {
      const fields = projectedFields(options.fields);
      return engine.readColumns(this.#table, (...layout) => readTails(tailOf(...layout), options.limit, (tail) => this.#findFields(fields, tail)), []);
    }
    const rows = engine.readColumns(this.#table, (...layout) => readTails(tailOf(...layout), options.limit, (tail) =>
      engine.readStatement(`SELECT id, v, doc FROM ${fromSql(this.#quoted, tail)}${tail.sql}`).all(...tail.params) as unknown as Row[]), []);
    return rows.map((row) => fromRow<T>(row));
  }

  /**
   * The index to read a find by, when its filter's equalities leave SQLite a choice it would
   * make blind: the one whose probe counts fewest entries (./document-query.ts, indexProbes).
   * Each probe reads at most PROBE_ROWS index entries, and a probe that counts none ends them.
   */
  #access(where: Where | undefined, columns: FieldColumns, arrays: ArrayIndexes, indexes: IndexLayout[]): Access | undefined {
    const probes = indexProbes(where, this.#quoted, columns, arrays, indexes);
    if (probes.length === 0) return undefined;
    const counts: number[] = [];
    for (const probe of probes) {
      const n = Number((this.#engine.readStatement(probe.sql).get(...probe.params) as { n: number }).n);
      counts.push(n);
      if (n === 0) break;
    }
    return chooseAccess(probes.slice(0, counts.length), counts);
  }

  /**
   * One column per field, `->` so values keep their JSON types (json_extract would make
   * objects text and booleans 0/1): JSON text, or SQL NULL for a field the document lacks,
   * which the result leaves out (a JSON null is the text 'null'). The big document is never
   * handed to JavaScript.
   */
  #findFields(fields: string[], tail: Tail): Array<Stored<T>> {
    const columns = fields.map((field, i) => `, doc -> ${fieldSql(field).path} AS f${i}`).join('');
    const rows = this.#engine.readStatement(`SELECT id, v${columns} FROM ${fromSql(this.#quoted, tail)}${tail.sql}`).all(...tail.params) as unknown as Array<Record<string, string | number | null>>;
    return rows.map((row) => {
      const entries: Array<[string, unknown]> = [['_id', row.id]];
      fields.forEach((field, i) => {
        const json = row[`f${i}`];
        if (json !== null) entries.push([field, JSON.parse(json as string)]);
      });
      entries.push(['_v', Number(row.v)]);
      // fromEntries defines own properties, as JSON.parse does, even for a field named __proto__.
      return Object.fromEntries(entries) as unknown as Stored<T>;
    });
  }

  async count(where?: Where): Promise<number> {
    const row = this.#engine.readColumns(this.#table, (columns, arrays) => {
      const filter = whereSql(where, columns, arrays);
      return this.#engine.readStatement(`SELECT count(*) AS n FROM ${fromSql(this.#quoted, filter)}${filter.sql}`).get(...filter.params) as { n: number };
    }, { n: 0 });
    return Number(row.n);
  }

  async ensureIndexes(indexes: IndexSpec[]): Promise<void> {
    for (const spec of indexes) checkArrayField(spec);
    const engine = this.#engine;
    await engine.prepare();
    // The indexes only once their columns are filled: in the transaction that finds no marker.
    let created = await engine.commit(() => {
      engine.forget(this.#table);
      engine.ensureTable(this.#table);
      const present = engine.writeColumns(this.#table);
      const empty = engine.statement(`SELECT 1 FROM ${this.#quoted} LIMIT 1`).get() === undefined;
      for (const field of new Set(indexes.flatMap((spec) => spec.fields.map(([f]) => f)))) {
        if (fieldSql(field).path === undefined || present.has(field)) continue;
        // Every write fills it from now on; the documents already there, engine.fill below.
        engine.db.exec(`ALTER TABLE ${this.#quoted} ADD COLUMN ${quoteIdent(FIELD_COLUMN_PREFIX + field)}`);
        if (!empty) markFill(engine.db, this.#table, FIELD_COLUMN_PREFIX + field);
        engine.schemaChanged();
      }
      return this.#createIndexesIfFilled(indexes);
    });
    while (!created) {
      await engine.fill(this.#table);
      created = await engine.commit(() => this.#createIndexesIfFilled(indexes));
    }
  }

  #createIndexesIfFilled(indexes: IndexSpec[]): boolean {
    if (columnsFilling(this.#engine.db, this.#table).length > 0) return false;
    this.#createIndexes(indexes);
    return true;
  }

  /** Inside the writer's transaction, once every field column of the table is filled. */
  #createIndexes(indexes: IndexSpec[]): void {
    const engine = this.#engine;
    const fieldColumns = engine.writeColumns(this.#table);
    for (const spec of indexes) {
      if (spec.fields.length === 0) throw new Error(`index ${spec.name} has no fields`);
      const name = indexName(this.#table, spec.name);
      if (spec.arrayField !== undefined) {
        if (ensureArrayIndex(engine.db, this.#table, name, spec, fieldColumns)) engine.schemaChanged();
        continue;
      }
      // An array index under the name: the caller's current definition wins.
      if (sideTablesOf(engine.db, this.#table).includes(sideTableName(name))) {
        dropArrayIndex(engine.db, sideTableName(name));
        engine.schemaChanged();
      }
      const columns = spec.fields.map(([field, direction]) => `${fieldColumns.get(field) ?? fieldSql(field).value}${direction === 'desc' ? ' DESC' : ''}`).join(', ');
      const sql = `CREATE ${spec.unique ? 'UNIQUE ' : ''}INDEX ${quoteIdent(name)} ON ${this.#quoted} (${columns})`;
      const existing = engine.db.prepare(`SELECT sql, tbl_name FROM sqlite_master WHERE type = 'index' AND name = ?`).get(name) as { sql: string; tbl_name: string } | undefined;
      if (existing?.sql === sql) continue;
      if (existing && existing.tbl_name !== this.#table) throw new Error(`index name ${name} is taken by table ${existing.tbl_name}`);
      // Same name, other definition: the caller's current definition wins.
      if (existing) engine.db.exec(`DROP INDEX ${quoteIdent(name)}`);
      try {
        engine.db.exec(sql);
      } catch (err) {
        if (isUniqueViolation(err)) throw new DuplicateKeyError(this.#name, spec.name);
        throw err;
      }
    }
  }

  /** `fn` changes the table with one statement. */
  #uniqueWrite<R>(fn: () => R, bytes: number, refused?: (result: R) => boolean): Promise<R> {
    return this.#engine.commitStatement(() => {
      try {
        return this.#engine.write(this.#table, fn);
      } catch (err) {
        if (isUniqueViolation(err)) throw this.#engine.duplicateKey(this.#name, this.#table, err);
        throw err;
      }
    }, bytes, refused);
  }

  /** One write in the group commit; each insert succeeds or is refused on its own statement. */
  async insertMany(docs: T[], options?: InsertOptions): Promise<{ duplicates: string[] }> {
    const version = insertVersion(options);
    if (docs.length === 0) return { duplicates: [] };
    const rows = docs.map(toRow);
    const bytes = rows.reduce((sum, row) => sum + row.json.length, 0);
    const engine = this.#engine;
    return engine.commit(() => engine.write(this.#table, () => {
      const insert = engine.statement(this.#writes().insert);
      const duplicates: string[] = [];
      for (const row of rows) {
        try {
          insert.run(row.id, row.json, version);
        } catch (err) {
          if (!isUniqueViolation(err)) throw err;
          duplicates.push(row.id);
        }
      }
      return { duplicates };
    }), bytes);
  }

  /**
   * In batches of DELETE_BATCH rows, each a write of its own with a turn of the event loop between
   * them: one statement over every match (200,000 expired webhook deliveries after 30 days) held
   * the event loop and the file's write lock for seconds. The port promises no atomicity here.
   */
  async deleteWhere(where: Where): Promise<number> {
    const engine = this.#engine;
    let deleted = 0;
    for (;;) {
      const result = await engine.commitStatement(() => engine.read(() => {
        const filter = whereSql(where, engine.filterColumns(this.#table));
        return engine.statement(`DELETE FROM ${this.#quoted} WHERE rowid IN (SELECT rowid FROM ${this.#quoted}${filter.sql} LIMIT ${DELETE_BATCH})`).run(...filter.params);
      }, { changes: 0, lastInsertRowid: 0 }));
      const changes = Number(result.changes);
      deleted += changes;
      if (changes < DELETE_BATCH) return deleted;
      await setImmediate();
    }
  }
}

export class SqliteDocumentStore implements DocumentStore {
  readonly #engine: Engine;

  /** Opens `source` as a file path, or shares an open connection (which the caller keeps and closes). */
  constructor(source: string | DatabaseSync, options: DocumentStoreOptions = {}) {
    this.#engine = new Engine(connect(source, options), { abandon: options.abandon, onFieldFill: options.onFieldFill });
  }

  /** Collections hold no state of their own, so one per name serves every caller. */
  readonly #collections = new Map<string, SqliteCollection<{ _id: string }>>();

  collection<T extends { _id: string }>(name: string): Collection<T> {
    let collection = this.#collections.get(name);
    if (!collection) {
      collection = new SqliteCollection(this.#engine, name);
      // Scratch collections (rebuilds) add names; a bound keeps a long life from growing it.
      if (this.#collections.size >= COLLECTION_CACHE_LIMIT) this.#collections.clear();
      this.#collections.set(name, collection);
    }
    return collection as unknown as Collection<T>;
  }

  async drop(name: string): Promise<void> {
    const table = tableName(name);
    await this.#engine.commit(() => {
      for (const side of sideTablesOf(this.#engine.db, table)) dropArrayIndex(this.#engine.db, side);
      dropFillMarkers(this.#engine.db, table);
      this.#engine.statement(`DROP TABLE IF EXISTS ${quoteIdent(table)}`).run();
      this.#engine.schemaChanged();
    });
    this.#engine.forget(table);
  }

  async rename(from: string, to: string): Promise<void> {
    if (from === to) return;
    const source = tableName(from);
    const target = tableName(to);
    const engine = this.#engine;
    await engine.commit(() => {
      const found = engine.db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(source);
      if (!found) throw new Error(`cannot rename collection ${from}: it does not exist`);
      for (const side of sideTablesOf(engine.db, target)) dropArrayIndex(engine.db, side);
      dropFillMarkers(engine.db, target);
      engine.db.exec(`DROP TABLE IF EXISTS ${quoteIdent(target)}`);
      engine.db.exec(`ALTER TABLE ${quoteIdent(source)} RENAME TO ${quoteIdent(target)}`);
      renameFillMarkers(engine.db, source, target);
      engine.schemaChanged();
      // Index names carry the table name (SQLite has one index namespace per database), so
      // rebuild them under the new name; ALTER TABLE already rewrote their ON clause.
      const indexes = engine.db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL`).all(target) as Array<{ name: string; sql: string }>;
      const oldPrefix = source + INDEX_SEPARATOR;
      for (const index of indexes) {
        if (!index.name.startsWith(oldPrefix)) continue;
        const renamed = indexName(target, index.name.slice(oldPrefix.length));
        engine.db.exec(`DROP INDEX ${quoteIdent(index.name)}`);
        engine.db.exec(index.sql.replace(quoteIdent(index.name), quoteIdent(renamed)));
      }
      renameArrayIndexes(engine.db, target, oldPrefix, target + INDEX_SEPARATOR);
    });
    engine.forget(source);
    engine.remember(target);
  }

  async exists(name: string): Promise<boolean> {
    const found = this.#engine.readStatement(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`).get(tableName(name));
    return found !== undefined;
  }

  /** True when the file can be read and takes writes (see SqliteEventStore.ping). */
  async ping(): Promise<boolean> {
    if (this.#engine.closed || !(await this.#engine.connections.commits.writable())) return false;
    try {
      return (this.#engine.readStatement('SELECT 1 AS ok').get() as { ok: number }).ok === 1;
    } catch {
      return false;
    }
  }

  writeFailure(): string | null {
    return this.#engine.connections.commits.writeFailure?.message ?? null;
  }

  /**
   * Makes documents deleted so far unrecoverable from this store's files (crypto-shredding,
   * apps/services/content-vault.ts): deletions are already zeroed in place (secure_delete);
   * this empties the WAL, which still holds the pages as they were before. While another
   * connection keeps the WAL in use it tries again on a timer, for PURGE_RETRY.forMs at most
   * (a reader's snapshot under load ends within that; a backup's or an export's does not),
   * never waiting on the event loop. False when it could not: call again later.
   */
  async purgeDeleted(): Promise<boolean> {
    if (this.#engine.closed) throw new Error('document store is closed');
    const deadline = Date.now() + PURGE_RETRY.forMs;
    for (let delay = PURGE_RETRY.firstMs; !this.#engine.closed; delay = Math.min(delay * 2, PURGE_RETRY.maxMs)) {
      // The checkpoint cannot run inside a transaction: commit what is pending first.
      await this.#engine.connections.commits.flush();
      if (!this.#engine.db.isTransaction && truncateWal(this.#engine.db)) return true;
      if (Date.now() + delay > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
    return false;
  }

  async close(): Promise<void> {
    if (this.#engine.closed) return;
    this.#engine.markClosed();
    await this.#engine.connections.release();
  }
}
