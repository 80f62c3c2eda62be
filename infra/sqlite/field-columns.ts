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
// arrays, the same answer without the index; one gone makes the read look again.
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { ARRAY_INDEX_COLUMNS_SQL, arrayIndexesFrom } from './array-indexes.ts';
import { quoteIdent, type ArrayIndexes, type FieldColumns } from './document-query.ts';

/** A column named `field:<path>` holds json_extract(doc, <path>). */
export const FIELD_COLUMN_PREFIX = 'field:';

const TABLES_LIMIT = 1_000;
/** How long a read goes by what its connection last saw of the schema. */
export const READ_RECHECK_MS = 1_000;

class ConnectionColumns {
  readonly #version: StatementSync;
  readonly #tableInfo: StatementSync;
  readonly #arrayIndexInfo: StatementSync;
  #seenVersion = -1;
  /** The write batch whose start was checked: a write of the same batch needs no check. */
  #checkedBatch = -1;
  /** When (performance.now()) a read checks the schema's version again. */
  #readCheckAfter = 0;
  readonly #tables = new Map<string, FieldColumns>();
  readonly #arrays = new Map<string, ArrayIndexes>();

  constructor(db: DatabaseSync) {
    this.#version = db.prepare('PRAGMA schema_version');
    this.#tableInfo = db.prepare('SELECT name FROM pragma_table_info(?)');
    this.#arrayIndexInfo = db.prepare(ARRAY_INDEX_COLUMNS_SQL);
  }

  of(table: string, batch: number | undefined): FieldColumns {
    if (batch === undefined ? performance.now() >= this.#readCheckAfter : batch !== this.#checkedBatch) {
      const version = Number((this.#version.get() as { schema_version: number }).schema_version);
      if (version !== this.#seenVersion || this.#tables.size >= TABLES_LIMIT || this.#arrays.size >= TABLES_LIMIT) {
        this.#tables.clear();
        this.#arrays.clear();
        this.#seenVersion = version;
      }
      this.#checkedBatch = batch ?? -1;
      this.#readCheckAfter = performance.now() + READ_RECHECK_MS;
    }
    let columns = this.#tables.get(table);
    if (!columns) {
      const found = new Map<string, string>();
      for (const { name } of this.#tableInfo.all(table) as Array<{ name: string }>) {
        if (name.startsWith(FIELD_COLUMN_PREFIX)) found.set(name.slice(FIELD_COLUMN_PREFIX.length), quoteIdent(name));
      }
      columns = found;
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

  forget(): void {
    this.#tables.clear();
    this.#arrays.clear();
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
  return connectionColumns(db).of(table, batch);
}

/** For a read: the field columns of `table`, as fieldColumnsOf gives them, and its array indexes' side tables. */
export function readLayoutOf(db: DatabaseSync, table: string): { columns: FieldColumns; arrays: ArrayIndexes } {
  const connection = connectionColumns(db);
  const columns = connection.of(table, undefined);
  return { columns, arrays: connection.arraysOf(table) };
}

/** After a schema change made on `db` (a table created, dropped, renamed; a column added), or a read that found a column gone. */
export function forgetFieldColumns(db: DatabaseSync): void {
  byConnection.get(db)?.forget();
}
