// Upgrade in place from 798126e (2026-11-28), a version that upgrades cleanly: today's `relay
// start` on a copy of the data directory it left (test/fixtures/upgrade-798126e: its README says
// what the old version was asked and answered) serves every email, timeline, block, key, endpoint,
// template and domain as the old version did, answers the old requests' replays with their
// original answers and no charge, goes on with the deferred mail and the webhook retries it left,
// exports every old event, rebuilds read models that agree, sends anew, and fills what it keeps
// once: the second start fills nothing. A guard for the upgrades to come.
//
// The fixture ages: by the time this runs its bodies may be past their seven days (the deferred
// mail then ends content_expired rather than sent), its month is over (usage is compared within
// this run), and its finished webhook deliveries may be past their thirty (they are not compared).
import { createHash } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { makeTestCa, startHttpsReceiver, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';
import { runRelay, spawnRelay, waitForReady } from './support/relay-process.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';
import { fixtureJson, postSend, restoreFixture, signIn, startUpgraded, type RestoredFixture, type UpgradedRelay } from './support/upgrade-fixtures.ts';

const FIXTURE = 'upgrade-798126e';

interface Send { name: string; key: 'dev' | 'prod'; idempotencyKey: string | null; body: Record<string, unknown>; answer: { id: string; status: string } }
interface Life {
  workspaceId: string;
  hooks: { host: string; port: number };
  endpoints: { all: string; flaky: string; dev: string };
  dev: { projectId: string; apiKey: string };
  prod: { projectId: string; apiKey: string };
  readKey: string;
  revokedKey: string;
  templates: { welcome: string; receipt: string };
  sends: Send[];
  answered: {
    emails: Record<string, any>;
    lists: Record<'dev' | 'prod' | 'read', string[]>;
    suppressions: Array<Record<string, unknown>>;
    suppressionsCsv: string;
    apiKeys: Record<'dev' | 'prod', Array<Record<string, unknown>>>;
    endpoints: Record<'dev' | 'prod', Array<Record<string, unknown>>>;
    templates: Record<'welcome' | 'receipt', Record<string, unknown>>;
    domains: Array<Record<string, unknown>>;
    projects: Array<Record<string, unknown>>;
  };
  exported: Array<{ id: string; streamId: string; revision: number; type: string; data: string }>;
}

interface Ctx {
  life: Life;
  fixture: RestoredFixture;
  ca: TestCa;
  dns: TestDnsServer;
  receiver: HttpsReceiver;
  sink: SmtpSink;
  up: UpgradedRelay;
  cookie: string;
}

const test = suite<Ctx>('upgrade in place from 798126e');

test.before(async (ctx) => {
  ctx.life = fixtureJson<Life>(FIXTURE, 'life.json');
  ctx.fixture = restoreFixture(FIXTURE);
  ctx.ca = makeTestCa();
  ctx.dns = await startDnsServer([{ name: ctx.life.hooks.host, type: 'A', data: '127.0.0.1' }]);
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue([ctx.life.hooks.host]));
  ctx.sink = await startSmtpSink();
  const hook = (port: number) => `${ctx.life.hooks.host}:${port}`;
  ctx.up = await startUpgraded(ctx.fixture.dataDir, {
    RELAY_DELIVERY: 'smtp',
    RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`,
    RELAY_DNS_SERVERS: ctx.dns.address,
    // The endpoints still name the old receiver's port until the test moves them here; a retry
    // that fails there comes again within a second.
    RELAY_WEBHOOK_ALLOW: `${hook(ctx.life.hooks.port)},${hook(ctx.receiver.port)}`,
    RELAY_WEBHOOK_RETRY_SCALE: '0.001',
    NODE_EXTRA_CA_CERTS: ctx.ca.caFile,
  });
  ctx.cookie = await signIn(ctx.up.baseUrl, 'owner@example.com', 'a long local password');
});

test.after(async (ctx) => {
  await ctx.up?.relay.stop();
  await ctx.sink?.close();
  await ctx.receiver?.close();
  await ctx.dns?.close();
  ctx.ca?.remove();
  ctx.fixture?.remove();
});

const keyOf = (life: Life, send: Send) => (send.key === 'dev' ? life.dev : life.prod).apiKey;
const projectOf = (life: Life, send: Send) => (send.key === 'dev' ? life.dev : life.prod).projectId;

async function get(ctx: Ctx, path: string, auth?: string): Promise<any> {
  const response = await fetch(`${ctx.up.baseUrl}${path}`, { headers: auth ? { authorization: `Bearer ${auth}` } : { cookie: ctx.cookie } });
  assert.is(response.status, 200, `GET ${path}: ${response.status}`);
  return response.headers.get('content-type')?.startsWith('application/json') ? response.json() : response.text();
}

/** What the old version answered, field by field, is what today's answers (today's may add fields). */
function sameAsBefore(before: unknown, now: unknown, where: string): void {
  if (before !== null && typeof before === 'object' && !Array.isArray(before)) {
    assert.ok(now !== null && typeof now === 'object', `${where}: ${JSON.stringify(now)}`);
    for (const [field, value] of Object.entries(before)) sameAsBefore(value, (now as Record<string, unknown>)[field], `${where}.${field}`);
    return;
  }
  if (Array.isArray(before)) {
    assert.ok(Array.isArray(now) && now.length === before.length, `${where}: ${JSON.stringify(before)} became ${JSON.stringify(now)}`);
    before.forEach((value, i) => sameAsBefore(value, (now as unknown[])[i], `${where}[${i}]`));
    return;
  }
  assert.equal(now, before, where);
}

/** An email as it reads whatever happened since: what it was, not the state of its webhooks. */
const STABLE = ['id', 'fromAddress', 'subject', 'testMode', 'createdAt', 'to', 'cc', 'reply_to', 'metadata', 'tags'] as const;

test('the first start filled what this version keeps beside the documents, once', ({ up }) => {
  assert.match(up.relay.output(), /"msg":"filled field columns of doc_\w+"/);
});

test('every email reads as the old version answered: fields, recipients, timeline', async (ctx) => {
  for (const send of ctx.life.sends) {
    const before = ctx.life.answered.emails[send.answer.id];
    for (const [who, now] of [['key', await get(ctx, `/v1/emails/${send.answer.id}`, keyOf(ctx.life, send))], ['dashboard', await get(ctx, `/v1/projects/${projectOf(ctx.life, send)}/emails/${send.answer.id}`)]]) {
      for (const field of STABLE) sameAsBefore(before[field], now[field], `${send.name} (${who}).${field}`);
      assert.equal(now.recipients.map((r: { address: string }) => r.address), before.recipients.map((r: { address: string }) => r.address), `${send.name} (${who}).recipients`);
      sameAsBefore(before.events, now.events.slice(0, before.events.length), `${send.name} (${who}).events`);
    }
  }
});

test('the lists hold the old emails in the old order', async (ctx) => {
  for (const [name, key] of [['dev', ctx.life.dev.apiKey], ['prod', ctx.life.prod.apiKey], ['read', ctx.life.readKey]] as const) {
    const ids: string[] = (await get(ctx, '/v1/emails?limit=100', key)).emails.map((e: { id: string }) => e.id);
    const old = ctx.life.answered.lists[name];
    assert.equal(ids.filter((id) => old.includes(id)), old, `${name}: ${JSON.stringify(ids)}`);
  }
  for (const [name, project] of [['dev', ctx.life.dev.projectId], ['prod', ctx.life.prod.projectId]] as const) {
    const ids: string[] = (await get(ctx, `/v1/projects/${project}/emails?limit=100`)).emails.map((e: { id: string }) => e.id);
    assert.equal(ids.filter((id) => ctx.life.answered.lists[name].includes(id)), ctx.life.answered.lists[name], `dashboard ${name}`);
  }
});

test('blocks, keys, endpoints, templates, domains and projects read as before', async (ctx) => {
  const { life } = ctx;
  sameAsBefore(life.answered.suppressions, (await get(ctx, `/v1/workspaces/${life.workspaceId}/suppressions?limit=100`)).suppressions, 'suppressions');
  assert.is(await get(ctx, `/v1/workspaces/${life.workspaceId}/suppressions/export`), life.answered.suppressionsCsv);
  sameAsBefore(life.answered.apiKeys.dev, (await get(ctx, `/v1/projects/${life.dev.projectId}/api-keys`)).apiKeys, 'dev api keys');
  sameAsBefore(life.answered.apiKeys.prod, (await get(ctx, `/v1/projects/${life.prod.projectId}/api-keys`)).apiKeys, 'prod api keys');
  sameAsBefore(life.answered.endpoints.dev, (await get(ctx, `/v1/projects/${life.dev.projectId}/webhook-endpoints`)).endpoints, 'dev endpoints');
  sameAsBefore(life.answered.endpoints.prod, (await get(ctx, `/v1/projects/${life.prod.projectId}/webhook-endpoints`)).endpoints, 'prod endpoints');
  sameAsBefore(life.answered.templates.welcome, await get(ctx, `/v1/templates/${life.templates.welcome}?projectId=${life.dev.projectId}`), 'welcome');
  sameAsBefore(life.answered.templates.receipt, await get(ctx, `/v1/templates/${life.templates.receipt}?projectId=${life.prod.projectId}`), 'receipt');
  sameAsBefore(life.answered.domains, (await get(ctx, `/v1/workspaces/${life.workspaceId}/domains`)).domains, 'domains');
  sameAsBefore(life.answered.projects, (await get(ctx, `/v1/workspaces/${life.workspaceId}/projects`)).projects, 'projects');
  // The operator's allowance set by the old version holds.
  assert.is((await get(ctx, `/v1/workspaces/${life.workspaceId}/usage`)).recipients.limit, 4000);
});

test('the keys work as they did: the revoked one is refused, the read-only one reads', async (ctx) => {
  const refused = await postSend(ctx.up.baseUrl, ctx.life.revokedKey, { from: 'hello@example.com', to: 'owner@example.com', subject: 'x', text: 'x' });
  assert.is(refused.status, 401);
  const ids = (await get(ctx, '/v1/emails?limit=100', ctx.life.readKey)).emails.map((e: { id: string }) => e.id);
  assert.ok(ids.length >= ctx.life.answered.lists.read.length);
});

test('a replay of every old request gets its original answer, and no charge', async (ctx) => {
  const used = async () => (await get(ctx, `/v1/workspaces/${ctx.life.workspaceId}/usage`)).recipients.used as number;
  const before = await used();
  for (const send of ctx.life.sends.filter((s) => s.idempotencyKey !== null)) {
    const replay = await postSend(ctx.up.baseUrl, keyOf(ctx.life, send), send.body, send.idempotencyKey!);
    assert.is(replay.status, 202, `${send.name}: ${JSON.stringify(replay.body)}`);
    assert.equal(replay.body, send.answer, send.name);
  }
  assert.is(await used(), before);
});

test('relay events export reads every old event as the old version exported it', async (ctx) => {
  const run = await runRelay(['events', 'export'], { RELAY_DATA_DIR: ctx.fixture.dataDir });
  assert.is(run.code, 0, run.stderr);
  const now = new Map(run.stdout.trim().split('\n').map((line) => {
    const event = JSON.parse(line);
    return [event.id, { id: event.id, streamId: event.streamId, revision: event.revision, type: event.type, data: createHash('sha256').update(JSON.stringify(event.data)).digest('hex') }];
  }));
  for (const event of ctx.life.exported) assert.equal(now.get(event.id), event, `${event.type} ${event.id}`);
});

test('the webhook deliveries left pending go on, under their event ids, once their endpoint is moved', async (ctx) => {
  const pending = Object.values(ctx.life.answered.emails).flatMap((email) => email.webhookDeliveries.filter((w: { status: string }) => w.status === 'pending').map((w: { id: string; eventId: string }) => ({ ...w, emailId: email.id })));
  assert.ok(pending.length > 0, 'the fixture left deliveries pending');
  const moved = await fetch(`${ctx.up.baseUrl}/v1/webhook-endpoints/${ctx.life.endpoints.flaky}`, {
    method: 'PATCH', headers: { cookie: ctx.cookie, 'content-type': 'application/json' }, body: JSON.stringify({ url: `https://${ctx.life.hooks.host}:${ctx.receiver.port}/flaky` }),
  });
  assert.is(moved.status, 200, await moved.text());
  const send = (id: string) => ctx.life.sends.find((s) => s.answer.id === id)!;
  await waitUntil(async () => {
    for (const p of pending) {
      const email = await get(ctx, `/v1/emails/${p.emailId}`, keyOf(ctx.life, send(p.emailId)));
      if (email.webhookDeliveries.find((w: { id: string }) => w.id === p.id)?.status !== 'succeeded') return false;
    }
    return true;
  }, 'every delivery left pending succeeded', 30_000);
  const received = new Set(ctx.receiver.requests.filter((r) => r.path === '/flaky').map((r) => r.headers['relay-event-id']));
  for (const p of pending) assert.ok(received.has(p.eventId), `${p.eventId} was posted under its id`);
});

