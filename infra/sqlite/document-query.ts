// Compiles the document store's Where / orderBy / keyset cursor into SQLite SQL over a
// table of (id TEXT, v INTEGER, doc TEXT JSON) plus, for the fields its indexes name, a column
// holding json_extract(doc, path) (FieldColumns). Values are always bound parameters; only
// field paths become SQL text, and they are validated and quoted. A field with a column is
// read from it, so that the column's indexes serve the query.
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
}

/** Field → the quoted name of the column that holds its json_extract value, for one table. */
export type FieldColumns = ReadonlyMap<string, string>;

/** A field as one table holds it: from its column where it has one. */
function fieldOf(field: string, columns: FieldColumns | undefined): FieldSql {
  const sql = fieldSql(field);
  const column = columns?.get(field);
  return column === undefined ? sql : { ...sql, value: column };
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

const FALSE: Fragment = { sql: '0', params: [] };

function equals(f: FieldSql, value: Scalar): Fragment {
  // Mongo semantics: equality with null matches null and missing alike.
  if (value === null) return { sql: `${f.value} IS NULL`, params: [] };
  return { sql: `(${f.value} = ? AND ${f.type} IN ${typeNames(value)})`, params: [bindScalar(value)] };
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
      sql: `(${f.value} IN (${same.map(() => '?').join(', ')}) AND ${f.type} IN ${typeNames(same[0])})`,
      params: same.map(bindScalar),
    });
  }
  return parts.length === 0 ? FALSE : or(parts);
}

const RANGE_OPS = { gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;

function range(f: FieldSql, op: keyof typeof RANGE_OPS, value: Scalar): Fragment {
  // Like Mongo's type bracketing: a range only matches values of the bound's type.
  if (value === null) return op === 'gte' || op === 'lte' ? { sql: `${f.value} IS NULL`, params: [] } : FALSE;
  return { sql: `(${f.value} ${RANGE_OPS[op]} ? AND ${f.type} IN ${typeNames(value)})`, params: [bindScalar(value)] };
}

function contains(f: FieldSql, value: Scalar): Fragment {
  if (f.path === undefined) return FALSE;
  const element = value === null
    ? { sql: `e.type = 'null'`, params: [] }
    : { sql: `e.value = ? AND e.type IN ${typeNames(value)}`, params: [bindScalar(value)] };
  return {
    sql: `(${f.type} = 'array' AND EXISTS (SELECT 1 FROM json_each(doc, ${f.path}) AS e WHERE ${element.sql}))`,
    params: element.params,
  };
}

function condition(field: string, cond: Condition, columns: FieldColumns | undefined): Fragment[] {
  const f = fieldOf(field, columns);
  const parts: Fragment[] = [];
  for (const [op, value] of Object.entries(cond) as Array<[keyof Condition, unknown]>) {
    if (value === undefined) continue;
    switch (op) {
      case 'eq': parts.push(equals(f, value as Scalar)); break;
      case 'ne': parts.push(notEquals(f, value as Scalar)); break;
      case 'in': parts.push(inList(f, value as Scalar[])); break;
      case 'gt': case 'gte': case 'lt': case 'lte': parts.push(range(f, op, value as Scalar)); break;
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

export function whereParts(where: Where | undefined, columns?: FieldColumns): Fragment[] {
  if (!where) return [];
  return Object.entries(where).flatMap(([field, value]) =>
    isScalar(value) ? [equals(fieldOf(field, columns), value)] : condition(field, value, columns));
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

/** WHERE/ORDER BY/LIMIT tail of a SELECT over the collection's table. */
export function findTail(options: FindOptions, columns?: FieldColumns): Fragment {
  const parts = whereParts(options.where, columns);
  let orderBy = options.orderBy;
  if (options.after) {
    if (!orderBy || orderBy.length === 0) orderBy = [['_id', 'asc']];
    parts.push(keysetAfter(orderBy, options.after, columns));
  }
  const where = and(parts);
  let sql = parts.length > 0 ? ` WHERE ${where.sql}` : '';
  const params = [...where.params];
  if (orderBy && orderBy.length > 0) sql += ` ORDER BY ${orderBySql(orderBy, columns)}`;
  if (options.limit !== undefined) {
    if (!Number.isInteger(options.limit) || options.limit < 0) throw new Error(`invalid limit ${options.limit}`);
    // Written into the SQL (it is a checked integer): a bound LIMIT makes the bundled SQLite
    // prepare the statement again on every call.
    sql += ` LIMIT ${options.limit}`;
  }
  return { sql, params };
}

export function whereSql(where: Where | undefined, columns?: FieldColumns): Fragment {
  const parts = whereParts(where, columns);
  if (parts.length === 0) return { sql: '', params: [] };
  const joined = and(parts);
  return { sql: ` WHERE ${joined.sql}`, params: joined.params };
}
