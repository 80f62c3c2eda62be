// The sender as ops run it: `relay processor sender` in processes of their own, sharing the
// `<ns>.sender` consumer group, killed with SIGKILL at the worst moments. API, forwarder and
// projector run in the test process over the same embedded data directory. What reached the
// wire is judged by the smarthost (its RCPT TO log), not by Relay's own events.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { processorsCaughtUp, workItemGone } from './support/markers.ts';
import { freePort, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { startSmtpSink, type DataAnswer, type SmtpSink } from './support/smtp-sink.ts';

interface Context {
  dataDir: string;
  sink: SmtpSink;
  /** Called when DATA of a message is complete, before the smarthost answers. */
  onData: (raw: Buffer) => DataAnswer | Promise<DataAnswer> | void;
  t: TestApp;
  tenant: DeliveryTenant;
  senders: RelayProcess[];
  env: Record<string, string>;
}

const test = suite<Context>('sender processes (embedded, real processes)');

test.before(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-senders-'));
  ctx.onData = () => {};
  ctx.senders = [];
  ctx.sink = await startSmtpSink({ onData: async (raw) => (await ctx.onData(raw)) ?? {} });
  ctx.env = {
    RELAY_DATA_DIR: ctx.dataDir,
    RELAY_DELIVERY: 'smtp',
    RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`,
    // Begun transactions left open become delivery_unknown after 20 minutes × 0.001 = 1.2 s;
    // claims that never began are taken over after 2 minutes × 0.001 = 120 ms.
    RELAY_DELIVERY_RETRY_SCALE: '0.001',
  };
  ctx.t = await startTestApp(ctx.env, { dataDir: ctx.dataDir, processors: ['projector'] });
  ctx.tenant = await deliveryTenant(ctx.t);
});

// A failed test leaves no sender running and no smarthost holding messages for the next one.
test.after.each(async (ctx) => {
  for (const sender of ctx.senders.splice(0)) await sender.kill();
  ctx.onData = () => {};
});

test.after(async (ctx) => {
  for (const sender of ctx.senders) await sender.kill();
  await ctx.t.close();
  await ctx.sink.close();
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

async function startSender(ctx: Context): Promise<RelayProcess> {
  const port = await freePort();
  const sender = spawnRelay(['processor', 'sender'], { ...ctx.env, PORT: String(port) });
  ctx.senders.push(sender);
  await waitForReady(`http://127.0.0.1:${port}`, sender, 60_000);
  return sender;
}

const receivedFor = (ctx: Context, id: string) => ctx.sink.messages.filter((m) => m.raw.toString().includes(`<${id}@`)).length;
const sendOne = (ctx: Context, subject: string, to = 'ann@example.org') => send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to, subject, text: subject });
const eventTypes = async (ctx: Context, id: string) => (await ctx.t.stores.events.readStream(`email-${id}`)).map((e) => e.type);
const count = (types: string[], type: string) => types.filter((t) => t === type).length;
/** The process's JSON log lines with this message. */
const logLines = (process: RelayProcess, message: string) => process.output().split('\n').filter((line) => line.includes(`"msg":"${message}"`)).map((line) => JSON.parse(line));

for (const moment of ['while the smarthost holds its 250', 'right after the smarthost answered 250'] as const) {
  test(`SIGKILL of the sender ${moment}: failed/delivery_unknown, received once, never again after restart`, async (ctx) => {
    const sender = await startSender(ctx);
    let killed = false;
    const kill = () => sender.child.kill('SIGKILL');
    ctx.onData = () => {
      if (killed) return;
      killed = true;
      if (moment === 'while the smarthost holds its 250') return void kill();
      // Frozen first, so the 250 written next reaches its socket but never its code (a
      // process that ran on could record the outcome before the kill lands).
      sender.child.kill('SIGSTOP');
      return { after: kill };
    };
    const id = await sendOne(ctx, `killed ${moment}`);
    await sender.exited;
    assert.ok(killed, 'the sender was killed during its SMTP transaction');
    ctx.onData = () => {};
    await startSender(ctx);
    const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'failed', 'is failed after the restart', 30_000);
    assert.is(final.failureCode, 'delivery_unknown');
    assert.equal(final.events.map((e: any) => e.type), ['email.queued', 'email.processing', 'email.failed']);
    // Nothing is scheduled for it any more and the restarted sender has handled every event:
    // no later step can send it again.
    await workItemGone(ctx.t.stores.documents, id);
    await processorsCaughtUp(ctx.t, ['sender']);
    assert.is(receivedFor(ctx, id), 1, 'the smarthost received it once');
    for (const s of ctx.senders.splice(0)) await s.kill();
  });
}

