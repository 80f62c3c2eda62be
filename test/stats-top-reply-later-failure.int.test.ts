// A failing recipient domain's top_reply counts each failure outcome with the reply that brought
// the recipient there (projections/deliverability.ts, `replies`), at that outcome's instant. A
// recipient whose delivery ended `failed` (delivery_unknown) on day 1 and was hard-bounced by a
// DSN (5.1.1) on day 3 shows delivery_unknown for day 1, not a reply that came two days after the
// range, and over both days each reply once. A document written before `replies` (one reply, the
// latest failure's) is still counted with that reply, and `relay projections rebuild
// deliverability` rewrites it. Driven through the real event store, the live deliverability
// processor, GET /v1/projects/:id/stats and the real CLI.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { emailStreamId } from '../domain/email/events.ts';
import type { DeliverabilityEmail } from '../projections/deliverability.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { accepted, attempted, claimed, deliveryFailed, outcome, toNewEvent } from './support/email-events.ts';
import { waitUntil } from './support/eventually.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';
import { runRelay } from './support/relay-process.ts';

const test = suite('stats: top_reply of a recipient that failed, then bounced later');
const dataDir = mkdtempSync(join(tmpdir(), 'relay-top-reply-'));
let t: TestApp;
let owner: Caller;
let projectId = '';

const DAY1 = '2026-11-01T10:00:00.000Z';
const DAY3 = '2026-11-03T10:00:00.000Z';
const BOTH = ['2026-11-01T00:00:00Z', '2026-11-04T00:00:00Z'] as const;

/** Recipient 0 (at example.test) fails on day 1 and is hard-bounced by a DSN on day 3; the CC (another domain) is sent. */
const history = (emailId: string, cc: string) => [
  accepted({ emailId, projectId, occurredAt: DAY1, cc: [cc], ccAddresses: [cc], bccCount: 0, recipientCount: 2 }),
  claimed({ occurredAt: '2026-11-01T10:00:01.000Z' }),
  // The sender stopped mid-transaction: recipient 0's outcome is unknown (failed); the CC was sent.
  attempted([outcome(1, 'sent', { address: cc })], { occurredAt: '2026-11-01T10:00:02.000Z' }),
  deliveryFailed([0], { failureCode: 'delivery_unknown', reason: 'the sender stopped during the transaction', occurredAt: '2026-11-01T10:00:03.000Z' }),
  // Two days later the smarthost's DSN says the message did go out, and bounced.
  {
    type: 'RecipientReported',
    data: {
      reportId: `dsn-${emailId}`, recipientIndex: 0, address: 'ann@example.test', outcome: 'hard_bounced', format: 'dsn', status: '5.1.1',
      diagnosticCode: 'smtp; 550 5.1.1 user unknown', reason: 'user unknown', complaintType: null, occurredAt: DAY3,
    },
  },
];

test.before(async () => {
  t = await startTestApp({}, { processors: ['deliverability'], dataDir });
  owner = await newCaller(t, `owner-${randomBytes(3).toString('hex')}@example.test`);
  ({ projectId } = await workspaceWithProject(t, owner, 'production'));
  await t.stores.events.append(emailStreamId('em_topreply'), history('em_topreply', 'cc@other.test').map(toNewEvent), { expectedRevision: 'no_stream' });
});

test.after(async () => {
  await t.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function stats(from: string, to: string) {
  const response = await call(t, 'GET', `/v1/projects/${projectId}/stats?from=${from}&to=${to}&granularity=day`, { as: owner });
  assert.is(response.statusCode, 200, response.body);
  return response.json();
}

const failingDomain = (answer: { recipient_domains: Array<{ domain: string }> }, domain: string): any => answer.recipient_domains.find((d) => d.domain === domain);

test('the day of the failure shows the failure\'s own reply, not one that came two days later', async () => {
  await waitUntil(async () => failingDomain(await stats(...BOTH), 'example.test')?.hard_bounced === 1, 'the processor applied the stream', 10_000);
  const day1 = await stats('2026-11-01T00:00:00Z', '2026-11-02T00:00:00Z');
  assert.is(day1.totals.failed, 1);
  assert.is(day1.totals.hard_bounced, 0, 'the bounce came on day 3');
  const domain = failingDomain(day1, 'example.test');
  assert.equal(domain.top_reply, { code: 'delivery_unknown', text: 'the sender stopped during the transaction', count: 1 });
  const day3 = await stats('2026-11-03T00:00:00Z', '2026-11-04T00:00:00Z');
  assert.equal(failingDomain(day3, 'example.test').top_reply, { code: '5.1.1', text: 'smtp; 550 5.1.1 user unknown', count: 1 });
});

test('over both days each reply code is counted as often as it came', async () => {
  const domain = failingDomain(await stats(...BOTH), 'example.test');
  assert.is(domain.failures, 2);
  // One delivery_unknown and one 5.1.1: the top one (by count, then code) came once.
  assert.equal(domain.top_reply, { code: '5.1.1', text: 'smtp; 550 5.1.1 user unknown', count: 1 });
});

test('a document written before replies were kept per outcome counts its one reply, until a rebuild rewrites it', async () => {
  // Another project, so that this email's replies alone are counted.
  const other = await workspaceWithProject(t, owner, 'production');
  const emailId = 'em_topreply_old';
  const events = history(emailId, 'cc@other.test').map((e) => ('projectId' in e.data ? { ...e, data: { ...e.data, projectId: other.projectId } } : e));
  await t.stores.events.append(emailStreamId(emailId), events.map(toNewEvent), { expectedRevision: 'no_stream' });
  const documents = t.stores.documents.collection<DeliverabilityEmail>(COLLECTIONS.deliverability);
  let live: Awaited<ReturnType<typeof documents.get>> = null;
  await waitUntil(async () => (live = await documents.get(emailId))?.streamRevision === events.length - 1, 'the processor applied the stream', 10_000);
  // As an older version wrote it: the latest failure's reply alone.
  const { _v, ...doc } = live!;
  const old = { ...doc, recipients: doc.recipients.map(({ replies, ...r }) => ({ ...r, reply: r.domain === 'example.test' ? { code: '5.1.1', text: 'smtp; 550 5.1.1 user unknown' } : null })) };
  assert.ok(await documents.replace(old, _v), 'the document was replaced by its older form');
  const read = async () => {
    const response = await call(t, 'GET', `/v1/projects/${other.projectId}/stats?from=${BOTH[0]}&to=${BOTH[1]}&granularity=day`, { as: owner });
    assert.is(response.statusCode, 200, response.body);
    return failingDomain(response.json(), 'example.test');
  };
  const before = await read();
  assert.is(before.failures, 2);
  assert.equal(before.top_reply, { code: '5.1.1', text: 'smtp; 550 5.1.1 user unknown', count: 2 }, 'both failures count the one reply it holds');
  const run = await runRelay(['projections', 'rebuild', 'deliverability'], { RELAY_DATA_DIR: dataDir });
  assert.is(run.code, 0, run.stderr);
  const rebuilt = (await documents.get(emailId))!;
  assert.equal(rebuilt.recipients[0].replies, {
    failed: { code: 'delivery_unknown', text: 'the sender stopped during the transaction' },
    hard_bounced: { code: '5.1.1', text: 'smtp; 550 5.1.1 user unknown' },
  });
  assert.not.ok('reply' in rebuilt.recipients[0], 'the rebuilt document holds no reply of the older form');
  assert.equal((await read()).top_reply, { code: '5.1.1', text: 'smtp; 550 5.1.1 user unknown', count: 1 });
});

test.run();
