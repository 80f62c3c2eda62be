// The idempotency race made to happen: 50 admissions of one request with one Idempotency-Key
// all read the email's (empty) stream before any of them appends, held at a barrier in front
// of the event store. Only the store's expected-revision check can then keep the stream at
// one admission; with `expectedRevision: 'any'` every one of them would append.
// With two bodies under the key, the losers are 409 idempotency_conflict: they are not charged
// (spec, Limits: quotas count accepted recipients), whichever body wins the allowance covers it,
// and none of them removes the content key the admitted email is sealed with.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openServices, openStores, type Stores } from '../apps/runtime.ts';
import { admitEmail, emailIdFor, type Admission, type AdmissionDeps, type Sender } from '../apps/services/admission.ts';
import { openContent } from '../apps/services/content-vault.ts';
import type { SealedContent } from '../domain/email/events.ts';
import { RelayError } from '../domain/errors.ts';
import { connectDomain, createDomain, markDomainVerified } from '../apps/services/management/domains.ts';
import { createProject } from '../apps/services/management/projects.ts';
import { createWorkspace, setWorkspaceActivation } from '../apps/services/management/workspaces.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { normalizeSendRequest } from '../domain/email/send-request.ts';
import { loadConfig } from '../infra/config.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import { DEFAULT_ALLOWANCES } from '../domain/usage/quota.ts';
import { secretsOf } from './support/secrets.ts';

const test = suite('admission race');
const PARALLEL = 50;

interface Context { dir: string; stores: Stores; sender: Sender }
const ctx = {} as Context;

test.before(async () => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-race-'));
  ctx.stores = await openStores(loadConfig({ RELAY_DATA_DIR: ctx.dir }));
  await prepareStores(ctx.stores.documents);
  const now = new Date();
  const owner = { _id: 'usr_race', email: 'race@example.test', passwordHash: 'x', createdAt: now.toISOString() };
  const workspaceId = (await createWorkspace(ctx.stores.documents, owner, 'Race', now)).workspace._id;
  await setWorkspaceActivation(ctx.stores.documents, workspaceId, true, now);
  const project = await createProject(ctx.stores.documents, { workspaceId, name: 'race', environment: 'production' }, now);
  const domain = await createDomain(ctx.stores.documents, { workspaceId, name: 'race.example.test' }, now, await secretsOf(ctx.dir));
  await markDomainVerified(ctx.stores.documents, domain._id, 'test fixture', now);
  await connectDomain(ctx.stores.documents, domain._id, project._id);
  ctx.sender = { keyId: 'key_race', projectId: project._id, workspaceId, environment: 'production', allowances: DEFAULT_ALLOWANCES };
});

