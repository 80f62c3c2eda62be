// Delivery outcomes as an operator sees them, outside the API: `relay processor sender` in a
// process of its own, its JSON log read line by line and its /metrics scraped, after real SMTP
// transactions with a real SMTP server. API, forwarder and projector run in the test process
// over the same embedded data directory.
//   - every outcome other than sent/delivered is one line at warn with the email id, the
//     recipient's domain (never the address), the transport, the attempt and the SMTP reply
//     (without the addresses a server echoes in it);
//   - a smarthost that cannot be used at all (here: it refuses STARTTLS) is one line at error
//     per cause and minute, however many emails and attempts it holds up;
//   - /metrics counts attempts by transport and outcome, the accepted→sent latency and the
//     claims open right now.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { UNUSABLE_LOG_INTERVAL_MS } from '../apps/services/delivery/outcome-report.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { scrape, sumOf } from './support/metrics.ts';
import { freePort, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { smtpError, startSmtpSink, type DataAnswer, type SmtpSink } from './support/smtp-sink.ts';

interface Context {
  dataDir: string;
  /** Accepts everything (tls=none), except what the test refuses. */
  sink: SmtpSink;
  onData: () => DataAnswer | Promise<DataAnswer>;
  /** A smarthost that neither offers nor accepts STARTTLS, which RELAY_SMTP_URL requires. */
  plain: SmtpSink;
  t: TestApp;
  tenant: DeliveryTenant;
  sender: RelayProcess | null;
  env: Record<string, string>;
}

const test = suite<Context>('delivery outcomes in the log and /metrics (a sender process)');

const REFUSED = 'nobody@refusing.example';

test.before(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-visibility-'));
  ctx.onData = () => ({});
  ctx.sender = null;
  ctx.sink = await startSmtpSink({
    // Echoes the address, as Postfix does ("<bob@example.org>: Relay access denied"): the log still does not.
    onRcptTo: (address) => (address.address === REFUSED ? smtpError(550, `5.7.1 <${address.address}>: Relaying to this address is not allowed`) : undefined),
    onData: () => ctx.onData(),
  });
  ctx.plain = await startSmtpSink({ noStartTls: true });
  ctx.env = {
    RELAY_DATA_DIR: ctx.dataDir,
    RELAY_DELIVERY: 'smtp',
    RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`,
    // Retries after 300 ms, 1.2 s, 6 s…; claims are taken over after 1.2 s.
    RELAY_DELIVERY_RETRY_SCALE: '0.01',
  };
  ctx.t = await startTestApp(ctx.env, { dataDir: ctx.dataDir, processors: ['projector'] });
  ctx.tenant = await deliveryTenant(ctx.t);
});

test.after.each(async (ctx) => {
  await ctx.sender?.stop();
  ctx.sender = null;
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.sink.close();
  await ctx.plain.close();
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

async function startSender(ctx: Context, env: Record<string, string> = {}): Promise<string> {
  const port = await freePort();
  ctx.sender = spawnRelay(['processor', 'sender'], { ...ctx.env, PORT: String(port), ...env });
  const url = `http://127.0.0.1:${port}`;
  await waitForReady(url, ctx.sender, 60_000);
  return url;
}

const sendTo = (ctx: Context, to: string, subject: string) => send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to, subject, text: subject });
const attempts = async (ctx: Context, id: string) => (await ctx.t.stores.events.readStream(`email-${id}`)).filter((e) => e.type === 'DeliveryAttempted').length;

interface LogLine { level: number; msg: string; time: number; [field: string]: unknown }
/** The sender's JSON log lines. */
const logLines = (ctx: Context): LogLine[] => ctx.sender!.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line));
const WARN = 40;
const ERROR = 50;