test('the deferred mail goes on: delivered, or, past its body\'s seven days, failed content_expired', async (ctx) => {
  for (const name of ['deferred', 'mixed-dev']) {
    const send = ctx.life.sends.find((s) => s.name === name)!;
    let email: any;
    await waitUntil(async () => {
      email = await get(ctx, `/v1/emails/${send.answer.id}`, keyOf(ctx.life, send));
      return email.recipients.every((r: { status: string }) => r.status !== 'delayed' && r.status !== 'processing' && r.status !== 'queued');
    }, `${name} is no longer waiting`, 60_000);
    const deferred = email.recipients.find((r: { address: string }) => r.address.startsWith('defer'));
    if (deferred.status === 'sent') assert.ok(ctx.sink.messages.some((m) => m.rcptTo.some((r) => r.address === deferred.address)), `${deferred.address} reached the smarthost`);
    else assert.is(email.failureCode, 'content_expired', JSON.stringify(email));
  }
});

test('new sends go out and are charged', async (ctx) => {
  const used = async () => (await get(ctx, `/v1/workspaces/${ctx.life.workspaceId}/usage`)).recipients.used as number;
  const before = await used();
  const direct = await postSend(ctx.up.baseUrl, ctx.life.dev.apiKey, { from: 'hello@example.com', to: 'owner@example.com', subject: 'After the upgrade', text: 'new' }, 'after-upgrade-1');
  const templated = await postSend(ctx.up.baseUrl, ctx.life.prod.apiKey, { from: 'hello@example.com', to: 'new@example.org', template: 'receipt', variables: { order: 'N-1', total: 1 } }, 'after-upgrade-2');
  assert.is(direct.status, 202, JSON.stringify(direct.body));
  assert.is(templated.status, 202, JSON.stringify(templated.body));
  await waitUntil(async () => (await get(ctx, `/v1/emails/${direct.body.id}`, ctx.life.dev.apiKey)).status === 'sent'
    && (await get(ctx, `/v1/emails/${templated.body.id}`, ctx.life.prod.apiKey)).status === 'sent', 'the new sends are sent', 30_000);
  assert.ok(ctx.sink.messages.some((m) => m.raw.toString('latin1').includes('Your receipt N-1')), 'the edited template rendered the new send');
  assert.is(await used(), before + 2);
});

