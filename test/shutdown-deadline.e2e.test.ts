// A stop that cannot finish (a sender run held by a smarthost that never answers DATA) ends at
// RELAY_SHUTDOWN_TIMEOUT_MS: the process logs what it was still waiting for and exits 1, so a
// supervisor sees a failed stop instead of a process that hangs until its SIGKILL. A stop that
// can finish is not cut short. Real `relay processor sender` processes, a real smarthost.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ConfigError, loadConfig } from '../infra/config.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, type DeliveryTenant } from './support/delivery.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { exitWithin, freePort, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { startSmtpSink, type DataAnswer, type SmtpSink } from './support/smtp-sink.ts';

interface Context {
  dataDir: string;
  sink: SmtpSink;
  onData: (raw: Buffer) => Promise<DataAnswer | void> | void;
  t: TestApp;
  tenant: DeliveryTenant;
  env: Record<string, string>;
  senders: RelayProcess[];
}

const test = suite<Context>('shutdown deadline');

test.before(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-shutdown-'));
  ctx.onData = () => {};
  ctx.senders = [];
  ctx.sink = await startSmtpSink({ onData: async (raw) => (await ctx.onData(raw)) ?? {} });
  ctx.env = { RELAY_DATA_DIR: ctx.dataDir, RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`, RELAY_LOG_LEVEL: 'info' };
  ctx.t = await startTestApp(ctx.env, { dataDir: ctx.dataDir, processors: ['projector'] });
  ctx.tenant = await deliveryTenant(ctx.t);
});

test.after.each(async (ctx) => {
  for (const sender of ctx.senders.splice(0)) await sender.kill();
  ctx.onData = () => {};
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.sink.close();
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

async function startSender(ctx: Context, env: Record<string, string>): Promise<RelayProcess> {
  const port = await freePort();
  const sender = spawnRelay(['processor', 'sender'], { ...ctx.env, ...env, PORT: String(port) });
  ctx.senders.push(sender);
  await waitForReady(`http://127.0.0.1:${port}`, sender, 60_000);
  return sender;
}

const logLines = (process: RelayProcess, message: string) => process.output().split('\n').filter((line) => line.includes(`"msg":"${message}`)).map((line) => JSON.parse(line));

test('a stop held by a smarthost that never answers DATA ends at the deadline: exit 1, naming the sender', async (ctx) => {
  const sender = await startSender(ctx, { RELAY_SHUTDOWN_TIMEOUT_MS: '1500' });
  const inData = deferred<void>();
  ctx.onData = () => {
    inData.resolve();
    return new Promise<void>(() => {}); // never answers
  };
  await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'held', text: 'held' });
  await inData.promise;
  sender.child.kill('SIGTERM');
  const code = await exitWithin(sender, 15_000);
  assert.is(code, 1, sender.output().slice(-2000));
  const [line] = logLines(sender, 'shutdown did not finish');
  assert.ok(line, sender.output().slice(-2000));
  assert.is(line.level, 50); // error
  assert.is(line.waitingFor, 'sender');
  assert.is(line.timeoutMs, 1500);
});

test('a stop that can finish is not cut short: exit 0, "stopped"', async (ctx) => {
  const sender = await startSender(ctx, { RELAY_SHUTDOWN_TIMEOUT_MS: '30000' });
  sender.child.kill('SIGTERM');
  const code = await exitWithin(sender, 30_000);
  assert.is(code, 0, sender.output().slice(-2000));
  await waitUntil(() => logLines(sender, 'stopped').length === 1, 'the stop is logged');
  assert.is(logLines(sender, 'shutdown did not finish').length, 0);
});

test('RELAY_SHUTDOWN_TIMEOUT_MS: 25 s by default; a whole number of ms from 100 to 3600000', () => {
  assert.is(loadConfig({}).shutdownTimeoutMs, 25_000);
  assert.is(loadConfig({ RELAY_SHUTDOWN_TIMEOUT_MS: '100' }).shutdownTimeoutMs, 100);
  for (const bad of ['99', '3600001', '10s', '1.5', '-1']) {
    assert.throws(() => loadConfig({ RELAY_SHUTDOWN_TIMEOUT_MS: bad }), (e: unknown) => e instanceof ConfigError && e.variable === 'RELAY_SHUTDOWN_TIMEOUT_MS', bad);
  }
});

test.run();
