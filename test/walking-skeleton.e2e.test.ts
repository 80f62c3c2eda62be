// One email end to end on the embedded default, through the real processes a newcomer
// runs: scripted setup (CLI) → `relay start` → POST /v1/emails over HTTP → read back.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { groupOf, eventsTopic } from '../apps/pipeline/topics.ts';
import { openStores } from '../apps/runtime.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { PROCESSORS } from '../apps/processors/registry.ts';
import { loadConfig } from '../infra/config.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';

const test = suite('walking skeleton (embedded, real processes)');

const dataDir = mkdtempSync(join(tmpdir(), 'relay-e2e-'));
let relay: RelayProcess;
let baseUrl = '';
let apiKey = '';
/** A production key of an activated workspace: its rate limit (100/s) lets bursts through. */
let liveKey = '';

test.before(async () => {
  const env = { RELAY_DATA_DIR: dataDir };
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'owner@example.test', '--password', 'a long enough password', '--workspace', 'Acme', '--project', 'web', '--domain', 'example.test'], env);
  assert.is(setup.code, 0, setup.stderr);
  apiKey = JSON.parse(setup.stdout).apiKey;
  assert.match(apiKey, /^rr_test_/);
  const live = await runRelay(['setup', '--json', '--trust-domain', '--email', 'owner@example.test', '--workspace', 'Acme Live', '--project', 'live', '--environment', 'production', '--activate', '--domain', 'example.test'], env);
  assert.is(live.code, 0, live.stderr);
  liveKey = JSON.parse(live.stdout).apiKey;
  assert.match(liveKey, /^rr_live_/);
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  relay = spawnRelay(['start'], { ...env, PORT: String(port) });
  await waitForReady(baseUrl, relay);
});

