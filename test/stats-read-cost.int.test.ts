// What a stats read costs follows its range, not the project's history after `from`: through the
// real API, over a history the live deliverability processor projected (an email every four
// minutes for three days, a few of them complained about five days after they went out), a one-hour
// range reads about the documents of the emails it holds, at the start of the history as at its
// end. What a read costs is counted as the documents the store visits for it: for each page the
// stats service asks for, the documents in the stretch of the index its query seeks (the index
// whose order it pages in, bounded by the query's equalities on the index's leading fields and
// the range on the next one, as SQLite and MongoDB seek it), up to the page's last document when
// the page is full. Conditions on other fields filter what was visited; they do not spare the visit.
// Documents written before the read model kept span classes (no `span`) still count.
import { randomBytes } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { DELIVERABILITY_PROJECTION } from '../apps/services/projection-registry.ts';
import type { Collection, Condition, DocumentStore, FindOptions, Scalar, Where } from '../infra/ports/document-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { groupCaughtUp } from './support/consumer-groups.ts';
import { appendHistory, generateHistory, type EmailPlan } from './support/history.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

const test = suite('stats read cost follows the range');

const EMAILS = 1_200;
const START = Date.parse('2026-10-01T00:00:00.000Z');
const SPACING_MS = 4 * 60_000;
const HOUR = 3_600_000;
/** Every LATE_EVERY-th accepted email gets a complaint LATE_AFTER_MS after its admission. */
const LATE_EVERY = 100;
const LATE_AFTER_MS = 5 * 24 * HOUR;

let t: TestApp;
let owner: Caller;
let projectId = '';
let plans: EmailPlan[] = [];
const lateComplaints: string[] = [];

test.before(async () => {
  t = await startTestApp({}, { processors: ['deliverability'] });
  owner = await newCaller(t, `owner-${randomBytes(3).toString('hex')}@read-cost.test`);
  ({ projectId } = await workspaceWithProject(t, owner, 'production'));
  plans = generateHistory({ emails: EMAILS, projectId, start: new Date(START).toISOString(), spacingMs: SPACING_MS });
  let accepted = 0;
  for (const plan of plans) {
    const admission = plan.events[0];
    if (admission.type !== 'EmailAccepted' || ++accepted % LATE_EVERY !== 0) continue;
    // A recipient complains once: the first complaint is the one counted.
    if (plan.events.some((e) => e.type === 'RecipientReported' && (e.data as { recipientIndex: number; outcome: string }).recipientIndex === 0 && (e.data as { outcome: string }).outcome === 'complained')) continue;
    const data = admission.data as { toAddresses: string[]; occurredAt: string };
    const occurredAt = new Date(Date.parse(data.occurredAt) + LATE_AFTER_MS).toISOString();
    plan.events.push({
      type: 'RecipientReported',
      data: { reportId: `<late.${plan.emailId}@reports.test>`, recipientIndex: 0, address: data.toAddresses[0], outcome: 'complained', format: 'arf', status: null, diagnosticCode: null, reason: 'complaint (abuse)', complaintType: 'abuse', occurredAt },
    });
    lateComplaints.push(occurredAt);
  }
  const appended = await appendHistory(t.stores.events, plans);
  await groupCaughtUp(t, 'deliverability', appended, 240_000);
});

test.after(async () => {
  await t?.close();
});

const sameOrder = (a: ReadonlyArray<readonly [string, string]>, b: ReadonlyArray<readonly [string, string]>) =>
  a.length === b.length && a.every(([field, direction], i) => field === b[i][0] && direction === b[i][1]);

/** The conditions of `where` an index seeks on: equalities on its leading fields, then one range. */
function seekOf(fields: ReadonlyArray<readonly [string, string]>, where: Where): Where {
  const seek: Where = {};
  for (const [field] of fields) {
    const condition = where[field];
    if (condition === undefined) break;
    if (condition === null || typeof condition !== 'object') {
      seek[field] = condition;
      continue;
    }
    if ('eq' in condition && Object.keys(condition).length === 1) {
      seek[field] = condition;
      continue;
    }
    const range: Condition = {};
    for (const op of ['gt', 'gte', 'lt', 'lte'] as const) if (condition[op] !== undefined) range[op] = condition[op];
    if (Object.keys(range).length > 0) seek[field] = range;
    break;
  }
  return seek;
}

