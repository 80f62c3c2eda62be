// The sender as ops run it: `relay processor sender` in processes of their own, sharing the
// `<ns>.sender` consumer group, killed with SIGKILL at the worst moments. API, forwarder and
// projector run in the test process over the same embedded data directory.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { processorsCaughtUp, workItemGone } from './support/markers.ts';
import { freePort, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { startSmtpSink, type DataAnswer, type SmtpSink } from './support/smtp-sink.ts';

interface Context {
  dataDir: string;
  sink: SmtpSink;
  /** Called when DATA of a message is complete, before the smarthost answers. */
  onData: (raw: Buffer) => DataAnswer | void;
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
  ctx.sink = await startSmtpSink({ onData: (raw) => ctx.onData(raw) ?? {} });
  ctx.env = {
    RELAY_DATA_DIR: ctx.dataDir,
    RELAY_DELIVERY: 'smtp',
    RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`,
    // Claims left open expire after 10 minutes × 0.001 = 600 ms.
    RELAY_DELIVERY_RETRY_SCALE: '0.001',
  };
  ctx.t = await startTestApp(ctx.env, { dataDir: ctx.dataDir, processors: ['projector'] });
  ctx.tenant = await deliveryTenant(ctx.t);
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
const sendOne = (ctx: Context, subject: string) => send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject, text: subject });

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

test('two sender instances in one group: 30 emails, each sent by exactly one SMTP transaction', async (ctx) => {
  await Promise.all([startSender(ctx), startSender(ctx)]);
  const ids: string[] = [];
  for (let i = 0; i < 30; i++) ids.push(await sendOne(ctx, `shared ${i}`));
  for (const id of ids) await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent', 'is sent', 60_000);
  for (const id of ids) assert.is(receivedFor(ctx, id), 1, `${id} once`);
  const claimedBy = new Set<string>();
  for (const id of ids) {
    const stream = await ctx.t.stores.events.readStream(`email-${id}`);
    const claims = stream.filter((e) => e.type === 'DeliveryClaimed');
    assert.is(claims.length, 1, `${id}: one claim`);
    claimedBy.add(String(claims[0].data.claimedBy));
  }
  assert.ok(claimedBy.size >= 1);
});

test.run();
