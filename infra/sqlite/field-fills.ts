// Filling a document table's field columns (./field-columns.ts) from its documents, and the
// storage format a file was last opened in (./document-store.ts, ensureIndexes).
//
// Batches: the first start after an upgrade that adds columns fills every row of every indexed
// table. As one statement per column that held the event loop for 26 s (200k emails, 400k webhook
// deliveries), with nothing logged, and a stop could not keep its deadline (its timer could not
// fire). So a fill goes in id order, FILL_BATCH_ROWS rows per transaction, each committed whole,
// with the event loop free between batches and the start's abort signal looked at before each.
// While a column is filled its marker (fillMarkerName) exists: made in the transaction that adds
// the column, dropped in the one that fills the last batch; reads leave marked columns out. A
// fill cut short (a stop, a crash: the batch under way is rolled back whole) leaves its marker,
// and the next ensureIndexes resumes it. A batch sets only the rows where a column IS NOT
// json_extract(doc, path), so what is filled already, and what writers filled meanwhile (every
// write fills every column), costs a read only.
//
// Builds before the columns (before 2026-11-28, 60bf5a0) write (id, v, doc) only. Started on a file
// a newer build wrote (a rollback), they leave its columns NULL on inserts and stale on updates,
// and put their json_extract expression indexes back. They cannot be changed, so what they leave
// is the evidence: any such index, or a file with field columns and no format stamp (last written
// by a build before the stamp, which may have been rolled back and upgraded since), marks every
// field column of every table to be filled again, and the legacy indexes are dropped.
// The stamp (DOCUMENT_FORMAT in relay_storage_format) is for the builds to come: a build refuses
// a file stamped with a format newer than its own, whose documents it may not read right.
import type { DatabaseSync } from 'node:sqlite';
import { fieldSql, quoteIdent } from './document-query.ts';
import { FIELD_COLUMN_PREFIX, FILL_MARKERS_SQL, fillMarkerName, fillsFrom } from './field-columns.ts';

/** The format this build writes: 1, field columns kept by every write, fill markers. */
export const DOCUMENT_FORMAT = 1;
/** Rows per transaction of a fill: about 50 ms of an email view's rows on a laptop. */
export const FILL_BATCH_ROWS = 2_000;

const FORMAT_TABLE = 'relay_storage_format';
const FORMAT_STORE = 'documents';

/** What a fill tells as it goes (SqliteDocumentStore's onFieldFill). */
export type FieldFillReport =
  /** A build that does not keep the columns has written here: every field column is filled again. */
  | { phase: 'repair'; format: number | null; legacyIndexes: string[]; tables: string[] }
  | { phase: 'start'; table: string; columns: string[]; rows: number }
  | { phase: 'batch'; table: string; columns: string[]; batch: number; scanned: number; updated: number }
  | { phase: 'done'; table: string; columns: string[]; batches: number; scanned: number; updated: number }
  /** Cut short by the abort signal: the batches done stay, the next ensureIndexes goes on. */
  | { phase: 'stopped'; table: string; columns: string[]; batches: number; scanned: number; updated: number };

/** The file was last written by a build of a newer storage format. */
export class NewerFormatError extends Error {
  readonly format: number;

  constructor(format: number) {
    super(`this document store was written by a newer version of Relay (storage format ${format}; this version reads format ${DOCUMENT_FORMAT} and older): `
      + 'run that version or a newer one, or restore the data directory from a backup taken before the upgrade (docs/operations.md, "Upgrading an embedded data directory")');
    this.name = 'NewerFormatError';
    this.format = format;
  }
}

const LEGACY_INDEXES_SQL = `SELECT name FROM sqlite_master
  WHERE type = 'index' AND substr(tbl_name, 1, 4) = 'doc_' AND sql LIKE '%json_extract(doc,%'`;
const FIELD_COLUMNS_SQL = `SELECT t.name AS tbl, c.name AS col FROM sqlite_master AS t JOIN pragma_table_info(t.name) AS c
  WHERE t.type = 'table' AND substr(t.name, 1, 4) = 'doc_' AND substr(c.name, 1, ${FIELD_COLUMN_PREFIX.length}) = '${FIELD_COLUMN_PREFIX}'`;

export interface FormatCheck {
  /** The stamp found; null for none. */
  format: number | null;
  /** The legacy expression indexes found, now dropped. */
  legacyIndexes: string[];
  /** The tables whose field columns were marked to be filled again. */
  marked: string[];
}

/**
 * Refuses a newer format; marks every field column to be filled again when a build that does not
 * keep them may have written since; stamps the file. Inside the writer's transaction; it changes
 * the schema.
 */
