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
 * (missing) sorts first ascending and last descending, as in MongoDB. The planner seeks on
 * none of it (an OR): findTail adds the range it can seek on.
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
  return or(terms.map((t) => ({ sql: `(${t.sql})`, params: t.params })));
}

/** The non-null value `where` fixes `field` to by equality, if it does. */
function pinned(where: Where | undefined, field: string): Exclude<Scalar, null> | undefined {
  const value = where?.[field];
  if (value === undefined || value === null) return undefined;
  if (isScalar(value)) return value;
  return value.eq ?? undefined;
}

/**
 * How many leading fields of the order the where clause holds constant at the cursor's values:
 * each fixed by equality to the very value the cursor has. Every row the where lets through
 * ties with the cursor on them, so the order among those rows starts at the next field.
 */
function constantPrefix(where: Where | undefined, orderBy: Array<[string, Direction]>, after: Record<string, Scalar | undefined>): number {
  let i = 0;
  while (i < orderBy.length) {
    const value = pinned(where, orderBy[i][0]);
    if (value === undefined || after[orderBy[i][0]] !== value) break;
    i++;
  }
  return i;
}

export function orderBySql(orderBy: Array<[string, Direction]>, columns?: FieldColumns): string {
  return orderBy.map(([field, direction]) => `${fieldOf(field, columns).value} ${direction === 'desc' ? 'DESC' : 'ASC'}`).join(', ');
}

/** A query's tail, and what it reads from when that is not the collection's table alone. */
export interface Tail extends Fragment {
  /** The quoted side table of an array index that the query reads through (fromSql). */
  through?: string;
  /** The side table leads the join, whatever the planner would make of the collection's table's indexes. */
  lead?: true;
  /** The quoted index of the collection's table the query reads by (INDEXED BY). */
  indexedBy?: string;
  /**
   * The rows that follow this tail's in the order, read by a query of their own: set for a
   * cursor on a descending field (see findTail). Read it only when this tail's rows fell
   * short of the limit, and append what it gives.
   */
  then?: Tail;
}

/** The FROM of a query over `table` (quoted) with this tail. */
export function fromSql(table: string, tail: Tail): string {
  if (tail.indexedBy !== undefined) return `${table} INDEXED BY ${tail.indexedBy}`;
  // Joined rather than tested row by row (EXISTS), so that its index can lead the read and
  // give the order.
  if (tail.through === undefined) return table;
  return `${tail.through} ${tail.lead ? 'CROSS JOIN' : 'JOIN'} ${table} ON ${table}.id = ${tail.through}.${SIDE_REF}`;
}

/** An index of a collection's table or of one of its side tables, as a read finds it (./field-columns.ts). */
export interface IndexLayout {
  /** The quoted table it indexes: the collection's, or a side table's (ArrayIndex.table). */
  table: string;
  /** Quoted. */
  name: string;
  /** Its columns in order, as a query names them (null: an expression). */
  columns: ReadonlyArray<string | null>;
}

/** The index a find reads by: one of the collection's table, or of the side table of `arrayField`'s array index. */
export interface Access {
  index: IndexLayout;
  arrayField?: string;
}

/** A count of the index entries that `access`'s equalities select, at most PROBE_ROWS of them. */
export interface Probe extends Fragment {
  access: Access;
}

/**
 * The entries a probe counts at most: an index-only read of them costs less than the page of
 * documents a list reads (a tenth of a millisecond or so), and fewer than this many is a page
 * read's whole walk, however the other filters go.
 */
export const PROBE_ROWS = 1_000;

/**
 * Without statistics (no ANALYZE), SQLite guesses every index that a filter's equalities seek
 * equally selective and takes the first of the schema: a page of emails with two filters (or
 * a send key's scope and a filter) walked every email the first filter matched, testing the
 * other, however few matched both. So where several indexes each take a set of the filter's
 * equalities that none of the others takes more of, each is probed (a count of the entries its
 * equalities select, bounded by PROBE_ROWS) and the read goes by the one that selects fewest,
 * when fewer than PROBE_ROWS (chooseAccess): that bounds its walk. None when the filter leaves
 * the planner one choice, or fixes the id. The answer is the same whichever index is read.
 */
