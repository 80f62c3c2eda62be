// One email is charged once to the monthly allowance, also across a UTC month's end (spec,
// Limits: idempotent replays add no monthly usage). Two attempts of one request (same
// Idempotency-Key, same body) in flight either side of midnight UTC on the month's last day
// admit one email, charged in one month only; so does a retry after the turn of an attempt
// whose charge was made and whose email failed to be stored, also in a process that had folded
// the month before earlier; and a charge at the month's last instant after one under the same
// email id in the next month adds nothing.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openServices, openStores, type Stores } from '../apps/runtime.ts';
import type { Services } from '../apps/services/services.ts';
import { admitEmail, emailIdFor, type AdmissionDeps, type Sender } from '../apps/services/admission.ts';
import { connectDomain, createDomain, markDomainVerified } from '../apps/services/management/domains.ts';
import { createProject } from '../apps/services/management/projects.ts';
import { createWorkspace, setWorkspaceActivation } from '../apps/services/management/workspaces.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { normalizeSendRequest } from '../domain/email/send-request.ts';
import { DEFAULT_ALLOWANCES } from '../domain/usage/quota.ts';
import { loadConfig } from '../infra/config.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import { secretsOf } from './support/secrets.ts';

const test = suite('usage across a month\'s end');
let dir: string;
let stores: Stores;
let sender: Sender;
const opened: Services[] = [];

test.before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'relay-usage-month-'));
  stores = await openStores(loadConfig({ RELAY_DATA_DIR: dir }));
  await prepareStores(stores.documents);
  const now = new Date('2026-11-30T12:00:00.000Z');
  const owner = { _id: 'usr_month', email: 'month@example.test', passwordHash: 'x', createdAt: now.toISOString() };
  const workspaceId = (await createWorkspace(stores.documents, owner, 'Month', now)).workspace._id;
  await setWorkspaceActivation(stores.documents, workspaceId, true, now);
  const project = await createProject(stores.documents, { workspaceId, name: 'month', environment: 'production' }, now);
  const domain = await createDomain(stores.documents, { workspaceId, name: 'month.example.test' }, now, await secretsOf(dir));
  await markDomainVerified(stores.documents, domain._id, 'test fixture', now);
  await connectDomain(stores.documents, domain._id, project._id);
  sender = { keyId: 'key_month', projectId: project._id, workspaceId, environment: 'production', allowances: DEFAULT_ALLOWANCES };
});

test.after(async () => {
  for (const services of opened) await services.close();
  await stores.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The services of one API process, on the shared stores or on `events` wrapping them. */
async function apiProcess(events: EventStore = stores.events): Promise<Services> {
  const services = await openServices(loadConfig({ RELAY_DATA_DIR: dir }), { events, documents: stores.documents });
  opened.push(services);
  return services;
}

const depsAt = (services: Services, iso: string): AdmissionDeps => ({
  emails: services.emails, documents: stores.documents, rateLimits: services.rateLimits, usage: services.usage, secrets: services.secrets, now: () => new Date(iso),
});

const body = (subject: string) => ({ from: 'sender@month.example.test', to: 'ann@month.example.test', subject, text: 'once' });
const attempt = (services: Services, iso: string, idempotencyKey: string, subject: string) =>
  admitEmail(depsAt(services, iso), sender, { body: body(subject), idempotencyKey, send: normalizeSendRequest(body(subject)), origin: { correlationId: iso, causationId: iso } });

/** Recipients charged to the workspace in November and in December. */
async function charged(services: Services): Promise<[number, number]> {
  return [
    (await services.usage.usage(sender.workspaceId, new Date('2026-11-15T00:00:00Z'))).workspaceRecipients,
    (await services.usage.usage(sender.workspaceId, new Date('2026-12-15T00:00:00Z'))).workspaceRecipients,
  ];
}

/** The event store, except that the first `count` reads of `streamId` wait until all of them arrived (as in admission-race). */
function withReadBarrier(events: EventStore, streamId: string, count: number): EventStore {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return new Proxy(events, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property !== 'readStream') return typeof value === 'function' ? value.bind(target) : value;
      return async (id: string, options?: Parameters<EventStore['readStream']>[1]) => {
        const read = await target.readStream(id, options);
        if (id === streamId && arrived < count) {
          if (++arrived === count) open();
          await opened;
        }
        return read;
      };
    },
  });
}

