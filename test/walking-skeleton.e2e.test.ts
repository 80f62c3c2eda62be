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

test.before(async () => {
  const env = { RELAY_DATA_DIR: dataDir };
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'owner@example.test', '--password', 'a long enough password', '--workspace', 'Acme', '--project', 'web', '--domain', 'example.test'], env);
  assert.is(setup.code, 0, setup.stderr);
  apiKey = JSON.parse(setup.stdout).apiKey;
  assert.match(apiKey, /^rr_test_/);
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  relay = spawnRelay(['start'], { ...env, PORT: String(port) });
  await waitForReady(baseUrl, relay);
});

test.after(async () => {
  await relay?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const auth = () => ({ authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' });

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

test('SIGTERM stops the service cleanly', async () => {
  const exit = await relay.stop();
  assert.is(exit.code, 0, relay.output());
});

test.run();
