// Every find of the embedded document store answers what a naive in-memory filter and sort of the
// same documents gives: random documents (missing fields and nulls, numbers, booleans and strings
// mixed in one field, arrays and objects, look-alike Unicode), random filters (often fixed to the
// cursor row's own values, so leading sort fields are held constant), random orders and cursors
// from any row, with several plain and array indexes, so that the cursor's seekable bound, the
// index probes (INDEXED BY, a side table leading the join, `contains` read from documents) and the
// NULL tails all run. A fixed seed (SEED to try others); DOCS and QUERIES set the size.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import type { Condition, Direction, FindOptions, Scalar, Where } from '../infra/ports/document-store.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';

const dir = mkdtempSync(join(tmpdir(), 'relay-find-model-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

function mulberry32(seed: number) {
  return () => {
    seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const SEED = Number(process.env.SEED ?? 12345);
const rand = mulberry32(SEED);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)];

const MISSING = Symbol('missing');
const A = ['x', 'y', 'z', null, MISSING] as const;
const B = [1, 2, 1.5, 0, -0, 1e20, true, false, 'one', 'é', 'e\u0301', '😀', 'ｚ', '', '[1]', '{"a":1}', '0', '1', [1], { a: 1 }, null, MISSING] as const;
const N = [0, 1, 2, 3, -1, 2.5, 'k', 'K', null, MISSING, true] as const;
const TAG = ['t1', 't2', 't3', 1, 2, true, false, null, 'é'] as const;

type Doc = Record<string, unknown> & { _id: string };

function makeDoc(i: number): Doc {
  const doc: Doc = { _id: `d${String(Math.floor(rand() * 1e6)).padStart(6, '0')}_${i}` };
  for (const [field, values] of [['a', A], ['b', B], ['c', B], ['n', N]] as const) {
    const v = pick(values as readonly unknown[]);
    if (v !== MISSING) doc[field] = v;
  }
  const r = rand();
  if (r < 0.7) doc.tags = Array.from({ length: Math.floor(rand() * 4) }, () => pick(TAG));
  else if (r < 0.8) doc.tags = pick(['t1', 1, true, null]);
  return doc;
}

// SQLite's order over json_extract values: NULL, numbers (booleans as 0/1), text (UTF-8 bytes).
type SqlValue = null | number | string;
const sqlValue = (v: unknown): SqlValue => v === undefined || v === null ? null : typeof v === 'boolean' ? (v ? 1 : 0) : typeof v === 'number' || typeof v === 'string' ? v : JSON.stringify(v);
function cmp(x: SqlValue, y: SqlValue): number {
  const rank = (v: SqlValue) => v === null ? 0 : typeof v === 'number' ? 1 : 2;
  if (rank(x) !== rank(y)) return rank(x) - rank(y);
  if (x === null) return 0;
  if (typeof x === 'number') return x - (y as number);
  return Buffer.compare(Buffer.from(x as string), Buffer.from(y as string));
}
const sameType = (d: unknown, v: Exclude<Scalar, null>) => typeof d === typeof v;
function eq(d: unknown, v: Scalar): boolean {
  if (v === null) return d === undefined || d === null;
  return sameType(d, v) && d === v;
}
function matches(doc: Doc, where: Where): boolean {
  for (const [field, cond] of Object.entries(where)) {
    const d = doc[field];
    if (cond === null || typeof cond !== 'object') { if (!eq(d, cond)) return false; continue; }
    const c = cond as Condition;
    if (c.eq !== undefined && !eq(d, c.eq)) return false;
    if (c.ne !== undefined && eq(d, c.ne)) return false;
    if (c.in !== undefined && !c.in.some((v) => eq(d, v))) return false;
    for (const op of ['gt', 'gte', 'lt', 'lte'] as const) {
      const v = c[op];
      if (v === undefined) continue;
      if (v === null) { if (op === 'gt' || op === 'lt' || !(d === undefined || d === null)) return false; continue; }
      if (!sameType(d, v)) return false;
      const k = cmp(sqlValue(d), sqlValue(v));
      if (!(op === 'gt' ? k > 0 : op === 'gte' ? k >= 0 : op === 'lt' ? k < 0 : k <= 0)) return false;
    }
    if (c.contains !== undefined) {
      if (!Array.isArray(d)) return false;
      if (!d.some((e) => c.contains === null ? e === null : e !== null && sameType(e, c.contains!) && e === c.contains)) return false;
    }
  }
  return true;
}
function compareRows(orderBy: Array<[string, Direction]>, x: Record<string, unknown>, y: Record<string, unknown>): number {
  for (const [field, dir] of orderBy) {
    const k = cmp(sqlValue(x[field]), sqlValue(y[field]));
    if (k !== 0) return dir === 'asc' ? k : -k;
  }
  return 0;
}
function naive(docs: Doc[], options: FindOptions): string[] {
  const orderBy = options.orderBy && options.orderBy.length > 0 ? options.orderBy : options.after ? [['_id', 'asc'] as [string, Direction]] : undefined;
  let rows = docs.filter((doc) => matches(doc, options.where ?? {}));
  if (orderBy) rows = rows.sort((x, y) => compareRows(orderBy, x, y));
  if (options.after) rows = rows.filter((doc) => compareRows(orderBy!, doc, options.after!) > 0);
  if (options.limit !== undefined) rows = rows.slice(0, options.limit);
  return rows.map((d) => d._id);
}

function randomWhere(cursorDoc: Doc | undefined): Where {
  const where: Where = {};
  const fixed = (field: string, values: readonly unknown[]) => {
    // Often the cursor's own value, so that leading sort fields are held constant.
    const fromCursor = cursorDoc && rand() < 0.6 ? cursorDoc[field] : undefined;
    const v = fromCursor !== undefined && fromCursor !== null && typeof fromCursor !== 'object' ? fromCursor : pick(values.filter((x) => x !== MISSING && (x === null || typeof x !== 'object')));
    return v as Scalar;
  };
  if (rand() < 0.6) where.a = rand() < 0.5 ? fixed('a', A) : { eq: fixed('a', A) };
  if (rand() < 0.5) where.b = fixed('b', B);
  if (rand() < 0.3) where.c = rand() < 0.5 ? fixed('c', B) : { ne: fixed('c', B) };
  if (rand() < 0.4) where.tags = { contains: pick(TAG) };
  if (rand() < 0.2) where.n = pick([{ gte: 1 }, { lt: 2 }, { gt: 'a' }, { in: [1, 'k', null] }, { lte: null }] as Condition[]);
  return where;
}

function randomOrder(): Array<[string, Direction]> {
  const fields = ['a', 'b', 'c', 'n'].filter(() => rand() < 0.5).sort(() => rand() - 0.5);
  const dir = (): Direction => (rand() < 0.5 ? 'asc' : 'desc');
  return [...fields.map((f): [string, Direction] => [f, dir()]), ['_id', dir()]];
}

test(`every find equals the naive model (seed ${SEED})`, async () => {
  const store = new SqliteDocumentStore(join(dir, 'model.db'));
  const coll = store.collection<Doc>('things');
  await coll.ensureIndexes([
    { name: 'a_id', fields: [['a', 'asc'], ['_id', 'asc']] },
    { name: 'b_n', fields: [['b', 'asc'], ['n', 'desc'], ['_id', 'asc']] },
    { name: 'c', fields: [['c', 'desc'], ['_id', 'desc']] },
    { name: 'a_b', fields: [['a', 'asc'], ['b', 'desc'], ['_id', 'desc']] },
    { name: 'n_id', fields: [['n', 'desc'], ['_id', 'desc']] },
    { name: 'a_tags', fields: [['a', 'asc'], ['tags', 'asc'], ['n', 'desc'], ['_id', 'asc']], arrayField: 'tags' },
    { name: 'tags_b', fields: [['tags', 'asc'], ['b', 'asc'], ['_id', 'desc']], arrayField: 'tags' },
  ]);
  const docs = Array.from({ length: Number(process.env.DOCS ?? 400) }, (_, i) => makeDoc(i));
  for (const doc of docs) await coll.insert(doc);
  const failures: string[] = [];
  for (let q = 0; q < Number(process.env.QUERIES ?? 1500) && failures.length < 5; q++) {
    const cursorDoc = rand() < 0.8 ? pick(docs) : undefined;
    const orderBy = randomOrder();
    const options: FindOptions = { where: randomWhere(cursorDoc), orderBy, limit: 1 + Math.floor(rand() * 25) };
    if (cursorDoc) {
      const after: Record<string, Scalar> = {};
      for (const [field] of orderBy) {
        const v = cursorDoc[field];
        if (v !== null && typeof v === 'object') continue; // not a Scalar: no cursor holds one
        if (v !== undefined || rand() < 0.5) after[field] = (v === undefined ? null : v) as Scalar;
      }
      options.after = after;
    }
    if (rand() < 0.4) options.fields = ['a'];
    const got = (await coll.find(options)).map((d) => d._id);
    const want = naive(docs, options);
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      failures.push(`${JSON.stringify(options)}\n  got  ${JSON.stringify(got)}\n  want ${JSON.stringify(want)}`);
    }
  }
  await store.close();
  assert.equal(failures, [], failures.join('\n'));
});

test.run();
