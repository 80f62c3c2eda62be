// The columns of a document table's indexed fields (./document-store.ts): a field that an index
// names is kept in a column of its own, json_extract(doc, path), written by every insert and
// by the updates that change it. An index on columns lets an update that leaves the indexed
// fields alone leave the index alone too; an index on expressions of `doc` is rewritten by
// every update of the document (an email view update cost 3.5 times as much with six of them).
//
// Every writer must fill every column, so what a writing connection knows of a table's columns
// is checked against the schema's version once per batch of its group commit (the batch holds
// the write lock, so no other connection can change the schema until it ends; this
// connection's own schema changes say so, forgetFieldColumns). A read may go by an older look,
// taken at most READ_RECHECK_MS ago: a column it does not know of is read as the json_extract
// it holds, the same value, only without the index; one it knows of that is gone (the table
// dropped and made again elsewhere) fails with "no such column" and the read looks again
// (./document-store.ts). A look costs a statement, and most reads would pay it for nothing.
// The side tables of a table's array indexes (./array-indexes.ts) are looked at likewise, by
// reads only (triggers fill them): one unknown yet leaves a `contains` to read the documents'
// arrays, the same answer without the index; one gone makes the read look again. So are the
// indexes of a table and of its side tables (their columns, in order), which a read with filters
// that several indexes serve probes to steer the planner to the narrowest (./document-query.ts,
// indexProbes); one gone since makes the read look again.
//
// A column whose fill from the documents is not finished (./field-fills.ts) has a marker, a view
// named fillMarkerName(table, column): writes fill it as any other, but filters (reads, and a
// delete's where) leave it out and read json_extract(doc, path) instead, so that a half-filled
// column never hides a document. A view because it is schema: making and dropping it changes the
// schema's version, which renews every connection's look, and a look reads the markers after
// the columns, so it never takes a column that was being filled for a finished one.
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { ARRAY_INDEX_COLUMNS_SQL, arrayIndexesFrom } from './array-indexes.ts';
import { quoteIdent, SIDE_REF, type ArrayIndexes, type FieldColumns, type IndexLayout } from './document-query.ts';

/** A column named `field:<path>` holds json_extract(doc, <path>). */
export const FIELD_COLUMN_PREFIX = 'field:';

const TABLES_LIMIT = 1_000;
/** How long a read goes by what its connection last saw of the schema. */
export const READ_RECHECK_MS = 1_000;

const FILL_MARKER_PREFIX = 'fill:';

/** The plain indexes a table's columns make (not a primary key's, not partial ones), with their columns in order. */
const INDEX_COLUMNS_SQL = `SELECT l.name AS "index", i.name AS "column" FROM pragma_index_list(?1) AS l JOIN pragma_index_info(l.name) AS i
  WHERE l.origin = 'c' AND l.partial = 0 ORDER BY l.name, i.seqno`;

/** A column of an index as the reads name it: id and a side table's ref bare, the others quoted; null for an expression. */
function indexColumnSql(name: string | null): string | null {
  if (name === null) return null;
  return name === 'id' || name === SIDE_REF ? name : quoteIdent(name);
}

/** The marker of `column` of `table` while it is being filled: JSON, so that no table's name can be taken for another's. */
export function fillMarkerName(table: string, column: string): string {
  return FILL_MARKER_PREFIX + JSON.stringify([table, column]);
}

/** Every fill marker (views named by fillMarkerName). */
export const FILL_MARKERS_SQL = `SELECT name FROM sqlite_master WHERE type = 'view' AND substr(name, 1, ${FILL_MARKER_PREFIX.length}) = '${FILL_MARKER_PREFIX}'`;

/** The columns being filled, by table, from FILL_MARKERS_SQL's rows. */
export function fillsFrom(rows: Array<{ name: string }>): Map<string, string[]> {
  const fills = new Map<string, string[]>();
  for (const { name } of rows) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(name.slice(FILL_MARKER_PREFIX.length));
    } catch {
      continue;
    }
    if (!Array.isArray(parsed) || parsed.length !== 2 || typeof parsed[0] !== 'string' || typeof parsed[1] !== 'string') continue;
    fills.set(parsed[0], [...(fills.get(parsed[0]) ?? []), parsed[1]]);
  }
  return fills;
}

interface TableColumns {
  /** Every field column: what a write fills. */
  all: FieldColumns;
  /** Those a filter may use: `all` but the columns being filled (the same map when none is). */
  filled: FieldColumns;
}

class ConnectionColumns {
  readonly #version: StatementSync;
  readonly #tableInfo: StatementSync;
  readonly #arrayIndexInfo: StatementSync;
  readonly #fillMarkers: StatementSync;
  readonly #indexColumns: StatementSync;
  #seenVersion = -1;
  /** The write batch whose start was checked: a write of the same batch needs no check. */
  #checkedBatch = -1;
  /** When (performance.now()) a read checks the schema's version again. */
  #readCheckAfter = 0;
  readonly #tables = new Map<string, TableColumns>();
  readonly #arrays = new Map<string, ArrayIndexes>();
  readonly #indexes = new Map<string, IndexLayout[]>();