export function checkFormat(db: DatabaseSync): FormatCheck {
  db.exec(`CREATE TABLE IF NOT EXISTS ${FORMAT_TABLE} (store TEXT PRIMARY KEY NOT NULL, format INTEGER NOT NULL)`);
  const stamp = db.prepare(`SELECT format FROM ${FORMAT_TABLE} WHERE store = ?`).get(FORMAT_STORE) as { format: number } | undefined;
  const format = stamp === undefined ? null : Number(stamp.format);
  if (format !== null && format > DOCUMENT_FORMAT) throw new NewerFormatError(format);
  const legacyIndexes = (db.prepare(LEGACY_INDEXES_SQL).all() as Array<{ name: string }>).map((row) => row.name);
  const marked = new Set<string>();
  if (legacyIndexes.length > 0 || format === null) {
    for (const { tbl, col } of db.prepare(FIELD_COLUMNS_SQL).all() as Array<{ tbl: string; col: string }>) {
      markFill(db, tbl, col);
      marked.add(tbl);
    }
    for (const name of legacyIndexes) db.exec(`DROP INDEX ${quoteIdent(name)}`);
  }
  if (format !== DOCUMENT_FORMAT) {
    db.prepare(`INSERT INTO ${FORMAT_TABLE} (store, format) VALUES (?1, ?2) ON CONFLICT (store) DO UPDATE SET format = ?2`).run(FORMAT_STORE, DOCUMENT_FORMAT);
  }
  return { format, legacyIndexes, marked: [...marked] };
}

/** Marks `column` of `table` as being filled (a schema change). Inside the writer's transaction. */
export function markFill(db: DatabaseSync, table: string, column: string): void {
  db.exec(`CREATE VIEW IF NOT EXISTS ${quoteIdent(fillMarkerName(table, column))} AS SELECT 'marks a column being filled' AS why`);
}

/** The tables with a column being filled. */
export function tablesFilling(db: DatabaseSync): string[] {
  return [...fillsFrom(db.prepare(FILL_MARKERS_SQL).all() as Array<{ name: string }>).keys()];
}

/**
 * The columns of `table` being filled; a marker whose column or table is gone (dropped since) is
 * dropped. Inside the writer's transaction.
 */
export function columnsFilling(db: DatabaseSync, table: string): string[] {
  const marked = fillsFrom(db.prepare(FILL_MARKERS_SQL).all() as Array<{ name: string }>).get(table) ?? [];
  if (marked.length === 0) return [];
  const present = new Set((db.prepare('SELECT name FROM pragma_table_info(?)').all(table) as Array<{ name: string }>).map((row) => row.name));
  const columns: string[] = [];
  for (const column of marked) {
    if (present.has(column) && column.startsWith(FIELD_COLUMN_PREFIX) && fieldSql(column.slice(FIELD_COLUMN_PREFIX.length)).path !== undefined) columns.push(column);
    else dropFillMarker(db, table, column);
  }
  return columns;
}

function dropFillMarker(db: DatabaseSync, table: string, column: string): void {
  db.exec(`DROP VIEW IF EXISTS ${quoteIdent(fillMarkerName(table, column))}`);
}

/** Drops the markers of `table`'s columns (the table is dropped). Inside the writer's transaction. */
export function dropFillMarkers(db: DatabaseSync, table: string): void {
  for (const column of fillsFrom(db.prepare(FILL_MARKERS_SQL).all() as Array<{ name: string }>).get(table) ?? []) dropFillMarker(db, table, column);
}

/** Moves the markers of `from`'s columns to `to` (the table was renamed). Inside the writer's transaction. */
export function renameFillMarkers(db: DatabaseSync, from: string, to: string): void {
  for (const column of fillsFrom(db.prepare(FILL_MARKERS_SQL).all() as Array<{ name: string }>).get(from) ?? []) {
    dropFillMarker(db, from, column);
    markFill(db, to, column);
  }
}

export interface FillBatch {
  /** Rows looked at. */
  scanned: number;
  /** Rows whose columns were set. */
  updated: number;
  /** The last id of the batch, where the next one starts after; null once the table is done (the markers are dropped). */
  next: string | null;
}

/**
 * Fills `columns` of `table` (being filled, columnsFilling) in the FILL_BATCH_ROWS rows that follow
 * id `after` (from the first when null); the last batch drops their markers. Inside the writer's
 * transaction.
 */
export function fillBatch(db: DatabaseSync, table: string, columns: string[], after: string | null): FillBatch {
  const quoted = quoteIdent(table);
  const from = after === null ? [] : [after];
  // The batch's last id, and whether a row follows it: the last batch takes the rest.
  const ends = db.prepare(`SELECT id FROM ${quoted}${after === null ? '' : ' WHERE id > ?'} ORDER BY id LIMIT 2 OFFSET ${FILL_BATCH_ROWS - 1}`).all(...from) as Array<{ id: string }>;
  const end = ends.length === 2 ? ends[0] : undefined;
  const range = [...(after === null ? [] : ['id > ?']), ...(end === undefined ? [] : ['id <= ?'])];
  const params = [...from, ...(end === undefined ? [] : [end.id])];
  const value = (column: string) => `json_extract(doc, ${fieldSql(column.slice(FIELD_COLUMN_PREFIX.length)).path})`;
  const stale = columns.map((column) => `${quoteIdent(column)} IS NOT ${value(column)}`).join(' OR ');
  const set = columns.map((column) => `${quoteIdent(column)} = ${value(column)}`).join(', ');
  const updated = Number(db.prepare(`UPDATE ${quoted} SET ${set} WHERE ${[...range, `(${stale})`].join(' AND ')}`).run(...params).changes);
  if (end !== undefined) return { scanned: FILL_BATCH_ROWS, updated, next: end.id };
  const rest = db.prepare(`SELECT count(*) AS n FROM ${quoted}${range.length === 0 ? '' : ` WHERE ${range.join(' AND ')}`}`).get(...params) as { n: number };
  for (const column of columns) dropFillMarker(db, table, column);
  return { scanned: Number(rest.n), updated, next: null };
}