test.after(async () => {
  await relay?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const auth = (key = apiKey) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' });

test('send → 202 queued → the detail reads back with every EmailDetail field, built by the projector', async () => {
  const sent = await fetch(`${baseUrl}/v1/emails`, {
    method: 'POST',
    headers: auth(),
    body: JSON.stringify({ from: 'Acme <hello@example.test>', to: 'ann@example.test', bcc: 'secret@example.test', subject: 'Welcome', text: 'Hi Ann', tags: { kind: 'welcome' }, metadata: { userId: 7 } }),
  });
  assert.is(sent.status, 202);
  const result: any = await sent.json();
  assert.equal(Object.keys(result).sort(), ['id', 'status', 'test_mode']);
  assert.is(result.status, 'queued');
  assert.is(result.test_mode, true);

  // The list reads the read model only, so seeing the email there proves the forwarder
  // and the projector ran as consumers of the log.
  await waitUntil(async () => {
    const list: any = await (await fetch(`${baseUrl}/v1/emails`, { headers: auth() })).json();
    return list.emails.some((e: { id: string }) => e.id === result.id);
  }, 'the projector has projected the email');

  // The sender (outbox transport, the embedded default) delivers it.
  let detail: any;
  await waitUntil(async () => {
    const detailResponse = await fetch(`${baseUrl}/v1/emails/${result.id}`, { headers: auth() });
    assert.is(detailResponse.status, 200);
    detail = await detailResponse.json();
    return detail.status === 'sent';
  }, 'the sender has sent the email');
  for (const field of ['id', 'fromAddress', 'subject', 'status', 'testMode', 'failureCode', 'createdAt', 'sentAt', 'deliveredAt', 'to', 'cc', 'reply_to', 'providerMessageId', 'recipients', 'webhookDeliveries', 'metadata', 'tags', 'events']) {
    assert.ok(field in detail, `EmailDetail.${field} is present`);
  }
  assert.is(detail.id, result.id);
  assert.is(detail.fromAddress, 'hello@example.test');
  assert.equal(detail.to, ['ann@example.test']);
  assert.equal(detail.cc, []);
  assert.is(detail.reply_to, null);
  assert.ok(detail.sentAt >= detail.createdAt);
  assert.is(detail.deliveredAt, null);
  assert.is(detail.providerMessageId, `${result.id}@example.test`);
  assert.is(detail.failureCode, null);
  assert.equal(detail.recipients.map((r: { address: string; status: string }) => [r.address, r.status]), [['ann@example.test', 'sent']]);
  assert.equal(detail.tags, { kind: 'welcome' });
  assert.equal(detail.metadata, { userId: 7 });
  assert.equal(detail.events.map((e: { type: string }) => e.type), ['email.queued', 'email.processing', 'email.sent']);
  const raw = JSON.stringify(detail);
  assert.not.ok(raw.includes('secret@example.test'), 'BCC never appears');
  assert.not.ok(raw.includes('Hi Ann'), 'the body never appears');
});

test('/healthz is live and /readyz reports the stores and every in-process part with its liveness', async () => {
  const live = await fetch(`${baseUrl}/healthz`);
  assert.is(live.status, 200);
  const ready = await fetch(`${baseUrl}/readyz`);
  assert.is(ready.status, 200);
  const body = (await ready.json()) as { status: string; checks: Record<string, boolean>; parts: Record<string, { state: string; ready: boolean; lastProgressAt: string }> };
  assert.is(body.status, 'ready');
  // `relay start` runs the pipeline's parts on a thread of its own (RELAY_PIPELINE_THREAD), itself a part.
  const parts = ['forwarder', 'projector', 'deliverability', 'sender', 'sender.dispatcher', 'compose', 'outbox', 'suppressor', 'webhooks', 'webhooks.dispatcher', 'retention', 'inbound', 'pipeline-thread'];
  assert.equal(body.checks, { eventStore: true, documentStore: true, ...Object.fromEntries(parts.map((p) => [p, true])), log: true });
  // Each long-running part reports its liveness in one shape (apps/liveness.ts).
  assert.equal(Object.keys(body.parts).sort(), [...parts].sort());
  for (const [part, report] of Object.entries(body.parts)) {
    assert.is(report.state, 'running', part);
    assert.is(report.ready, true, part);
    assert.ok(Date.parse(report.lastProgressAt) <= Date.now(), part);
  }
});

test('`relay events --stream <email id>` shows each event\'s correlation (the HTTP request) and causation (what it reacted to)', async () => {
  const sent: any = await (await fetch(`${baseUrl}/v1/emails`, {
    method: 'POST', headers: auth(), body: JSON.stringify({ from: 'hello@example.test', to: 'trace@example.test', subject: 'Trace me', text: 'hi' }),
  })).json();
  await waitUntil(async () => ((await (await fetch(`${baseUrl}/v1/emails/${sent.id}`, { headers: auth() })).json()) as any).status === 'sent', 'sent and projected');
  const printed = await runRelay(['events', '--stream', sent.id], { RELAY_DATA_DIR: dataDir });
  assert.is(printed.code, 0, printed.stderr);
  const events = printed.stdout.trim().split('\n').map((line) => JSON.parse(line));
  assert.equal(events.map((e) => e.type), ['EmailAccepted', 'DeliveryClaimed', 'DeliveryTransactionStarted', 'DeliveryAttempted']);
  const [accepted, claimed, started, attempted] = events;
  assert.match(accepted.metadata.correlationId, /^[0-9a-f-]{36}$/, 'the request id');
  assert.is(accepted.metadata.causationId, accepted.metadata.correlationId, 'the request caused the admission');
  assert.is(claimed.metadata.correlationId, accepted.metadata.correlationId, 'the claim belongs to the same request');
  assert.is(claimed.metadata.causationId, accepted.id, 'the sender reacted to EmailAccepted');
  assert.is(started.metadata.causationId, claimed.id, 'the transaction begins under the claim');
  assert.is(attempted.metadata.correlationId, accepted.metadata.correlationId);
  assert.is(attempted.metadata.causationId, claimed.id, 'the outcome follows from the claim');
  for (const e of events) assert.is(e.metadata.schemaVersion, 1);
});

test('`relay outbox show <email id>` prints the message as it would go on the wire, DKIM-signed, without the BCC', async () => {
  const sent: any = await (await fetch(`${baseUrl}/v1/emails`, {
    method: 'POST', headers: auth(), body: JSON.stringify({ from: 'Acme <hello@example.test>', to: 'you@example.test', bcc: 'hidden@example.test', subject: 'My first email', text: 'Hello from Relay' }),
  })).json();
  await waitUntil(async () => ((await (await fetch(`${baseUrl}/v1/emails/${sent.id}`, { headers: auth() })).json()) as any).status === 'sent', 'sent');
  const listed = await runRelay(['outbox', 'list'], { RELAY_DATA_DIR: dataDir });
  assert.is(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, new RegExp(`^${sent.id} .*you@example\\.test.*"My first email"`, 'm'));
  const shown = await runRelay(['outbox', 'show', sent.id], { RELAY_DATA_DIR: dataDir });
  assert.is(shown.code, 0, shown.stderr);
  const [head, body] = shown.stdout.split('\r\n\r\n');
  assert.match(head, /^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=example\.test;/);
  assert.match(head, /^Subject: My first email$/m);
  assert.match(head, new RegExp(`^Message-ID: <${sent.id}@example\\.test>$`, 'm'));
  assert.match(body, /Hello from Relay/);
  assert.not.match(shown.stdout, /hidden@example\.test/);
});

test('SIGTERM: requests in flight finish, the consumer positions are committed, the process exits 0', async () => {
  const inFlight = Array.from({ length: 20 }, (_, i) =>
    fetch(`${baseUrl}/v1/emails`, { method: 'POST', headers: auth(liveKey), body: JSON.stringify({ from: 'hello@example.test', to: 'ann@example.test', subject: `last ${i}`, text: 'x' }) })
      .then(async (r) => ({ status: r.status, body: (await r.json()) as { id?: string; error?: { code: string } } }))
      .catch(() => null),
  );
  // Let the requests reach the server, then ask it to stop while they are being handled.
  await new Promise((resolve) => setTimeout(resolve, 20));
  relay.child.kill('SIGTERM');
  const answered = (await Promise.all(inFlight)).filter((r) => r !== null);
  const exit = await relay.exited;
  assert.is(exit.code, 0, relay.output());
  // Requests the server had taken in are finished (202); ones arriving after it began to
  // drain are told to retry, in the spec's envelope; none is cut off.
  assert.ok(answered.some((r) => r!.status === 202));
  for (const r of answered) {
    if (r!.status !== 202) assert.equal([r!.status, r!.body.error?.code], [503, 'service_unavailable'], JSON.stringify(r));
  }
  const admitted = answered.filter((r) => r!.status === 202).map((r) => r!.body.id!);

  // Committed positions, read from the stores the stopped process left behind.
  const positions = await committedPositions(dataDir);
  assert.ok(positions.events > 0, 'the event store has events');
  // (a) The log serves the events topic from the event store's own rows: each event is a
  // record of the topic once, and written once (no copy in the log's records, no forwarder
  // position saved).
  assert.ok(positions.followsEventStore, 'the events topic is the event store\'s rows');
  assert.is(positions.ends.reduce((n, end) => n + end, 0), positions.events, 'every event is in the log once');
  assert.is(positions.copiedRecords, 0, 'no event was written a second time');
  assert.is(positions.forwarderCheckpoint, null, 'the forwarder had nothing to forward');
  // (b) Every consumer group committed every record of every partition of the events topic:
  // each got every event, and a restarted processor is handed nothing again.
  assert.is(positions.committed.length, PROCESSORS.length * positions.ends.length);
  for (const o of positions.committed) {
    assert.is(o.committed, positions.ends[o.partition], `${o.group} partition ${o.partition}: committed offset = end offset (${JSON.stringify(positions)})`);
  }

  // And every admitted email (including those answered during shutdown) is in the read model.
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  relay = spawnRelay(['start'], { RELAY_DATA_DIR: dataDir, PORT: String(port) });
  await waitForReady(baseUrl, relay);
  await waitUntil(async () => {
    const list: any = await (await fetch(`${baseUrl}/v1/emails?limit=100`, { headers: auth(liveKey) })).json();
    const ids = new Set(list.emails.map((e: { id: string }) => e.id));
    return admitted.every((id) => ids.has(id));
  }, 'every email answered during shutdown is projected');
  const exit2 = await relay.stop();
  assert.is(exit2.code, 0);
});

interface CommittedPositions {
  events: number;
  followsEventStore: boolean;
  forwarderCheckpoint: string | null;
  /** The events topic's partitions' end offsets (the next offset to be written). */
  ends: number[];
  /** Each processor's group's committed offset per partition (0 where it committed none: where it would start). */
  committed: Array<{ group: string; partition: number; committed: number }>;
  /** Rows of the log's own records (the copy a forwarder would write). */
  copiedRecords: number;
}

/** What a process that stopped left in the data dir's embedded stores (the process must be gone). */
async function committedPositions(dir: string): Promise<CommittedPositions> {
  const config = loadConfig({ RELAY_DATA_DIR: dir, RELAY_LOG_LEVEL: 'silent' });
  const topic = eventsTopic(config.logNamespace);
  const stores = await openStores(config);
  try {
    assert.equal(stores.kinds, { events: 'sqlite', documents: 'sqlite', log: 'sqlite' });
    const events = await stores.events.readAll();
    const checkpoint = await stores.documents.collection<{ _id: string; position: string | null }>(COLLECTIONS.checkpoints).get(`forwarder:${topic}`);
    const offsets = await stores.log.groupOffsets(topic, PROCESSORS.map((p) => groupOf(config.logNamespace, p.name)));
    // The log's own records: infra/sqlite/log.ts, in the event store's file (apps/runtime.ts, embeddedFiles).
    const db = new DatabaseSync(join(dir, 'relay.db'), { readOnly: true });
    let copiedRecords: number;
    try {
      copiedRecords = (db.prepare('SELECT count(*) AS n FROM log_records WHERE topic = ?').get(topic) as { n: number }).n;
    } finally {
      db.close();
    }
    return {
      events: events.length,
      followsEventStore: stores.log.followsEventStore?.(topic) ?? false,
      forwarderCheckpoint: checkpoint?.position ?? null,
      ends: offsets.filter((o) => o.group === offsets[0].group).map((o) => Number(o.end)),
      committed: offsets.map((o) => ({ group: o.group, partition: o.partition, committed: Number(o.committed ?? 0) })),
      copiedRecords,
    };
  } finally {
    await stores.close();
  }
}

test.run();
