// Compiles the document store's Where / orderBy / keyset cursor into SQLite SQL over a
// table of (id TEXT, v INTEGER, doc TEXT JSON) plus, for the fields its indexes name, a column
// holding json_extract(doc, path) (FieldColumns). Values are always bound parameters; only
// field paths become SQL text, and they are validated and quoted. A field with a column is
// read from it, so that the column's indexes serve the query. A `contains` on an array field
// that an index takes apart (ArrayIndex) reads through that index's side table instead.
import type { SQLInputValue } from 'node:sqlite';
import type { Condition, Direction, FindOptions, Scalar, Where } from '../ports/document-store.ts';

export interface Fragment {
  sql: string;
  params: SQLInputValue[];
}

interface FieldSql {
  /** The value as SQLite sees it (json_extract yields 1/0 for JSON booleans, NULL when missing). */
  value: string;
  /** json_type-style name of the value, to keep comparisons within one JSON type. */
  type: string;
  /** JSON path literal, absent for the id/v columns. */
  path?: string;
  /** The value is a field column's (json_extract(doc, path) stored), not computed from the document. */
  column?: true;
}

/** Field → the quoted name of the column that holds its json_extract value, for one table. */
export type FieldColumns = ReadonlyMap<string, string>;

/**
 * The side table of an index over an array field (./array-indexes.ts): a row per distinct
 * scalar element of the field's array in each document, with the element's JSON type and the
 * index's other fields. Its column names are none of the collection table's, so the two join
 * without qualified names.
 */
export interface ArrayIndex {
  /** The side table, quoted. */
  table: string;
  /** Its quoted columns of the element and of the element's type (elementTypeSql). */
  element: string;
  elementType: string;
  /** The index's other fields → their quoted columns in the side table (`_id` → its ref). */
  columns: FieldColumns;
}

/** Array field → the side table of an index that takes it apart, for one collection's table. */
export type ArrayIndexes = ReadonlyMap<string, ArrayIndex>;

/** The column of a side table that holds the document's id. */
export const SIDE_REF = 'ref';

/** A JSON element's type as a side table holds it: 'number' whether integer or real, 'boolean' whether true or false. */
export function elementTypeSql(jsonType: string): string {
  return `CASE ${jsonType} WHEN 'integer' THEN 'number' WHEN 'real' THEN 'number' WHEN 'true' THEN 'boolean' WHEN 'false' THEN 'boolean' ELSE ${jsonType} END`;
}

/** A field as one table holds it: from its column where it has one. */
function fieldOf(field: string, columns: FieldColumns | undefined): FieldSql {
  const sql = fieldSql(field);
  const column = columns?.get(field);
  if (column === undefined) return sql;
  // A side table's ref is the id itself, not a json_extract: its type is the id's.
  return field === '_id' ? { ...sql, value: column } : { ...sql, value: column, column: true };
}

/** Field names are few (the code's own); the bound only keeps a caller's mistake from growing it. */
const FIELD_SQL_LIMIT = 1_000;
const fieldSqlCache = new Map<string, FieldSql>();

/** Built once per field name: every find compiles its where clause, mostly from these. */
export function fieldSql(field: string): FieldSql {
  let sql = fieldSqlCache.get(field);
  if (sql === undefined) {
    sql = compileField(field);
    if (fieldSqlCache.size >= FIELD_SQL_LIMIT) fieldSqlCache.clear();
    fieldSqlCache.set(field, sql);
  }
  return sql;
}

function compileField(field: string): FieldSql {
  if (field === '_id') return { value: 'id', type: `'text'` };
  if (field === '_v') return { value: 'v', type: `'integer'` };
  const path = jsonPathLiteral(field);
  return { value: `json_extract(doc, ${path})`, type: `json_type(doc, ${path})`, path };
}

