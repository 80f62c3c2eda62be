// Compiles the document store's Where / orderBy / keyset cursor into MongoDB filters and
// sorts. MongoDB already has the port's semantics for most of it: equality and ranges are
// typed (10 ≠ "10", ranges bracket by type), `{f: null}` matches null and missing, and
// null/missing sort first ascending. What needs care:
// - `contains` is `$elemMatch`, which only ever looks into arrays (plain equality would
//   also match a scalar field equal to the value).
// - Comparisons with a null bound are built by hand: `$gt: null` matches nothing, and the
//   keyset expansion has to place null/missing explicitly.
// - Non-null comparisons carry a redundant `$type: NON_NULL_TYPES` guard. Unique indexes are
//   partial on exactly that filter (see uniquePartialFilter), and MongoDB's planner only uses
//   a partial index for a query that implies its filter; it cannot infer a `$type` from an
//   equality, so without the guard a lookup by a unique field would scan the collection.
// Field paths and values are checked at run time: both may come from request input, and an
// object in either place would be read by the server as query operators. Both are then written
// as the documents store them (storable.ts), so a query names the stored keys and compares the
// stored strings.
import type { Document, Sort } from 'mongodb';
import type { Condition, Direction, FindOptions, Scalar, Where } from '../ports/document-store.ts';
import { storedPath, storedScalar } from './storable.ts';

/**
 * The non-null BSON types a document can hold here: JSON's, plus what a driver may write.
 * Aliases FerretDB v1 also knows ('number' stands for every numeric type; it has no
 * 'decimal', 'javascript', 'minKey' or 'maxKey'), so one list serves both engines.
 */
export const NON_NULL_TYPES = ['number', 'string', 'bool', 'object', 'array', 'date', 'objectId', 'binData', 'regex', 'timestamp'] as const;

/** Matches no document; a literal so callers need no special case. */
export const NOTHING: Document = { _id: { $in: [] } };

/** The path as stored, once checked. */
export function checkField(field: string): string {
  if (typeof field !== 'string') throw new TypeError(`field path must be a string, got ${typeof field}`);
  for (const segment of field.split('.')) {
    // A leading $ would turn the path into an operator; NUL cannot be stored.
    if (segment === '' || segment.startsWith('$') || segment.includes('\u0000')) {
      throw new Error(`invalid field path: ${JSON.stringify(field)}`);
    }
  }
  return storedPath(field);
}

/** The value as stored, once checked. */
function checkScalar(value: unknown, where: string): Scalar {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return storedScalar(value);
  // NaN has no place in the port's JSON model, and FerretDB drops the connection on it.
  if (typeof value === 'number' && !Number.isNaN(value)) return value;
  throw new TypeError(`${where}: not a scalar: ${typeof value === 'object' ? JSON.stringify(value) : String(value)}`);
}

function guarded(field: string, expr: Document): Document {
  // _id is never null and its index is never partial; a bare equality keeps _id lookups simple.
  return field === '_id' ? expr : { ...expr, $type: [...NON_NULL_TYPES] };
}

function equals(field: string, value: Scalar): Document {
  if (value === null) return { [field]: { $eq: null } };
  // The bare form: the only filter FerretDB's SQLite backend looks up without decoding every
  // document (see document-store.ts). A string is never read as an operator.
  if (field === '_id' && typeof value === 'string') return { _id: value };
  return { [field]: guarded(field, { $eq: value }) };
}

function notEquals(field: string, value: Scalar): Document {
  // $ne matches documents lacking the field, as the port wants; $ne: null matches present values.
  return { [field]: { $ne: value } };
}

function inList(field: string, values: unknown): Document {
  if (!Array.isArray(values)) throw new TypeError(`"in" on ${field} needs an array`);
  const checked = values.map((v) => checkScalar(v, `in on ${field}`));
  if (checked.length === 0) return NOTHING;
  if (checked.includes(null)) return { [field]: { $in: checked } };
  return { [field]: guarded(field, { $in: checked }) };
}

const RANGE_OPS = { gt: '$gt', gte: '$gte', lt: '$lt', lte: '$lte' } as const;

function range(field: string, op: keyof typeof RANGE_OPS, value: Scalar): Document {
  // Null is only comparable with itself: ≥ null / ≤ null is "is null", > null / < null is nothing.
  if (value === null) return op === 'gte' || op === 'lte' ? { [field]: { $eq: null } } : NOTHING;
  return { [field]: guarded(field, { [RANGE_OPS[op]]: value }) };
}

function contains(field: string, value: Scalar): Document {
  return { [field]: { $elemMatch: { $eq: value } } };
}

