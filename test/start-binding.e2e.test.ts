// `relay start` binds every listener (HTTP, metrics, feedback SMTP) before any part consumes:
// with a port taken it exits 1 with one line naming the port and its variable, having claimed
// and sent nothing. Real processes on a data directory that holds an accepted, undelivered
// email; the same directory with free ports then delivers it (the absence above is not luck).
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { embeddedFiles } from '../apps/runtime.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { startTestApp } from './support/app.ts';
import { deliveryTenant, send } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort, spawnRelay, waitForReady } from './support/relay-process.ts';

interface Context { dataDir: string; emailId: string; taken: Server; takenPort: number }

const test = suite<Context>('relay start: listeners before consumers');

test.before(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-binding-'));
  // Admitted by the API alone: accepted, waiting for a forwarder and a sender.
  const t = await startTestApp({}, { dataDir: ctx.dataDir });
  const tenant = await deliveryTenant(t);
  ctx.emailId = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: 'ann@example.org', subject: 'Waiting', text: 'waiting' });
  await t.close();
  ctx.taken = createServer();
  await new Promise<void>((resolve) => ctx.taken.listen(0, '127.0.0.1', resolve));
  ctx.takenPort = (ctx.taken.address() as { port: number }).port;
});

test.after(async (ctx) => {
  await new Promise((resolve) => ctx.taken.close(resolve));
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

async function streamTypes(ctx: Context): Promise<string[]> {
  const events = new SqliteEventStore(embeddedFiles(ctx.dataDir).events);
  try {
    return (await events.readStream(`email-${ctx.emailId}`)).map((e) => e.type);
  } finally {
    await events.close();
  }
}

const outboxFiles = (ctx: Context) => (existsSync(join(ctx.dataDir, 'outbox')) ? readdirSync(join(ctx.dataDir, 'outbox')) : []);

async function startWithPortTaken(ctx: Context, env: Record<string, string>) {
  const relay = spawnRelay(['start'], { RELAY_DATA_DIR: ctx.dataDir, HOST: '127.0.0.1', PORT: String(await freePort()), ...env });
  const exited = await Promise.race([
    relay.exited,
    new Promise<null>((resolve) => setTimeout(() => resolve(null), 60_000).unref()),
  ]);
  if (!exited) {
    await relay.kill();
    throw new Error(`relay start did not exit with a port taken:\n${relay.output()}`);
  }
  return { ...exited, output: relay.output().trim() };
}

const cases: Array<[string, (port: string) => Record<string, string>, string, RegExp]> = [
  ['the HTTP port', (port) => ({ PORT: port }), 'PORT', /the HTTP server cannot listen/],
  ['the metrics port', (port) => ({ RELAY_METRICS_PORT: port }), 'RELAY_METRICS_PORT', /the metrics server cannot listen/],
  ['the feedback SMTP port', (port) => ({ RELAY_INBOUND_SMTP_PORT: port }), 'RELAY_INBOUND_SMTP_PORT', /the feedback SMTP server cannot listen/],
  ['the HTTP port, with the pipeline on its own thread', (port) => ({ PORT: port, RELAY_PIPELINE_THREAD: 'on' }), 'PORT', /the HTTP server cannot listen/],
];

for (const [what, env, variable, names] of cases) {
  test(`${what} taken: exit 1 with one line naming the port and ${variable}; nothing claimed or sent`, async (ctx) => {
    const { code, output } = await startWithPortTaken(ctx, env(String(ctx.takenPort)));
    assert.equal(await streamTypes(ctx), ['EmailAccepted'], `the email was not claimed:\n${output}`);
    assert.equal(outboxFiles(ctx), [], 'nothing was written to the outbox');
    assert.is(code, 1, output);
    assert.is(output.split('\n').length, 1, `one line, not a log of retries:\n${output}`);
    assert.match(output, names);
    assert.match(output, `127.0.0.1:${ctx.takenPort}: the port is already in use (EADDRINUSE); set ${variable} to a free port`);
    assert.not.match(output, /will retry/);
  });
}

test('with its ports free, the same data directory delivers the waiting email', async (ctx) => {
  const port = await freePort();
  const relay = spawnRelay(['start'], { RELAY_DATA_DIR: ctx.dataDir, HOST: '127.0.0.1', PORT: String(port) });
  try {
    await waitForReady(`http://127.0.0.1:${port}`, relay, 60_000);
    await waitUntil(() => outboxFiles(ctx).includes(`${ctx.emailId}.eml`), 'the waiting email is delivered to the outbox', 60_000);
  } finally {
    await relay.stop();
  }
  assert.ok((await streamTypes(ctx)).includes('DeliveryAttempted'));
});

test('ready means started: a SIGTERM sent as soon as /readyz answers 200 stops it gracefully (exit 0), every time', async () => {
  // /readyz used to answer 200 while retention's first pass still ran inside startRelay, before
  // the signal handlers were installed: a supervisor's SIGTERM then killed the process outright.
  for (let i = 0; i < 3; i++) {
    const dataDir = mkdtempSync(join(tmpdir(), 'relay-binding-ready-'));
    try {
      const port = await freePort();
      const relay = spawnRelay(['start'], { RELAY_DATA_DIR: dataDir, HOST: '127.0.0.1', PORT: String(port) });
      await waitForReady(`http://127.0.0.1:${port}`, relay, 60_000);
      const exited = await relay.stop();
      assert.equal(exited, { code: 0, signal: null }, `start ${i + 1}:\n${relay.output()}`);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
});

test.run();
