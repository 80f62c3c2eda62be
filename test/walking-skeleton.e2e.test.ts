// One email end to end on the embedded default, through the real processes a newcomer
// runs: scripted setup (CLI) → `relay start` → POST /v1/emails over HTTP → read back.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

  const detailResponse = await fetch(`${baseUrl}/v1/emails/${result.id}`, { headers: auth() });
  assert.is(detailResponse.status, 200);
  const detail: any = await detailResponse.json();
  for (const field of ['id', 'fromAddress', 'subject', 'status', 'testMode', 'failureCode', 'createdAt', 'sentAt', 'deliveredAt', 'to', 'cc', 'reply_to', 'providerMessageId', 'recipients', 'webhookDeliveries', 'metadata', 'tags', 'events']) {
    assert.ok(field in detail, `EmailDetail.${field} is present`);
  }
  assert.is(detail.id, result.id);
  assert.is(detail.fromAddress, 'hello@example.test');
  assert.is(detail.status, 'queued');
  assert.equal(detail.to, ['ann@example.test']);
  assert.equal(detail.cc, []);
  assert.is(detail.reply_to, null);
  assert.is(detail.sentAt, null);
  assert.is(detail.deliveredAt, null);
  assert.is(detail.providerMessageId, null);
  assert.is(detail.failureCode, null);
  assert.equal(detail.recipients.map((r: { address: string }) => r.address), ['ann@example.test']);
  assert.equal(detail.tags, { kind: 'welcome' });
  assert.equal(detail.metadata, { userId: 7 });
  assert.is(detail.events[0].type, 'email.queued');
  const raw = JSON.stringify(detail);
  assert.not.ok(raw.includes('secret@example.test'), 'BCC never appears');
  assert.not.ok(raw.includes('Hi Ann'), 'the body never appears');
});

test('/healthz is live and /readyz reports the stores and every in-process part', async () => {
  const live = await fetch(`${baseUrl}/healthz`);
  assert.is(live.status, 200);
  const ready = await fetch(`${baseUrl}/readyz`);
  assert.is(ready.status, 200);
  const body = (await ready.json()) as { status: string; checks: Record<string, boolean> };
  assert.is(body.status, 'ready');
  assert.equal(body.checks, { eventStore: true, documentStore: true, forwarder: true, projector: true, retention: true, log: true });
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

  // Committed positions: a projector that starts again has nothing left to redo, and every
  // admitted email (including those answered during shutdown) is in the read model.
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

test.run();