test('SIGKILL of a sender holding claims that never reached the wire: the next sender takes each over and sends it once; only transactions begun are unknown', async (ctx) => {
  // The smarthost holds every end of data: the sender's 5 connections fill up, and the claims
  // it made beyond them (it claims twice its connections) wait for one. One recipient site
  // each, so no site's own bound (5 at once) keeps a claim from being made.
  const held = deferred();
  let holding = 0;
  ctx.onData = () => {
    holding++;
    return held.promise.then(() => ({}));
  };
  const first = await startSender(ctx);
  const recipients = Array.from({ length: 10 }, (_, i) => `queued${i}@site${i}.example.org`);
  const ids: string[] = [];
  for (const [i, to] of recipients.entries()) ids.push(await sendOne(ctx, `behind a slow smarthost ${i}`, to));
  await waitUntil(async () => holding === 5 && (await Promise.all(ids.map((id) => eventTypes(ctx, id)))).every((types) => types.includes('DeliveryClaimed')),
    'five transactions are held and every email is claimed', 30_000);
  first.child.kill('SIGKILL');
  await first.exited;

  const reachedWire = new Set(ctx.sink.rcptCommands.map((r) => r.address));
  const notOnWire = ids.filter((_, i) => !reachedWire.has(recipients[i]));
  const onWire = ids.filter((_, i) => reachedWire.has(recipients[i]));
  assert.is(onWire.length, 5, 'one transaction per connection reached RCPT TO');
  assert.is(notOnWire.length, 5, 'the other claims had not reached the wire');
  const startsAtKill = new Map(await Promise.all(ids.map(async (id) => [id, count(await eventTypes(ctx, id), 'DeliveryTransactionStarted')] as const)));

  ctx.onData = () => {};
  held.resolve();
  const next = await startSender(ctx);
  for (const id of notOnWire) {
    const done = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent' || d.status === 'failed', 'is sent by the next sender', 30_000);
    assert.is(done.status, 'sent', `${id} is sent, not ${done.status} (${done.failureCode})`);
  }
  for (const id of onWire) {
    const done = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'failed', 'is failed: its transaction was cut', 30_000);
    assert.is(done.failureCode, 'delivery_unknown');
  }
  for (const id of ids) await workItemGone(ctx.t.stores.documents, id);
  await processorsCaughtUp(ctx.t, ['sender']);
  // Relay's marks agreed with the wire at the kill: a start for each transaction the smarthost saw, none for the others.
  for (const id of onWire) assert.is(startsAtKill.get(id), 1, `${id}: its transaction's start`);
  for (const id of notOnWire) assert.is(startsAtKill.get(id), 0, `${id}: no start`);
  for (const id of notOnWire) {
    assert.is(receivedFor(ctx, id), 1, `${id}: received once`);
    const types = await eventTypes(ctx, id);
    assert.is(count(types, 'DeliveryClaimed'), 2, `${id}: claimed, then taken over`);
    assert.is(count(types, 'DeliveryTransactionStarted'), 1, `${id}: one transaction`);
  }
  // The next sender said what it inherited, and warned of each unknown outcome.
  const inherited = logLines(next, 'open delivery claims found at start (left by a sender that stopped, or held by another that runs)');
  assert.is(inherited.length, 1);
  assert.is(inherited[0].beforeTransaction.count, 5);
  assert.is(inherited[0].inTransaction.count, 5);
  await waitUntil(() => logLines(next, 'delivery unknown').length === 5, 'a warning per delivery_unknown');
  for (const line of logLines(next, 'delivery unknown')) {
    assert.is(line.level, 40, 'warn');
    assert.ok(onWire.includes(line.emailId));
    assert.match(String(line.recipientDomain), /^site\d\.example\.org$/);
    assert.not.ok(JSON.stringify(line).includes('queued'), 'no address in the line');
  }
  for (const s of ctx.senders.splice(0)) await s.kill();
});

test('two sender instances in one group: 30 emails, each sent by exactly one SMTP transaction', async (ctx) => {
  await Promise.all([startSender(ctx), startSender(ctx)]);
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) ids.push(await sendOne(ctx, `shared ${i}`));
  for (const id of ids) await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent', 'is sent', 60_000);
  for (const id of ids) assert.is(receivedFor(ctx, id), 1, `${id} once`);
  for (const id of ids) {
    // A claim may have been taken over (its start grace is 120 ms here), but only one transaction began.
    assert.is(count(await eventTypes(ctx, id), 'DeliveryTransactionStarted'), 1, `${id}: one transaction`);
  }
});

test.run();
