// Indexes over an array field (IndexSpec.arrayField) on the embedded store. SQLite indexes a
// row's values, not the elements of a JSON array, so such an index is a side table: a row per
// distinct scalar element of the field's array in each document, holding the element, its type
// and the index's other fields, under an index in the spec's order. A find with `contains` on
// the field reads through it (./document-query.ts, ArrayIndex), so that a page costs about a
// page, as on MongoDB's multikey index, instead of a test of every document.
//
// Triggers on the collection's table keep it, so every write of every connection does, however
// old its look at the schema. They take the index's values from the field columns the write
// fills (./field-columns.ts: the same json_extract values), and the elements from the document;
// an update fires them only when it sets one of those columns, which it does only for a field
// it changes, so an email's status updates leave its recipients' rows alone.
//
// Names: the side table is `array:` and the name a plain index of the spec would have
// (`<table>__<index>`): never a collection's table (those are `doc_…`), so no collection's name
// reaches it. Its indexes and triggers add '/keys', '/ref', '/insert', '/update', '/delete'. The
// insert trigger, attached to the collection's table (a rename carries it along), is how the side
// tables of a table are found.
import type { DatabaseSync } from 'node:sqlite';
import type { IndexSpec } from '../ports/document-store.ts';
import { elementTypeSql, fieldSql, quoteIdent, SIDE_REF, type ArrayIndex, type ArrayIndexes, type FieldColumns } from './document-query.ts';

/** Side table columns: the index's other fields, the element, the element's type. */
const KEY_PREFIX = 'key:';
const ELEMENT_PREFIX = 'each:';
const TYPE_PREFIX = 'type:';
const INSERT_TRIGGER = '/insert';
const SIDE_PREFIX = 'array:';

/** The side table of the array index whose plain index would be named `index`. */
export function sideTableName(index: string): string {
  return SIDE_PREFIX + index;
}

interface SchemaObject {
  name: string;
  sql: string;
}

/**
 * The schema objects of the side table `side` for `spec` on `table` (unquoted names), in the
 * order they are made, and the statement that fills it from the documents already there.
 * `columns`: the table's field columns, which must include every field of the spec but _id.
 */
export function arrayIndexObjects(table: string, side: string, spec: IndexSpec, columns: FieldColumns): { objects: SchemaObject[]; fill: string } {
  const arrayField = spec.arrayField!;
  const path = fieldSql(arrayField).path!;
  const quotedTable = quoteIdent(table);
  const quotedSide = quoteIdent(side);
  const mainColumn = (field: string) => {
    const column = columns.get(field);
    if (column === undefined) throw new Error(`index ${spec.name}: no column for ${field}`);
    return column;
  };
  // Side column, the value it takes from a row of the collection's table (`row`) and element
  // `e`, and the key column(s) each field of the spec stands for, in the spec's order.
  const sideColumns: Array<{ name: string; value: (row: string) => string }> = [{ name: SIDE_REF, value: (row) => `${row}.id` }];
  const keys: string[] = [];
  for (const [field, direction] of spec.fields) {
    const order = direction === 'desc' ? ' DESC' : '';
    if (field === '_id') {
      keys.push(`${SIDE_REF}${order}`);
    } else if (field === arrayField) {
      const element = quoteIdent(ELEMENT_PREFIX + field);
      const type = quoteIdent(TYPE_PREFIX + field);
      sideColumns.push({ name: element, value: () => 'e.value' }, { name: type, value: () => elementTypeSql('e.type') });
      keys.push(`${element}${order}`, `${type}${order}`);
    } else {
      const key = quoteIdent(KEY_PREFIX + field);
      sideColumns.push({ name: key, value: (row) => `${row}.${mainColumn(field)}` });
      keys.push(`${key}${order}`);
    }
  }
  const names = sideColumns.map((c) => c.name).join(', ');
  // DISTINCT: one row per element value and type, so a document is found once however often
  // its array holds the value. Objects and arrays are never a `contains` value.
  const rows = (row: string, from = '') => `SELECT DISTINCT ${sideColumns.map((c) => c.value(row)).join(', ')} FROM ${from}json_each(${row}.doc, ${path}) AS e`
    + ` WHERE e.type NOT IN ('object', 'array') AND json_type(${row}.doc, ${path}) = 'array'`;
  const insert = `INSERT INTO ${quotedSide} (${names}) ${rows('NEW')};`;
  const remove = `DELETE FROM ${quotedSide} WHERE ${SIDE_REF} = OLD.id;`;
  const watched = spec.fields.filter(([field]) => field !== '_id').map(([field]) => mainColumn(field)).join(', ');
  const name = (suffix: string) => quoteIdent(side + suffix);
  return {
    objects: [
      { name: side, sql: `CREATE TABLE ${quotedSide} (${sideColumns.map((c) => c.name === SIDE_REF ? `${SIDE_REF} TEXT NOT NULL` : c.name).join(', ')})` },
      { name: `${side}/keys`, sql: `CREATE INDEX ${name('/keys')} ON ${quotedSide} (${keys.join(', ')})` },
      { name: `${side}/ref`, sql: `CREATE INDEX ${name('/ref')} ON ${quotedSide} (${SIDE_REF})` },
      { name: side + INSERT_TRIGGER, sql: `CREATE TRIGGER ${name(INSERT_TRIGGER)} AFTER INSERT ON ${quotedTable} BEGIN ${insert} END` },
      { name: `${side}/update`, sql: `CREATE TRIGGER ${name('/update')} AFTER UPDATE OF ${watched} ON ${quotedTable} BEGIN ${remove} ${insert} END` },
      { name: `${side}/delete`, sql: `CREATE TRIGGER ${name('/delete')} AFTER DELETE ON ${quotedTable} BEGIN ${remove} END` },
    ],
    fill: `INSERT INTO ${quotedSide} (${names}) ${rows('d', `${quotedTable} AS d, `)}`,
  };
}