test.after(async () => {
  await ctx.stores.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

/** The event store, except that the first `count` reads of `streamId` wait until all of them arrived. */
function withReadBarrier(events: EventStore, streamId: string, count: number): EventStore & { held: () => number } {
  let arrived = 0;
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return new Proxy(events, {
    get(target, property) {
      if (property === 'held') return () => arrived;
      if (property !== 'readStream') {
        const value = Reflect.get(target, property, target);
        // Adapters keep private fields: their methods must run on the adapter itself.
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return async (id: string, options?: Parameters<EventStore['readStream']>[1]) => {
        const read = await target.readStream(id, options);
        if (id === streamId && arrived < count) {
          if (++arrived === count) open();
          await opened;
        }
        return read;
      };
    },
  }) as EventStore & { held: () => number };
}

test(`${PARALLEL} admissions that all read the empty stream first: one EmailAccepted, one id, one charge`, async () => {
  const idempotencyKey = 'race-key';
  const emailId = emailIdFor(ctx.sender.projectId, idempotencyKey);
  const events = withReadBarrier(ctx.stores.events, emailStreamId(emailId), PARALLEL);
  const services = await openServices(loadConfig({ RELAY_DATA_DIR: ctx.dir }), { events, documents: ctx.stores.documents });
  const deps: AdmissionDeps = { emails: services.emails, documents: ctx.stores.documents, rateLimits: services.rateLimits, usage: services.usage, secrets: services.secrets, now: () => new Date() };
  const body = { from: 'sender@race.example.test', to: 'ann@race.example.test', subject: 'Race', text: 'one of fifty' };
  const send = normalizeSendRequest(body);
  try {
    const results = await Promise.all(Array.from({ length: PARALLEL }, (_, i) =>
      admitEmail(deps, ctx.sender, { body, idempotencyKey, send, origin: { correlationId: `req-${i}`, causationId: `req-${i}` } })));
    assert.is(events.held(), PARALLEL, 'every admission read the stream before any appended');
    assert.equal(new Set(results.map((r) => r.id)), new Set([emailId]));
    assert.is(results.filter((r) => !r.replayed).length, 1, 'exactly one admission appended');
    const stream = await ctx.stores.events.readStream(emailStreamId(emailId));
    assert.equal(stream.map((e) => e.type), ['EmailAccepted'], 'the stream holds one admission');
    assert.is((await services.usage.usage(ctx.sender.workspaceId, new Date())).workspaceRecipients, 1, 'charged once');
  } finally {
    await services.close();
  }
});

/** `PARALLEL` admissions under one key, alternating two bodies, all reading the empty stream first. */
async function raceTwoBodies(idempotencyKey: string, bodies: [Record<string, unknown>, Record<string, unknown>]) {
  const emailId = emailIdFor(ctx.sender.projectId, idempotencyKey);
  const events = withReadBarrier(ctx.stores.events, emailStreamId(emailId), PARALLEL);
  const services = await openServices(loadConfig({ RELAY_DATA_DIR: ctx.dir }), { events, documents: ctx.stores.documents });
  const deps: AdmissionDeps = { emails: services.emails, documents: ctx.stores.documents, rateLimits: services.rateLimits, usage: services.usage, secrets: services.secrets, now: () => new Date() };
  try {
    const usage = async () => (await services.usage.usage(ctx.sender.workspaceId, new Date())).workspaceRecipients;
    const before = await usage();
    // A key of its own: the rate limit (per key) is not what this is about.
    const sender = { ...ctx.sender, keyId: `key_${idempotencyKey}` };
    const results = await Promise.allSettled(Array.from({ length: PARALLEL }, (_, i) => {
      const body = bodies[i % 2];
      return admitEmail(deps, sender, { body, idempotencyKey, send: normalizeSendRequest(body as never), origin: { correlationId: `req-${i}`, causationId: `req-${i}` } });
    }));
    assert.is(events.held(), PARALLEL, 'every admission read the stream before any appended');
    const admitted = results.filter((r): r is PromiseFulfilledResult<Admission> => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    const wrong = refused.find((r) => !(r.reason instanceof RelayError && r.reason.code === 'idempotency_conflict'));
    assert.is(wrong, undefined, `every refusal is a conflict: ${wrong?.reason}`);
    assert.is(refused.length, PARALLEL / 2, 'the other body\'s requests are conflicts');
    assert.is(admitted.filter((r) => !r.value.replayed).length, 1, 'exactly one admission appended');
    const stream = await ctx.stores.events.readStream(emailStreamId(emailId));
    assert.equal(stream.map((e) => e.type), ['EmailAccepted'], 'the stream holds one admission');
    const content = await openContent(ctx.stores.documents, services.secrets, stream[0].data.content as SealedContent, new Date());
    assert.ok(content, 'the admitted email\'s body opens: no loser removed its key');
    return { charged: (await usage()) - before, admitted: stream[0].data as { subject: string; recipientCount: number } };
  } finally {
    await services.close();
  }
}

test(`${PARALLEL} admissions with one key and two bodies: the 409s add no usage, the email is charged once`, async () => {
  const body = (variant: number) => ({ from: 'sender@race.example.test', to: 'ann@race.example.test', subject: `variant ${variant}`, text: 'two bodies' });
  const { charged, admitted } = await raceTwoBodies('race-two-bodies', [body(0), body(1)]);
  assert.is(charged, 1, `one email of one recipient was admitted (${admitted.subject}); usage grew by ${charged}`);
});

test(`${PARALLEL} admissions with one key, bodies of 1 and 3 recipients: charged 3 whichever is admitted, the 409s nothing more`, async () => {
  const one = { from: 'sender@race.example.test', to: 'ann@race.example.test', subject: 'one', text: 'two bodies' };
  const three = { ...one, subject: 'three', cc: 'bob@race.example.test', bcc: 'cy@race.example.test' };
  const { charged, admitted } = await raceTwoBodies('race-two-sizes', [one, three]);
  assert.ok(charged >= admitted.recipientCount, `the allowance covers the email admitted (${admitted.recipientCount} recipients): charged ${charged}`);
  assert.is(charged, 3);
});

test.run();