export function indexProbes(where: Where | undefined, table: string, columns: FieldColumns, arrays: ArrayIndexes, indexes: readonly IndexLayout[]): Probe[] {
  if (!where || indexes.length < 2 || pinned(where, '_id') !== undefined) return [];
  interface Equality { field: string; fragment: Fragment }
  const equalities = new Map<string, Equality>();
  const equalitiesOf = new Map<string, Map<string, Equality>>([[table, equalities]]);
  const sides = new Map<string, string>();
  for (const [field, value] of Object.entries(where)) {
    const fixed = pinned(where, field);
    const column = columns.get(field);
    if (fixed !== undefined && column !== undefined) equalities.set(column, { field, fragment: { sql: `${column} = ?`, params: [bindScalar(fixed)] } });
    const index = arrays.get(field);
    if (index === undefined || isScalar(value) || value.contains === undefined || value.contains === null) continue;
    const element = value.contains;
    const side = new Map<string, Equality>();
    for (const [other, sideColumn] of index.columns) {
      const otherFixed = pinned(where, other);
      if (otherFixed !== undefined) side.set(sideColumn, { field: other, fragment: { sql: `${sideColumn} = ?`, params: [bindScalar(otherFixed)] } });
    }
    const type = typeof element === 'string' ? 'text' : typeof element;
    side.set(index.element, { field, fragment: { sql: `${index.element} = ?`, params: [bindScalar(element)] } });
    side.set(index.elementType, { field, fragment: { sql: `${index.elementType} = '${type}'`, params: [] } });
    if (!sides.has(index.table)) {
      equalitiesOf.set(index.table, side);
      sides.set(index.table, field);
    }
  }
  const candidates: Array<{ access: Access; fields: Set<string>; conditions: Fragment[] }> = [];
  for (const index of indexes) {
    const known = equalitiesOf.get(index.table);
    if (known === undefined) continue;
    const conditions: Fragment[] = [];
    const fields = new Set<string>();
    for (const column of index.columns) {
      const equality = column === null ? undefined : known.get(column);
      if (equality === undefined) break;
      conditions.push(equality.fragment);
      fields.add(equality.field);
    }
    if (conditions.length === 0) continue;
    const arrayField = sides.get(index.table);
    candidates.push({ access: arrayField === undefined ? { index } : { index, arrayField }, fields, conditions });
  }
  // An index whose equalities another's include never selects fewer entries than that one.
  const covers = (a: Set<string>, b: Set<string>) => [...b].every((field) => a.has(field));
  const kept = candidates.filter((c, i) => !candidates.some((d, j) => j !== i && covers(d.fields, c.fields) && (j < i || !covers(c.fields, d.fields))));
  if (kept.length < 2) return [];
  return kept.map(({ access, conditions }) => {
    const filter = and(conditions);
    return {
      access,
      sql: `SELECT count(*) AS n FROM (SELECT 1 FROM ${access.index.table} INDEXED BY ${access.index.name} WHERE ${filter.sql} LIMIT ${PROBE_ROWS})`,
      params: filter.params,
    };
  });
}

/** The access of the probe that counted fewest entries, if fewer than PROBE_ROWS (`counts` in the probes' order). */
export function chooseAccess(probes: readonly Probe[], counts: readonly number[]): Access | undefined {
  let chosen: Access | undefined;
  let fewest = PROBE_ROWS;
  probes.forEach((probe, i) => {
    if (counts[i] < fewest) {
      chosen = probe.access;
      fewest = counts[i];
    }
  });
  return chosen;
}

/**
 * WHERE/ORDER BY/LIMIT tail of a SELECT over the collection's table (FROM fromSql).
 *
 * After a cursor, the keyset condition (keysetAfter) is exact but an OR, which SQLite does not
 * seek on: alone, it would walk the index from the first row the where clause lets through up
 * to the cursor, about k pages of entries to reach page k. So the tail also bounds the first
 * field of the order that the where clause does not hold constant (constantPrefix: a page of a
 * workspace's list in (workspaceId, _id) order bounds _id) with a plain range the index seeks
 * to: `f >= ?` ascending; `f <= ?` descending, which leaves out the rows without the field
 * (NULL sorts last descending), so `then` reads those, which follow every other in this order.
 * A cursor without the field: descending, only rows without it follow (`f IS NULL`, an
 * equality the index seeks); ascending, every row with it does, and nothing is bounded.
 */
export function findTail(options: FindOptions, fieldColumns?: FieldColumns, arrays?: ArrayIndexes, access?: Access): Tail {
  // By the chosen index (indexProbes): through its side table, or by the table's index, a
  // `contains` then reading each document's array.
  const readArrays = access === undefined ? arrays : access.arrayField === undefined ? undefined : onlyArray(arrays, access.arrayField);
  const source = sourceFor(options.where, fieldColumns, readArrays);
  const { columns } = source;
  const filter = whereParts(options.where, source);
  const parts = [...filter];
  let orderBy = options.orderBy;
  let nulls: Fragment | undefined;
  if (options.after) {
    if (!orderBy || orderBy.length === 0) orderBy = [['_id', 'asc']];
    const start = constantPrefix(options.where, orderBy, options.after);
    if (start < orderBy.length) {
      const [field, direction] = orderBy[start];
      const f = fieldOf(field, columns);
      const value = options.after[field];
      if (value === undefined || value === null) {
        if (direction === 'desc') parts.push({ sql: `${f.value} IS NULL`, params: [] });
      } else if (direction === 'asc') {
        parts.push({ sql: `${f.value} >= ?`, params: [bindScalar(value)] });
      } else {
        nulls = { sql: `${f.value} IS NULL`, params: [] };
        parts.push({ sql: `${f.value} <= ?`, params: [bindScalar(value)] });
      }
    }
    parts.push(keysetAfter(orderBy, options.after, columns));
  }
  const read: Pick<Tail, 'through' | 'lead' | 'indexedBy'> = { through: source.through?.index.table };
  if (access !== undefined && read.through !== undefined) read.lead = true;
  if (access !== undefined && access.arrayField === undefined) read.indexedBy = access.index.name;
  const tail = { ...tailOf(parts, orderBy, options.limit, columns), ...read };
  if (!nulls) return tail;
  return { ...tail, then: { ...tailOf([...filter, nulls], orderBy, options.limit, columns), ...read } };
}

function onlyArray(arrays: ArrayIndexes | undefined, field: string): ArrayIndexes | undefined {
  const index = arrays?.get(field);
  return index === undefined ? undefined : new Map([[field, index]]);
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