/** The side tables (unquoted names) of `table`'s array indexes. */
export function sideTablesOf(db: DatabaseSync, table: string): string[] {
  const rows = db.prepare(`SELECT substr(name, 1, length(name) - ${INSERT_TRIGGER.length}) AS side FROM sqlite_master
    WHERE type = 'trigger' AND tbl_name = ? AND substr(name, -${INSERT_TRIGGER.length}) = '${INSERT_TRIGGER}'`).all(table) as Array<{ side: string }>;
  return rows.map((row) => row.side);
}

/** Removes the side table `side`, its indexes and the triggers that keep it. */
export function dropArrayIndex(db: DatabaseSync, side: string): void {
  for (const suffix of [INSERT_TRIGGER, '/update', '/delete']) db.exec(`DROP TRIGGER IF EXISTS ${quoteIdent(side + suffix)}`);
  db.exec(`DROP TABLE IF EXISTS ${quoteIdent(side)}`);
}

/**
 * Makes `spec`'s side table for `table` as arrayIndexObjects describes it, unless it is so
 * already; `index`: the name a plain index of the spec would have. A plain index under that name,
 * or a side table of another definition, is replaced (the caller's current definition wins, as
 * for plain indexes). Inside the writer's transaction. Returns whether it changed the schema.
 */
export function ensureArrayIndex(db: DatabaseSync, table: string, index: string, spec: IndexSpec, columns: FieldColumns): boolean {
  const side = sideTableName(index);
  const { objects, fill } = arrayIndexObjects(table, side, spec, columns);
  const find = db.prepare(`SELECT sql FROM sqlite_master WHERE name = ?`);
  const plain = db.prepare(`SELECT tbl_name FROM sqlite_master WHERE type = 'index' AND name = ?`).get(index) as { tbl_name: string } | undefined;
  if (plain && plain.tbl_name !== table) throw new Error(`index name ${index} is taken by table ${plain.tbl_name}`);
  if (!plain && objects.every((object) => (find.get(object.name) as { sql: string } | undefined)?.sql === object.sql)) return false;
  if (plain) db.exec(`DROP INDEX ${quoteIdent(index)}`);
  dropArrayIndex(db, side);
  for (const object of objects) db.exec(object.sql);
  db.exec(fill);
  return true;
}

/**
 * After `table` took the name of another, whose plain indexes' names began with `from`: gives
 * its side tables, their indexes and triggers the names of `to`'s (those of a fresh collection
 * under the old name must be free). ALTER TABLE rewrites the triggers' references.
 */
export function renameArrayIndexes(db: DatabaseSync, table: string, from: string, to: string): void {
  const [oldPrefix, newPrefix] = [sideTableName(from), sideTableName(to)];
  for (const side of sideTablesOf(db, table)) {
    if (!side.startsWith(oldPrefix)) continue;
    const renamed = newPrefix + side.slice(oldPrefix.length);
    db.exec(`ALTER TABLE ${quoteIdent(side)} RENAME TO ${quoteIdent(renamed)}`);
    const objects = db.prepare(`SELECT type, name, sql FROM sqlite_master WHERE type IN ('index', 'trigger') AND tbl_name IN (?, ?)`)
      .all(renamed, table) as Array<{ type: string; name: string; sql: string }>;
    for (const object of objects.filter(({ name }) => name.startsWith(`${side}/`))) {
      const name = renamed + object.name.slice(side.length);
      db.exec(`DROP ${object.type === 'index' ? 'INDEX' : 'TRIGGER'} ${quoteIdent(object.name)}`);
      db.exec(object.sql.replace(quoteIdent(object.name), quoteIdent(name)));
    }
  }
}

/** For a reader: each side table of `?1`'s array indexes, with its columns, one row per column. */
export const ARRAY_INDEX_COLUMNS_SQL = `SELECT s.name AS side, c.name AS "column" FROM sqlite_master AS t
  JOIN sqlite_master AS s ON s.type = 'table' AND s.name || '${INSERT_TRIGGER}' = t.name
  JOIN pragma_table_info(s.name) AS c
  WHERE t.type = 'trigger' AND t.tbl_name = ?`;

/** The array indexes of a table from ARRAY_INDEX_COLUMNS_SQL's rows. */
export function arrayIndexesFrom(rows: Array<{ side: string; column: string }>): ArrayIndexes {
  const bySide = new Map<string, string[]>();
  for (const { side, column } of rows) bySide.set(side, [...(bySide.get(side) ?? []), column]);
  const indexes = new Map<string, ArrayIndex>();
  for (const [side, names] of bySide) {
    const element = names.find((name) => name.startsWith(ELEMENT_PREFIX));
    if (element === undefined) continue;
    const field = element.slice(ELEMENT_PREFIX.length);
    const columns = new Map<string, string>([['_id', SIDE_REF]]);
    for (const name of names) if (name.startsWith(KEY_PREFIX)) columns.set(name.slice(KEY_PREFIX.length), quoteIdent(name));
    indexes.set(field, { table: quoteIdent(side), element: quoteIdent(element), elementType: quoteIdent(TYPE_PREFIX + field), columns });
  }
  return indexes;
}