test('rebuilt read models agree with the ones the upgrade kept', async (ctx) => {
  const read = async () => Promise.all(ctx.life.sends.map(async (s) => ({ ...(await get(ctx, `/v1/emails/${s.answer.id}`, keyOf(ctx.life, s))), webhookDeliveries: null })));
  const kept = await read();
  const stats = async () => get(ctx, `/v1/projects/${ctx.life.prod.projectId}/stats?from=2026-11-01T00:00:00.000Z&to=2026-12-01T00:00:00.000Z&granularity=day`);
  const keptStats = await stats();
  for (const collection of ['emails', 'deliverability']) {
    const run = await runRelay(['projections', 'rebuild', collection], { RELAY_DATA_DIR: ctx.fixture.dataDir });
    assert.is(run.code, 0, run.stderr);
  }
  assert.equal(await read(), kept);
  assert.equal(await stats(), keptStats);
});

test('a second start fills nothing and is ready as a normal start is', async (ctx) => {
  const stopped = await ctx.up.relay.stop();
  assert.is(stopped.code, 0);
  const again = spawnRelay(['start'], ctx.up.env);
  ctx.up = { ...ctx.up, relay: again };
  await waitForReady(ctx.up.baseUrl, again, 60_000);
  assert.not.match(again.output(), /field columns/, again.output());
});

test.run();