/** The event store, except that the first append to `streamId` fails (a lost connection). */
function withFailedAppend(events: EventStore, streamId: string): EventStore {
  let failed = false;
  return new Proxy(events, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property !== 'append') return typeof value === 'function' ? value.bind(target) : value;
      return async (...args: Parameters<EventStore['append']>) => {
        if (args[0] === streamId && !failed) {
          failed = true;
          throw new Error('connection lost');
        }
        return target.append(...args);
      };
    },
  });
}

test('two attempts of one request either side of midnight UTC: one email, charged once in all', async () => {
  const before = await charged(await apiProcess());
  const key = 'month-end-race';
  const emailId = emailIdFor(sender.projectId, key);
  const api = await apiProcess(withReadBarrier(stores.events, emailStreamId(emailId), 2));
  const results = await Promise.all([
    attempt(api, '2026-11-30T23:59:59.900Z', key, 'race'),
    attempt(api, '2026-12-01T00:00:00.100Z', key, 'race'),
  ]);
  assert.equal(results.map((r) => r.id), [emailId, emailId]);
  assert.is(results.filter((r) => r.replayed).length, 1, 'one attempt admitted the email, the other is its replay');
  assert.equal((await stores.events.readStream(emailStreamId(emailId))).map((e) => e.type), ['EmailAccepted']);
  const [november, december] = await charged(api);
  assert.is(november - before[0] + (december - before[1]), 1, `one recipient: charged ${november - before[0]} in November and ${december - before[1]} in December`);
});

test('a retry in December of a November attempt whose email failed to be stored adds nothing to December, also in a process that folded November before that charge', async () => {
  const other = await apiProcess();
  await attempt(other, '2026-11-30T12:00:00.000Z', 'earlier', 'earlier');
  const key = 'month-end-failed';
  const emailId = emailIdFor(sender.projectId, key);
  const failing = await apiProcess(withFailedAppend(stores.events, emailStreamId(emailId)));
  const before = await charged(other);
  try {
    await attempt(failing, '2026-11-30T23:59:59.950Z', key, 'failed');
    assert.unreachable('the email append failed');
  } catch (error) {
    assert.match((error as Error).message, /connection lost/);
  }
  assert.equal(await stores.events.readStream(emailStreamId(emailId)), [], 'no email, its charge made');
  const retried = await attempt(other, '2026-12-02T09:00:00.000Z', key, 'failed');
  assert.equal([retried.id, retried.replayed], [emailId, false]);
  assert.equal((await stores.events.readStream(emailStreamId(emailId))).map((e) => e.type), ['EmailAccepted']);
  const [november, december] = await charged(other);
  assert.equal([november - before[0], december - before[1]], [1, 0], 'charged in November only');
  // Another request in December is charged as always.
  await attempt(other, '2026-12-02T09:00:01.000Z', 'december', 'december');
  assert.is((await charged(other))[1] - before[1], 1);
});

test('a charge at November\'s last instant after a December one under the same email id adds nothing', async () => {
  const api = await apiProcess();
  const before = await charged(api);
  const charge = (iso: string) => api.usage.charge({
    workspaceId: sender.workspaceId, emailId: 'em_month_reversed', fingerprint: 'f', apiKeyId: sender.keyId, developmentKey: false, recipients: 2,
    allowances: DEFAULT_ALLOWANCES, at: new Date(iso), origin: { correlationId: iso, causationId: iso }, idempotent: true,
  });
  await Promise.all([charge('2026-12-01T00:00:00.020Z'), charge('2026-11-30T23:59:59.990Z')]);
  const [november, december] = await charged(api);
  assert.is(november - before[0] + (december - before[1]), 2, `charged ${november - before[0]} in November and ${december - before[1]} in December`);
});

test.run();