/** Runs `work` with the API's deliverability reads counted: documents returned, documents visited. */
async function countedReads<T>(work: () => Promise<T>): Promise<{ result: T; returned: number; visited: number }> {
  const real = t.ctx.documents;
  let returned = 0;
  let visited = 0;
  const counted = (collection: Collection<any>): Collection<any> => new Proxy(collection, {
    get(target, property) {
      if (property !== 'find') {
        const value = Reflect.get(target, property);
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return async (options: FindOptions = {}) => {
        const found = await target.find(options);
        returned += found.length;
        const index = DELIVERABILITY_PROJECTION.indexes.find((spec) => sameOrder(spec.fields, options.orderBy ?? []));
        // A read in no index's order sorts what it visited: the whole collection.
        if (!index) {
          visited += await target.count();
          return found;
        }
        const stretch = await target.find({ where: seekOf(index.fields, options.where ?? {}), orderBy: options.orderBy, after: options.after as Record<string, Scalar> | undefined, fields: ['_id'], limit: 1_000_000 });
        const full = options.limit !== undefined && found.length === options.limit;
        visited += full ? stretch.findIndex((d) => d._id === found[found.length - 1]._id) + 1 : stretch.length;
        return found;
      };
    },
  });
  t.ctx.documents = new Proxy(real, {
    get(target, property) {
      if (property === 'collection') return (name: string) => (name === COLLECTIONS.deliverability ? counted(target.collection(name)) : target.collection(name));
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  }) as DocumentStore;
  try {
    return { result: await work(), returned, visited };
  } finally {
    t.ctx.documents = real;
  }
}

/** A one-hour range from `from` read through the API: its totals, and the documents it returned and visited. */
async function hour(from: number) {
  const { result, returned, visited } = await countedReads(() =>
    call(t, 'GET', `/v1/projects/${projectId}/stats?from=${new Date(from).toISOString()}&to=${new Date(from + HOUR).toISOString()}&granularity=hour`, { as: owner }));
  assert.is(result.statusCode, 200, result.body);
  return { totals: result.json().totals, returned, visited };
}

/** The emails admitted in [from, from + 1 h). */
const admittedIn = (from: number) => plans.filter((p) => {
  const at = Date.parse((p.events[0].data as { occurredAt: string }).occurredAt);
  return at >= from && at < from + HOUR;
}).length;

const lastAdmitted = START + (EMAILS - 1) * SPACING_MS;
const EARLY = START + 2 * HOUR;
const LATE = Math.floor(lastAdmitted / HOUR) * HOUR - 2 * HOUR;
/** The hour of the first late complaint, after the rest of the history: emails whose instants are five days apart. */
const complaintHour = () => Math.floor(Date.parse(lateComplaints[0]) / HOUR) * HOUR;

test('a one-hour range at the start of a long history visits about the documents of its own emails, not every later one', async () => {
  const early = await hour(EARLY);
  const late = await hour(LATE);
  const held = admittedIn(EARLY);
  assert.ok(held >= 10 && admittedIn(LATE) === held, `both hours hold the same emails (${held}, ${admittedIn(LATE)})`);
  assert.ok(early.totals.accepted > 0 && late.totals.accepted > 0, 'both hours count what their emails reached');
  // Its own emails, those that started in the hour before (outcomes may come up to an hour
  // after their first instant and still be in that span class), and the few whose instants are
  // days apart: not the history after it (more than 1,100 emails).
  const bound = 2 * held + lateComplaints.length + 5;
  assert.ok(early.visited <= bound, `the early hour visited ${early.visited} documents for ${held} emails (at most ${bound})`);
  assert.ok(late.visited <= bound, `the late hour visited ${late.visited} documents for ${held} emails (at most ${bound})`);
  assert.ok(early.returned >= held && early.returned <= early.visited, `it read its ${held} emails (${early.returned})`);
});

test('an outcome days after an email\'s first instant is counted in its own hour, and that hour costs what its emails do', async () => {
  const from = complaintHour();
  const expected = lateComplaints.filter((at) => Date.parse(at) >= from && Date.parse(at) < from + HOUR).length;
  assert.ok(expected >= 1 && admittedIn(from) === 0);
  const read = await hour(from);
  assert.is(read.totals.complained, expected, `the late complaints of ${new Date(from).toISOString()} are counted`);
  const bound = 2 * admittedIn(from) + lateComplaints.length + 5;
  assert.ok(read.visited <= bound, `visited ${read.visited} documents (at most ${bound})`);
});

test('documents written before span classes existed (no span) are still counted', async () => {
  const ranges = [EARLY, LATE, complaintHour()];
  const before = await Promise.all(ranges.map(async (from) => (await hour(from)).totals));
  const emails = t.stores.documents.collection<{ _id: string; span?: number }>(COLLECTIONS.deliverability);
  // The live processor has applied everything (before): nothing else writes these documents now.
  const docs = await emails.find({ where: { projectId }, limit: 1_000_000 });
  for (const { _v, span, ...doc } of docs) assert.ok(await emails.replace(doc, _v), `${doc._id} rewritten in the old shape`);
  assert.is(await emails.count({ projectId, span: { gte: 0 } }), 0, 'no document has a span class any more');
  for (const [i, from] of ranges.entries()) assert.equal((await hour(from)).totals, before[i], `the hour from ${new Date(from).toISOString()}`);
});

test.run();