  constructor(db: DatabaseSync) {
    this.#version = db.prepare('PRAGMA schema_version');
    this.#tableInfo = db.prepare('SELECT name FROM pragma_table_info(?)');
    this.#arrayIndexInfo = db.prepare(ARRAY_INDEX_COLUMNS_SQL);
    this.#fillMarkers = db.prepare(FILL_MARKERS_SQL);
    this.#indexColumns = db.prepare(INDEX_COLUMNS_SQL);
  }

  of(table: string, batch: number | undefined): TableColumns {
    if (batch === undefined ? performance.now() >= this.#readCheckAfter : batch !== this.#checkedBatch) {
      const version = Number((this.#version.get() as { schema_version: number }).schema_version);
      if (version !== this.#seenVersion || this.#tables.size >= TABLES_LIMIT || this.#arrays.size >= TABLES_LIMIT) {
        this.#tables.clear();
        this.#arrays.clear();
        this.#indexes.clear();
        this.#seenVersion = version;
      }
      this.#checkedBatch = batch ?? -1;
      this.#readCheckAfter = performance.now() + READ_RECHECK_MS;
    }
    let columns = this.#tables.get(table);
    if (!columns) {
      const all = new Map<string, string>();
      for (const { name } of this.#tableInfo.all(table) as Array<{ name: string }>) {
        if (name.startsWith(FIELD_COLUMN_PREFIX)) all.set(name.slice(FIELD_COLUMN_PREFIX.length), quoteIdent(name));
      }
      // After the columns: a column seen there whose marker is gone by now is filled.
      const filling = all.size === 0 ? undefined : fillsFrom(this.#fillMarkers.all() as Array<{ name: string }>).get(table);
      let filled: FieldColumns = all;
      if (filling !== undefined) {
        const left = new Map(all);
        for (const column of filling) if (column.startsWith(FIELD_COLUMN_PREFIX)) left.delete(column.slice(FIELD_COLUMN_PREFIX.length));
        filled = left;
      }
      columns = { all, filled };
      this.#tables.set(table, columns);
    }
    return columns;
  }

  /** Call right after of(table) for a read, which checked the schema's version. */
  arraysOf(table: string): ArrayIndexes {
    let arrays = this.#arrays.get(table);
    if (!arrays) {
      arrays = arrayIndexesFrom(this.#arrayIndexInfo.all(table) as Array<{ side: string; column: string }>);
      this.#arrays.set(table, arrays);
    }
    return arrays;
  }

  /** Call right after arraysOf(table): the indexes of the table and of its side tables. */
  indexesOf(table: string, arrays: ArrayIndexes): IndexLayout[] {
    let indexes = this.#indexes.get(table);
    if (!indexes) {
      indexes = [];
      const quoted = quoteIdent(table);
      const sides = [...arrays.values()].map((index) => index.table);
      for (const owner of [quoted, ...sides]) {
        // The unquoted name back from its quoted form (quoteIdent doubles quotes).
        const name = owner.slice(1, -1).replaceAll('""', '"');
        const byIndex = new Map<string, Array<string | null>>();
        for (const row of this.#indexColumns.all(name) as Array<{ index: string; column: string | null }>) {
          byIndex.set(row.index, [...(byIndex.get(row.index) ?? []), indexColumnSql(row.column)]);
        }
        for (const [index, columns] of byIndex) indexes.push({ table: owner, name: quoteIdent(index), columns });
      }
      this.#indexes.set(table, indexes);
    }
    return indexes;
  }

  forget(): void {
    this.#tables.clear();
    this.#arrays.clear();
    this.#indexes.clear();
    this.#seenVersion = -1;
    this.#checkedBatch = -1;
    this.#readCheckAfter = 0;
  }
}

const byConnection = new WeakMap<DatabaseSync, ConnectionColumns>();

function connectionColumns(db: DatabaseSync): ConnectionColumns {
  let columns = byConnection.get(db);
  if (!columns) {
    columns = new ConnectionColumns(db);
    byConnection.set(db, columns);
  }
  return columns;
}

/**
 * The indexed fields' columns of `table` as `db` sees them now (its own uncommitted changes
 * included); for a read (no `batch`), as it saw them within READ_RECHECK_MS. `batch`: the
 * number of the write batch the caller writes in (GroupCommit.batch), for a write. A returned map stays the same object until the schema changes, so callers may
 * key what they derive from it (statement text) on it.
 */
export function fieldColumnsOf(db: DatabaseSync, table: string, batch?: number): FieldColumns {
  return connectionColumns(db).of(table, batch).all;
}

/** fieldColumnsOf for a filter: without the columns being filled. */
export function filterColumnsOf(db: DatabaseSync, table: string, batch?: number): FieldColumns {
  return connectionColumns(db).of(table, batch).filled;
}

/**
 * For a read: the field columns of `table` a filter may use, as filterColumnsOf gives them, its
 * array indexes' side tables, and the indexes of the table and of those.
 */
export function readLayoutOf(db: DatabaseSync, table: string): { columns: FieldColumns; arrays: ArrayIndexes; indexes: IndexLayout[] } {
  const connection = connectionColumns(db);
  const columns = connection.of(table, undefined).filled;
  const arrays = connection.arraysOf(table);
  return { columns, arrays, indexes: connection.indexesOf(table, arrays) };
}

/** After a schema change made on `db` (a table created, dropped, renamed; a column added), or a read that found a column gone. */
export function forgetFieldColumns(db: DatabaseSync): void {
  byConnection.get(db)?.forget();
}