test('real deliveries: attempts by outcome, the accepted→sent latency and open claims on /metrics; a refusal is one warn line without the address', async (ctx) => {
  const url = await startSender(ctx);
  // The smarthost holds the first message's end of data: its claim stays open meanwhile.
  const held = deferred();
  let holding = false;
  ctx.onData = () => {
    holding = true;
    return held.promise.then(() => ({}));
  };
  const first = await sendTo(ctx, 'ann@example.org', 'held');
  await waitUntil(() => holding, 'the smarthost holds the first message');
  const during = await scrape(url);
  assert.is(sumOf(during, 'relay_delivery_open_claims'), 1, 'one claim open');
  assert.ok(sumOf(during, 'relay_delivery_oldest_open_claim_age_seconds') > 0, 'and its age');
  ctx.onData = () => ({});
  held.resolve();
  const others = [await sendTo(ctx, 'bob@example.net', 'second'), await sendTo(ctx, 'cy@example.com', 'third')];
  for (const id of [first, ...others]) await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent', 'is sent');
  const refused = await sendTo(ctx, REFUSED, 'refused');
  const rejected = await waitForDetail(ctx.t, ctx.tenant.key, refused, (d) => d.status === 'rejected', 'is rejected');

  await waitUntil(async () => sumOf(await scrape(url), 'relay_delivery_open_claims') === 0, 'no claim open once every outcome is recorded');
  const after = await scrape(url);
  assert.is(sumOf(after, 'relay_delivery_attempts_total', { transport: 'smtp', outcome: 'sent' }), 3);
  assert.is(sumOf(after, 'relay_delivery_attempts_total', { transport: 'smtp', outcome: 'failed' }), 1, 'the refusal');
  assert.is(sumOf(after, 'relay_delivery_attempts_total', { transport: 'smtp', outcome: 'unknown' }), 0);
  assert.is(sumOf(after, 'relay_delivery_latency_seconds_count', { transport: 'smtp' }), 3, 'one latency per recipient sent');
  assert.ok(sumOf(after, 'relay_delivery_latency_seconds_sum', { transport: 'smtp' }) > 0);
  assert.is(sumOf(after, 'relay_delivery_oldest_open_claim_age_seconds'), 0);

  await waitUntil(() => logLines(ctx).some((l) => l.emailId === refused), 'the refusal is logged');
  const lines = logLines(ctx).filter((l) => l.emailId !== undefined);
  assert.is(lines.length, 1, `only the refusal is logged: ${JSON.stringify(lines)}`);
  const [line] = lines;
  assert.is(line.level, WARN);
  assert.is(line.msg, 'delivery rejected');
  assert.is(line.emailId, refused);
  assert.is(line.recipientDomain, 'refusing.example');
  assert.is(line.transport, 'smtp');
  assert.is(line.attempt, 1);
  assert.is(line.smtpCode, 550);
  assert.match(String(line.reply), /<…@refusing\.example>: Relaying to this address is not allowed/);
  assert.is(rejected.failureCode, 'provider_rejected');
  assert.not.ok(ctx.sender!.output().includes('nobody@'), 'no recipient address anywhere in the log');
  const attempted = (await ctx.t.stores.events.readStream(`email-${refused}`)).find((e) => e.type === 'DeliveryAttempted')!;
  assert.match(JSON.stringify(attempted.data), `<${REFUSED}>: Relaying`, 'the event keeps the reply whole');
});

test('a smarthost that refuses STARTTLS: every email delayed and a warn line per email and attempt, but one error line per cause and minute', async (ctx) => {
  const startedAt = Date.now();
  const url = await startSender(ctx, { RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.plain.port}` });
  const ids = [
    await sendTo(ctx, 'ann@example.org', 'tls one'),
    await sendTo(ctx, 'bob@example.net', 'tls two'),
    await sendTo(ctx, 'cy@example.com', 'tls three'),
  ];
  for (const id of ids) await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'delayed', 'is delayed');
  // Retried at least once each: the cause came back at every attempt.
  await waitUntil(async () => (await Promise.all(ids.map((id) => attempts(ctx, id)))).every((n) => n >= 2), 'every email was tried twice', 30_000);
  const tried = (await Promise.all(ids.map((id) => attempts(ctx, id)))).reduce((a, b) => a + b, 0);
  await waitUntil(() => logLines(ctx).filter((l) => l.msg === 'delivery delayed').length >= tried, 'a warn line per delayed outcome');

  const lines = logLines(ctx);
  const warnings = lines.filter((l) => l.msg === 'delivery delayed');
  for (const w of warnings) {
    assert.is(w.level, WARN);
    assert.ok(ids.includes(String(w.emailId)));
    assert.ok(['example.org', 'example.net', 'example.com'].includes(String(w.recipientDomain)), String(w.recipientDomain));
    assert.is(w.transport, 'smtp');
    assert.ok(Number(w.attempt) >= 1);
    assert.is(w.stage, 'tls');
    assert.match(String(w.reply), /TLS|STARTTLS/i);
  }
  for (const id of ids) assert.ok(warnings.some((w) => w.emailId === id && w.attempt === 1) && warnings.some((w) => w.emailId === id && w.attempt === 2), `${id}: attempts 1 and 2 logged`);
  const errors = lines.filter((l) => l.level >= ERROR);
  assert.ok(errors.length >= 1, 'the unusable smarthost is logged at error');
  assert.ok(errors.length < tried, `${errors.length} error lines for ${tried} failed attempts`);
  for (const e of errors) {
    assert.is(e.msg, 'the transport cannot be used: every email waits for a retry');
    assert.is(e.transport, 'smtp');
    assert.is(e.stage, 'tls');
  }
  // Once per minute: as many lines as minutes begun since the first, each a minute after the last.
  assert.ok(errors.length <= Math.ceil((Date.now() - startedAt) / UNUSABLE_LOG_INTERVAL_MS), `${errors.length} error lines in ${Date.now() - startedAt} ms`);
  for (let i = 1; i < errors.length; i++) assert.ok(errors[i].time - errors[i - 1].time >= UNUSABLE_LOG_INTERVAL_MS);
  assert.not.ok(/(ann|bob|cy)@example\./.test(ctx.sender!.output()), 'no recipient address in the log');
  assert.is(ctx.plain.messages.length, 0, 'nothing went out in plain text');

  const samples = await scrape(url);
  assert.ok(sumOf(samples, 'relay_delivery_attempts_total', { transport: 'smtp', outcome: 'deferred' }) >= tried);
  assert.is(sumOf(samples, 'relay_delivery_attempts_total', { transport: 'smtp', outcome: 'sent' }), 0);
});

test.run();
