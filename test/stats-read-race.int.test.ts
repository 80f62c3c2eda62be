// A stats read seeks the deliverability documents one span class after another
// (apps/services/deliverability-stats.ts, emailsActiveIn). A document's span class only grows as
// its outcomes come (lastAt moves on), so a document the read has already summed in a lower
// class, and that the live processor updates before the read reaches a higher class, is met
// again: the read skips it, so that one recipient is counted once in an answer.
// Driven through GET /v1/projects/:id/stats on the real embedded stores; the report is applied
// by the live path of the projection (DELIVERABILITY_PROJECTION.apply) at a chosen moment of the
// read (after its first seek), as the deliverability processor would apply it then.
import { randomBytes } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { DELIVERABILITY_PROJECTION } from '../apps/services/projection-registry.ts';
import { emailStreamId } from '../domain/email/events.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import type { DeliverabilityEmail } from '../projections/deliverability.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { accepted, attempted, outcome, toNewEvent } from './support/email-events.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

const test = suite('stats: a read racing the deliverability processor');
let t: TestApp;
let owner: Caller;
let projectId = '';
const emailId = 'em_review_race';
const stream = emailStreamId(emailId);
const T0 = '2026-11-01T10:00:00.000Z';

async function applyNew(): Promise<void> {
  const all = await t.stores.events.readStream(stream);
  for (const event of all) await DELIVERABILITY_PROJECTION.apply(t.stores.documents, t.stores.events, event);
}

test.before(async () => {
  t = await startTestApp({}, {});
  owner = await newCaller(t, `owner-${randomBytes(3).toString('hex')}@example.test`);
  ({ projectId } = await workspaceWithProject(t, owner, 'production'));
  const admission = accepted({ emailId, projectId, occurredAt: T0, cc: [], ccAddresses: [], bccCount: 0, recipientCount: 1 });
  await t.stores.events.append(stream, [admission, attempted([outcome(0, 'sent')], { occurredAt: '2026-11-01T10:00:02.000Z' })].map(toNewEvent), { expectedRevision: 'no_stream' });
  await applyNew();
});

test.after(async () => {
  await t.close();
});

/** The API's document store, but `step` runs once after the first page the stats read gets from the deliverability collection. */
function afterFirstStatsPage(documents: DocumentStore, step: () => Promise<void>): DocumentStore {
  let done = false;
  return new Proxy(documents, {
    get(target, property) {
      if (property === 'collection') {
        return (name: string) => {
          const collection = target.collection(name);
          if (name !== COLLECTIONS.deliverability) return collection;
          return new Proxy(collection, {
            get(c, p) {
              if (p === 'find') {
                return async (...args: Parameters<typeof c.find>) => {
                  const page = await c.find(...args);
                  if (!done && page.length > 0) {
                    done = true;
                    await step();
                  }
                  return page;
                };
              }
              const value = Reflect.get(c, p);
              return typeof value === 'function' ? value.bind(c) : value;
            },
          });
        };
      }
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

test('a recipient is counted once in one answer, even when its email gets a report while the read runs', async () => {
  const original = t.ctx.documents;
  let moved = false;
  // Two hours after admission the recipient complains: the email's span class goes from 0 (≤ 1 h) to 1 (≤ 4 h).
  t.ctx.documents = afterFirstStatsPage(original, async () => {
    await t.stores.events.append(stream, [toNewEvent({
      type: 'RecipientReported',
      data: {
        reportId: 'arf-1', recipientIndex: 0, address: 'ann@example.test', outcome: 'complained', format: 'arf', status: null,
        diagnosticCode: null, reason: 'abuse report', complaintType: 'abuse', occurredAt: '2026-11-01T12:00:00.000Z',
      },
    })], { expectedRevision: 1 });
    await applyNew();
    const doc = await t.stores.documents.collection<DeliverabilityEmail>(COLLECTIONS.deliverability).get(emailId);
    moved = doc?.span === 1;
  });
  try {
    const response = await call(t, 'GET', `/v1/projects/${projectId}/stats?from=2026-11-01T09:00:00Z&to=2026-11-01T13:00:00Z&granularity=hour`, { as: owner });
    assert.is(response.statusCode, 200, response.body);
    assert.ok(moved, 'the report was applied during the read and moved the email to the next span class');
    const { totals } = response.json();
    assert.is(totals.accepted, 1, `one recipient was accepted; the answer says ${totals.accepted} (totals ${JSON.stringify(totals)})`);
    assert.is(totals.sent, 1, 'one recipient was sent');
    assert.ok(totals.complaint_rate === null || totals.complaint_rate <= 1);
  } finally {
    t.ctx.documents = original;
  }
  // Read again after the fact: once.
  const settled = await call(t, 'GET', `/v1/projects/${projectId}/stats?from=2026-11-01T09:00:00Z&to=2026-11-01T13:00:00Z&granularity=hour`, { as: owner });
  assert.is(settled.json().totals.accepted, 1);
  assert.is(settled.json().totals.complained, 1, 'the complaint is counted once applied');
});

test.run();