function jsonPathLiteral(field: string): string {
  const segments = field.split('.');
  for (const segment of segments) {
    // A double quote or backslash cannot be escaped inside a quoted JSON path key.
    if (segment === '' || /["\\\u0000-\u001f]/.test(segment)) throw new Error(`invalid field path: ${JSON.stringify(field)}`);
  }
  const path = '$' + segments.map((s) => `."${s}"`).join('');
  return quoteText(path);
}

/** A string literal of SQL. */
export function quoteText(text: string): string {
  return `'${text.replaceAll("'", "''")}'`;
}

export function quoteIdent(name: string): string {
  if (name.includes('\u0000')) throw new Error('identifier contains NUL');
  return `"${name.replaceAll('"', '""')}"`;
}

export function bindScalar(value: Exclude<Scalar, null>): SQLInputValue {
  // json_extract turns JSON true/false into 1/0, so booleans must be bound the same way.
  if (typeof value === 'boolean') return value ? 1 : 0;
  return value;
}

function typeNames(value: Exclude<Scalar, null>): string {
  switch (typeof value) {
    case 'string': return `('text')`;
    case 'number': return `('integer','real')`;
    case 'boolean': return `('true','false')`;
    default: throw new Error(`not a scalar: ${String(value)}`);
  }
}

/**
 * That the field holds a JSON value of `value`'s type. json_type(doc, path) parses the whole
 * document, for every row a query looks at; a column's own SQL type tells nearly as much, so
 * the document is parsed only where json_extract's value leaves the JSON type open: text that
 * opens like an array or object (json_extract gives those as JSON text), and 0 or 1 (as it
 * gives false and true). A boolean is always told by the document.
 */
function ofType(f: FieldSql, value: Exclude<Scalar, null>): string {
  if (!f.column) return `${f.type} IN ${typeNames(value)}`;
  switch (typeof value) {
    case 'string': return `typeof(${f.value}) = 'text' AND (substr(${f.value}, 1, 1) NOT IN ('[', '{') OR ${f.type} = 'text')`;
    case 'number': return `typeof(${f.value}) IN ('integer', 'real') AND (${f.value} NOT IN (0, 1) OR ${f.type} IN ('integer', 'real'))`;
    case 'boolean': return `typeof(${f.value}) = 'integer' AND ${f.value} IN (0, 1) AND ${f.type} IN ('true', 'false')`;
    default: throw new Error(`not a scalar: ${String(value)}`);
  }
}

const FALSE: Fragment = { sql: '0', params: [] };

function equals(f: FieldSql, value: Scalar): Fragment {
  // Mongo semantics: equality with null matches null and missing alike.
  if (value === null) return { sql: `${f.value} IS NULL`, params: [] };
  return { sql: `(${f.value} = ? AND ${ofType(f, value)})`, params: [bindScalar(value)] };
}

function notEquals(f: FieldSql, value: Scalar): Fragment {
  if (value === null) return { sql: `${f.value} IS NOT NULL`, params: [] };
  const eq = equals(f, value);
  // A missing field makes the equality NULL; it must count as "not equal".
  return { sql: `NOT IFNULL(${eq.sql}, 0)`, params: eq.params };
}

function inList(f: FieldSql, values: Scalar[]): Fragment {
  if (!Array.isArray(values)) throw new Error('"in" needs an array');
  const parts: Fragment[] = [];
  if (values.includes(null)) parts.push({ sql: `${f.value} IS NULL`, params: [] });
  for (const kind of ['string', 'number', 'boolean']) {
    const same = values.filter((v): v is Exclude<Scalar, null> => v !== null && typeof v === kind);
    if (same.length === 0) continue;
    parts.push({
      sql: `(${f.value} IN (${same.map(() => '?').join(', ')}) AND ${ofType(f, same[0])})`,
      params: same.map(bindScalar),
    });
  }
  return parts.length === 0 ? FALSE : or(parts);
}

const RANGE_OPS = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;

/**
 * `closed`: the field has a bound on the other side too. SQLite then guesses the range at 1/64
 * of what the equalities before it leave, which without statistics it guesses at about ten
 * rows for any index: every index with the field after them falls to the same floor, and the
 * tie goes to the narrowest. So a list filtered by status within two dates walked the
 * project's emails between them rather than the status's. Each bound is told as likely as
 * even, the closed range as likely as one bound (a quarter), and the equalities decide.
 */
function range(f: FieldSql, op: keyof typeof RANGE_OPS, value: Scalar, closed: boolean): Fragment {
  // Like Mongo's type bracketing: a range only matches values of the bound's type.
  if (value === null) return op === 'gte' || op === 'lte' ? { sql: `${f.value} IS NULL`, params: [] } : FALSE;
  const bound = `${f.value} ${RANGE_OPS[op]} ?`;
  return { sql: `(${closed ? `likelihood(${bound}, 0.5)` : bound} AND ${ofType(f, value)})`, params: [bindScalar(value)] };
}

const hasValue = (cond: Condition, op: keyof Condition) => cond[op] !== undefined && cond[op] !== null;

function contains(f: FieldSql, value: Scalar): Fragment {
  if (f.path === undefined) return FALSE;
  const element = value === null
    ? { sql: `e.type = 'null'`, params: [] }
    : { sql: `e.value = ? AND e.type IN ${typeNames(value)}`, params: [bindScalar(value)] };
  // A column holds an array as its JSON text: its elements are read from that, and only text
  // opening like an array is asked of the document whether it is one (or a string that opens so).
  const sql = f.column
    ? `(substr(${f.value}, 1, 1) = '[' AND ${f.type} = 'array' AND EXISTS (SELECT 1 FROM json_each(${f.value}) AS e WHERE ${element.sql}))`
    : `(${f.type} = 'array' AND EXISTS (SELECT 1 FROM json_each(doc, ${f.path}) AS e WHERE ${element.sql}))`;
  return { sql, params: element.params };
}

/** The side table's row of an element equal to `value`, typed as `contains` is: exactly one per matching document. */
function elementIs(index: ArrayIndex, value: Scalar): Fragment {
  if (value === null) return { sql: `(${index.element} IS NULL AND ${index.elementType} = 'null')`, params: [] };
  const type = typeof value === 'string' ? 'text' : typeof value;
  return { sql: `(${index.element} = ? AND ${index.elementType} = '${type}')`, params: [bindScalar(value)] };
}

/** How one query reads a table: its columns, and the array index it goes through, if any. */
interface Source {
  columns?: FieldColumns;
  through?: { field: string; index: ArrayIndex };
}

/**
 * Through the side table of the first `contains` whose field an array index takes apart; the
 * index's other fields are then read from the side table, so that its index serves them (and
 * the order) too.
 */
function sourceFor(where: Where | undefined, columns: FieldColumns | undefined, arrays: ArrayIndexes | undefined): Source {
  if (where && arrays && arrays.size > 0) {
    for (const [field, value] of Object.entries(where)) {
      if (isScalar(value) || value.contains === undefined) continue;
      const index = arrays.get(field);
      if (index) return { columns: new Map([...(columns ?? []), ...index.columns]), through: { field, index } };
    }
  }
  return { columns };
}

function condition(field: string, cond: Condition, source: Source): Fragment[] {
  const f = fieldOf(field, source.columns);
  const through = source.through?.field === field ? source.through.index : undefined;
  const closed = (hasValue(cond, 'gt') || hasValue(cond, 'gte')) && (hasValue(cond, 'lt') || hasValue(cond, 'lte'));
  const parts: Fragment[] = [];
  for (const [op, value] of Object.entries(cond) as Array<[keyof Condition, unknown]>) {
    if (value === undefined) continue;
    if (op === 'contains' && through) {
      parts.push(elementIs(through, value as Scalar));
      continue;
    }
    switch (op) {
      case 'eq': parts.push(equals(f, value as Scalar)); break;
      case 'ne': parts.push(notEquals(f, value as Scalar)); break;
      case 'in': parts.push(inList(f, value as Scalar[])); break;
      case 'gt': case 'gte': case 'lt': case 'lte': parts.push(range(f, op, value as Scalar, closed)); break;
      case 'contains': parts.push(contains(f, value as Scalar)); break;
      default: throw new Error(`unknown condition operator ${JSON.stringify(op)} on ${field}`);
    }
  }
  return parts;
}

function isScalar(value: Scalar | Condition): value is Scalar {
  return value === null || typeof value !== 'object';
}

function and(parts: Fragment[]): Fragment {
  return { sql: parts.map((p) => p.sql).join(' AND '), params: parts.flatMap((p) => p.params) };
}

function or(parts: Fragment[]): Fragment {
  return { sql: `(${parts.map((p) => p.sql).join(' OR ')})`, params: parts.flatMap((p) => p.params) };
}

function whereParts(where: Where | undefined, source: Source): Fragment[] {
  if (!where) return [];
  return Object.entries(where).flatMap(([field, value]) =>
    isScalar(value) ? [equals(fieldOf(field, source.columns), value)] : condition(field, value, source));
}

/**
 * Rows strictly after the cursor in the given order: the (a,b,c) > (x,y,z) expansion
 * a ⋗ x OR (a = x AND b ⋗ y) OR (a = x AND b = y AND c ⋗ z), where ⋗ follows each field's
 * direction. Comparisons are raw SQLite ones so they agree with ORDER BY, where NULL
 * (missing) sorts first ascending and last descending, as in MongoDB.
 */
export function keysetAfter(orderBy: Array<[string, Direction]>, after: Record<string, Scalar | undefined>, columns?: FieldColumns): Fragment {
  const fields = orderBy.map(([field, direction]) => {
    const value = after[field];
    return { f: fieldOf(field, columns), direction, value: value === undefined ? null : value };
  });
  const terms: Fragment[] = fields.map((current, i) => {
    const parts: Fragment[] = fields.slice(0, i).map(({ f, value }) =>
      value === null ? { sql: `${f.value} IS NULL`, params: [] } : { sql: `${f.value} = ?`, params: [bindScalar(value)] });
    const { f, direction, value } = current;
    if (direction === 'asc') {
      parts.push(value === null ? { sql: `${f.value} IS NOT NULL`, params: [] } : { sql: `${f.value} > ?`, params: [bindScalar(value)] });
    } else {
      parts.push(value === null ? FALSE : { sql: `(${f.value} < ? OR ${f.value} IS NULL)`, params: [bindScalar(value)] });
    }
    return and(parts);
  });
  const expansion = or(terms.map((t) => ({ sql: `(${t.sql})`, params: t.params })));
  const [first] = fields;
  // Implied by the expansion; stated so the planner can seek an index on the first field.
  if (first.direction === 'asc' && first.value !== null) {
    return and([{ sql: `${first.f.value} >= ?`, params: [bindScalar(first.value)] }, expansion]);
  }
  return expansion;
}

export function orderBySql(orderBy: Array<[string, Direction]>, columns?: FieldColumns): string {
  return orderBy.map(([field, direction]) => `${fieldOf(field, columns).value} ${direction === 'desc' ? 'DESC' : 'ASC'}`).join(', ');
}

/** A query's tail, and what it reads from when that is not the collection's table alone. */
export interface Tail extends Fragment {
  /** The quoted side table of an array index that the query reads through (fromSql). */
  through?: string;
  /**
   * The rows that follow this tail's in the order, read by a query of their own: set for a
   * cursor on a descending first field (see findTail). Read it only when this tail's rows fell
   * short of the limit, and append what it gives.
   */
  then?: Tail;
}

/** The FROM of a query over `table` (quoted) with this tail. */
export function fromSql(table: string, tail: Tail): string {
  // Joined rather than tested row by row (EXISTS), so that its index can lead the read and
  // give the order.
  return tail.through === undefined ? table : `${tail.through} JOIN ${table} ON ${table}.id = ${tail.through}.${SIDE_REF}`;
}

/**
 * WHERE/ORDER BY/LIMIT tail of a SELECT over the collection's table (FROM fromSql).
 *
 * After a cursor whose first field is descending and not null, the rows left are the field's
 * values up to the cursor's, then the rows without it (NULL sorts last descending). SQLite
 * seeks an index only on a range, and `f < ? OR f IS NULL` is none: it would walk the index
 * from its start to the cursor, about k pages of entries to reach page k. So the tail bounds
 * the field (`f <= ?`, a range, which leaves NULL out) and `then` reads the NULL rows, which
 * follow every other in this order.
 */
export function findTail(options: FindOptions, fieldColumns?: FieldColumns, arrays?: ArrayIndexes): Tail {
  const source = sourceFor(options.where, fieldColumns, arrays);
  const { columns } = source;
  const filter = whereParts(options.where, source);
  const parts = [...filter];
  let orderBy = options.orderBy;
  let nulls: Fragment | undefined;
  if (options.after) {
    if (!orderBy || orderBy.length === 0) orderBy = [['_id', 'asc']];
    const [[firstField, firstDirection]] = orderBy;
    const first = options.after[firstField];
    if (firstDirection === 'desc' && first !== undefined && first !== null) {
      const f = fieldOf(firstField, columns);
      nulls = { sql: `${f.value} IS NULL`, params: [] };
      parts.push({ sql: `${f.value} <= ?`, params: [bindScalar(first)] });
    }
    parts.push(keysetAfter(orderBy, options.after, columns));
  }
  const through = source.through?.index.table;
  const tail = { ...tailOf(parts, orderBy, options.limit, columns), through };
  if (!nulls) return tail;
  return { ...tail, then: { ...tailOf([...filter, nulls], orderBy, options.limit, columns), through } };
}

function tailOf(parts: Fragment[], orderBy: FindOptions['orderBy'], limit: number | undefined, columns: FieldColumns | undefined): Fragment {
  const where = and(parts);
  let sql = parts.length > 0 ? ` WHERE ${where.sql}` : '';
  const params = [...where.params];
  if (orderBy && orderBy.length > 0) sql += ` ORDER BY ${orderBySql(orderBy, columns)}`;
  if (limit !== undefined) {
    if (!Number.isInteger(limit) || limit < 0) throw new Error(`invalid limit ${limit}`);
    // Written into the SQL (it is a checked integer): a bound LIMIT makes the bundled SQLite
    // prepare the statement again on every call.
    sql += ` LIMIT ${limit}`;
  }
  return { sql, params };
}

/** The WHERE of a query over the collection's table (FROM fromSql); without `arrays`, over that table alone (a DELETE's). */
export function whereSql(where: Where | undefined, columns?: FieldColumns, arrays?: ArrayIndexes): Tail {
  const source = sourceFor(where, columns, arrays);
  const parts = whereParts(where, source);
  if (parts.length === 0) return { sql: '', params: [] };
  const joined = and(parts);
  return { sql: ` WHERE ${joined.sql}`, params: joined.params, through: source.through?.index.table };
}
