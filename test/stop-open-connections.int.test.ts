// `relay start`'s stop (SIGTERM) is bounded whatever its HTTP clients hold open: a connection
// that has sent nothing yet (a browser's preconnect, a proxy's pre-opened socket, a port check)
// is closed at once, and a request whose body is still arriving (a stalled upload) is answered
// 503 at once; neither holds the stop to its deadline (RELAY_SHUTDOWN_TIMEOUT_MS, which would
// end in "shutdown did not finish" and exit 1). Once the stop has begun the sender starts no
// delivery, however long the API's drain takes, and the deliveries in flight end: none is left
// on the wire for the deadline to cut. Real `relay start` processes, raw sockets, a real smarthost.
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { deferred, waitUntil } from './support/eventually.ts';
import { exitWithin, freePort, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

const test = suite('stop with client connections open');
const dataDir = mkdtempSync(join(tmpdir(), 'relay-stop-connections-'));
let apiKey = '';
/** Short, but far below the connections' own timeouts (30 s) that held the stop. */
const DEADLINE_MS = 3000;

test.before(async () => {
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'owner@example.test', '--password', 'a long enough password', '--workspace', 'Stop', '--project', 'web', '--environment', 'production', '--activate', '--domain', 'example.test'], { RELAY_DATA_DIR: dataDir });
  assert.is(setup.code, 0, setup.stderr);
  apiKey = JSON.parse(setup.stdout).apiKey;
});

test.after(() => rmSync(dataDir, { recursive: true, force: true }));

async function started(deadlineMs = DEADLINE_MS, env: Record<string, string> = {}): Promise<{ relay: RelayProcess; port: number }> {
  const port = await freePort();
  const relay = spawnRelay(['start'], { RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json', RELAY_SHUTDOWN_TIMEOUT_MS: String(deadlineMs), ...env });
  await waitForReady(`http://127.0.0.1:${port}`, relay, 60_000);
  return { relay, port };
}

async function opened(port: number, allowHalfOpen = false): Promise<{ socket: Socket; received: () => string }> {
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen });
  let received = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => {});
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return { socket, received: () => received };
}

/**
 * A POST /v1/emails the server has taken (100 Continue) whose body stops after 200 of its bytes;
 * `keepsOpen`: the client does not close its side when the server closes its own.
 */
async function stalledUpload(port: number, keepsOpen = false): Promise<{ socket: Socket; answer: () => string }> {
  const client = await opened(port, keepsOpen);
  const body = JSON.stringify({ from: 'hello@example.test', to: 'ann@example.org', subject: 'slow upload', text: 'x'.repeat(2000) });
  // Expect: 100-continue: "100 Continue" marks that the server has the request and waits for its body.
  client.socket.write(`POST /v1/emails HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nExpect: 100-continue\r\n\r\n`);
  await waitUntil(() => client.received().startsWith('HTTP/1.1 100'), 'the server took the request and waits for its body', 5_000);
  client.socket.write(body.slice(0, 200));
  return { socket: client.socket, answer: () => client.received().replace(/^HTTP\/1\.1 100[^\n]*\r\n\r\n/, '') };
}

/** SIGTERM, then the exit code (or 'running' after 2 × the deadline) and whether the deadline was hit. */
async function stopped(relay: RelayProcess, deadlineMs = DEADLINE_MS): Promise<{ code: number | null | 'running'; hitDeadline: string | undefined }> {
  relay.child.kill('SIGTERM');
  const code = await exitWithin(relay, 2 * deadlineMs + 3000);
  return { code, hitDeadline: relay.output().split('\n').find((l) => l.includes('shutdown did not finish')) };
}

test('a client connection that has sent nothing yet does not hold the stop to its deadline', async () => {
  const { relay, port } = await started();
  const client = await opened(port);
  try {
    // The server has accepted it once it answers a request on a connection opened after it.
    await (await fetch(`http://127.0.0.1:${port}/healthz`)).arrayBuffer();
    const { code, hitDeadline } = await stopped(relay);
    assert.is(hitDeadline, undefined, 'the stop waited for the silent connection until its deadline');
    assert.is(code, 0);
  } finally {
    client.socket.destroy();
    await relay.kill();
  }
});

test('a request whose body stalls does not hold the stop to its deadline, and is answered 503 in the envelope', async () => {
  const { relay, port } = await started();
  const upload = await stalledUpload(port);
  try {
    await (await fetch(`http://127.0.0.1:${port}/healthz`)).arrayBuffer();
    const { code, hitDeadline } = await stopped(relay);
    assert.is(hitDeadline, undefined, 'the stop waited for the stalled upload until its deadline');
    assert.is(code, 0);
    const [head, body] = upload.answer().split('\r\n\r\n');
    assert.match(head, /^HTTP\/1\.1 503 /, 'the stalled client got an answer');
    assert.match(head, /^connection: close$/im);
    assert.match(head, /^retry-after: 1$/im);
    assert.is(JSON.parse(body).error.code, 'service_unavailable');
  } finally {
    upload.socket.destroy();
    await relay.kill();
  }
});

test('once the stop has begun no delivery starts, however long the drain; those in flight end', async () => {
  // The smarthost holds every DATA until released: its 5 pooled connections fill, the sender's
  // other runs wait for one, and the rest of the 12 emails wait to be claimed.
  const release = deferred();
  let held = 0;
  const sink: SmtpSink = await startSmtpSink({ onData: async () => {
    held++;
    await release.promise;
    return {};
  } });
  // The drain is bounded by a fifth of this; a stalled upload whose client keeps its connection open holds it that long.
  const deadlineMs = 10_000;
  const { relay, port } = await started(deadlineMs, { RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${sink.port}?tls=none` });
  let upload: Awaited<ReturnType<typeof stalledUpload>> | null = null;
  try {
    const sends = await Promise.all(Array.from({ length: 12 }, (_, i) => fetch(`http://127.0.0.1:${port}/v1/emails`, {
      method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ from: 'hello@example.test', to: `r${i}@example.org`, subject: `held ${i}`, text: 'x' }),
    })));
    assert.equal(sends.map((r) => r.status), Array(12).fill(202));
    await waitUntil(() => held === 5, 'the smarthost holds 5 transactions in DATA');
    upload = await stalledUpload(port, true);
    relay.child.kill('SIGTERM');
    // The API's drain has begun (and the sender was told before it): the transactions may end now.
    await waitUntil(() => upload!.answer().startsWith('HTTP/1.1 503'), 'the stalled upload is answered 503', 5_000);
    release.resolve();
    const code = await exitWithin(relay, 2 * deadlineMs);
    assert.is(code, 0, relay.output());
    assert.ok(relay.output().includes('"msg":"stopped"'), 'the stop finished');
    // Every transaction begun went through; the emails not claimed before the stop were left for the next start.
    assert.is(sink.mailFromCommands.length, sink.messages.length, 'a transaction was cut');
    assert.ok(sink.messages.length >= 5, `${sink.messages.length} sent`);
    assert.ok(sink.messages.length < 12, `the sender went on claiming during the drain: all ${sink.messages.length} sent`);
  } finally {
    release.resolve();
    upload?.socket.destroy();
    await relay.kill();
    await sink.close();
  }
});

test.run();