function conditionClauses(field: string, cond: Condition): Array<Document> {
  const clauses: Array<Document> = [];
  for (const [op, raw] of Object.entries(cond) as Array<[keyof Condition, unknown]>) {
    if (raw === undefined) continue;
    const where = `${op} on ${field}`;
    switch (op) {
      case 'eq': clauses.push(equals(field, checkScalar(raw, where))); break;
      case 'ne': clauses.push(notEquals(field, checkScalar(raw, where))); break;
      case 'in': clauses.push(inList(field, raw)); break;
      case 'gt': case 'gte': case 'lt': case 'lte': clauses.push(range(field, op, checkScalar(raw, where))); break;
      case 'contains': clauses.push(contains(field, checkScalar(raw, where))); break;
      default: throw new Error(`unknown condition operator ${JSON.stringify(op)} on ${field}`);
    }
  }
  return clauses;
}

function isCondition(value: unknown): value is Condition {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function whereClauses(where: Where | undefined): Array<Document> {
  if (!where) return [];
  return Object.entries(where).flatMap(([field, value]) => {
    const path = checkField(field);
    return isCondition(value) ? conditionClauses(path, value) : [equals(path, checkScalar(value, `equality on ${field}`))];
  });
}

export function and(clauses: Array<Document>): Document {
  if (clauses.length === 0) return {};
  if (clauses.length === 1) return clauses[0];
  return { $and: clauses };
}

function or(clauses: Array<Document>): Document {
  if (clauses.length === 0) return NOTHING;
  if (clauses.length === 1) return clauses[0];
  return { $or: clauses };
}

/**
 * Documents strictly after the cursor in the given order: the (a,b,c) > (x,y,z) expansion
 * a ⋗ x OR (a = x AND b ⋗ y) OR (a = x AND b = y AND c ⋗ z), where ⋗ follows each field's
 * direction and null/missing is the lowest value (first ascending, last descending).
 */
export function keysetAfter(orderBy: Array<[string, Direction]>, after: Record<string, Scalar | undefined>): Document {
  const fields = orderBy.map(([field, direction]) => {
    const value = after[field];
    return { field: checkField(field), direction, value: value === undefined ? null : checkScalar(value, `cursor value of ${field}`) };
  });
  const terms: Array<Document> = [];
  fields.forEach(({ field, direction, value }, i) => {
    let beyond: Document;
    if (direction === 'asc') {
      beyond = value === null ? { [field]: { $ne: null } } : { [field]: { $gt: value } };
    } else {
      if (value === null) return; // nothing sorts after null descending
      beyond = field === '_id' ? { _id: { $lt: value } } : { $or: [{ [field]: { $lt: value } }, { [field]: { $eq: null } }] };
    }
    const ties = fields.slice(0, i).map((prev) => ({ [prev.field]: { $eq: prev.value } }));
    terms.push(and([...ties, beyond]));
  });
  const expansion = or(terms);
  // Implied by the expansion; stated alone so the planner can bound an index scan on the
  // first field instead of filtering the whole index. $not $gt keeps null/missing (and
  // other types), which descending order places after any value.
  const [first] = fields;
  if (terms.length === 0 || first.value === null) return expansion;
  const bound = first.direction === 'asc' ? { [first.field]: { $gte: first.value } } : { [first.field]: { $not: { $gt: first.value } } };
  return and([bound, expansion]);
}

export function sortOf(orderBy: Array<[string, Direction]>): Sort {
  return orderBy.map(([field, direction]): [string, 1 | -1] => {
    if (direction !== 'asc' && direction !== 'desc') throw new Error(`invalid direction ${JSON.stringify(direction)} for ${field}`);
    return [checkField(field), direction === 'desc' ? -1 : 1];
  });
}

export interface CompiledFind {
  filter: Document;
  sort?: Sort;
  limit?: number;
}

export function compileFind(options: FindOptions): CompiledFind {
  const clauses = whereClauses(options.where);
  let orderBy = options.orderBy;
  if (options.after) {
    if (!orderBy || orderBy.length === 0) orderBy = [['_id', 'asc']];
    clauses.push(keysetAfter(orderBy, options.after));
  }
  const compiled: CompiledFind = { filter: and(clauses) };
  if (orderBy && orderBy.length > 0) compiled.sort = sortOf(orderBy);
  if (options.limit !== undefined) {
    if (!Number.isInteger(options.limit) || options.limit < 0) throw new Error(`invalid limit ${options.limit}`);
    compiled.limit = options.limit;
  }
  return compiled;
}

/**
 * The filter of a unique index's partial index: only documents holding every indexed field
 * with a non-null value are indexed, so only they can collide (the port's unique semantics).
 */
export function uniquePartialFilter(fields: string[]): Document {
  return Object.fromEntries(fields.map((field) => [field, { $type: [...NON_NULL_TYPES] }]));
}
