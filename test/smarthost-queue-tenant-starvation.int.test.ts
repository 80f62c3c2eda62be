// Defect: through a smarthost (RELAY_DELIVERY=smtp) every workspace's mail shares one queue,
// served strictly earliest first. Without sites there (docs/delivery.md: "a recipient domain's
// share is then the sender's concurrency"), apps/processors/sender.ts dueBySite reads the
// `deliveries` schedule by due time, then email id (time-ordered), and the dispatcher starts
// items in that order within the sender's concurrency (twice the smarthost's pooled connections);
// nothing takes the email's workspace into account. The smarthost's pool (and RELAY_SEND_RATE,
// the provider's quota) is the shared bottleneck, so once one workspace has queued a burst,
// another workspace's single email admitted a moment later is sent only after the whole burst:
// at a provider quota of 14 messages a second (Amazon SES's default), 2,000 queued newsletters
// keep another customer's sign-in code waiting well over two minutes.
//
// Why it matters: Relay is multi-tenant; one customer's campaign must not hold up another
// customer's transactional email for the length of the campaign. The webhooks processor already
// gives each project a share of its requests in flight (apps/services/webhooks/project-shares.ts),
// and template rendering and DKIM key generation give workspaces turns
// (infra/threads/worker-queue.ts); the sender's own queue has neither.
//
// Correct behaviour: workspaces take turns for the sender's slots (or each has a share), so a
// workspace with one email due waits behind at most a few of another's, not its whole backlog.
//
// The test: the smarthost holds its first answers until workspace B's one email is in the
// schedule, so that workspace A's burst is queued at that moment; then it answers everything.
// B's message should be among the first few the smarthost receives after those held; it arrives
// after every one of A's.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { workItems } from '../apps/services/delivery/work-items.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, sendPaced, type DeliveryTenant } from './support/delivery.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context { sink: SmtpSink; t: TestApp; a: DeliveryTenant; b: DeliveryTenant; gate: ReturnType<typeof deferred<void>>; held: number }

const test = suite<Context>('sender through a smarthost: one workspace\'s burst and another workspace\'s one email');
const BURST = 60;

test.before(async (ctx) => {
  ctx.gate = deferred<void>();
  ctx.held = 0;
  ctx.sink = await startSmtpSink({
    onData: async () => {
      ctx.held++;
      await ctx.gate.promise;
      return {};
    },
  });
  ctx.t = await startTestApp({
    RELAY_DELIVERY: 'smtp',
    RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`,
    // Retries scaled down; the claims' graces stay far above the hold.
    RELAY_DELIVERY_RETRY_SCALE: '0.05',
  }, { processors: true });
  ctx.a = await deliveryTenant(ctx.t);
  ctx.b = await deliveryTenant(ctx.t);
});

test.after(async (ctx) => {
  ctx.gate.resolve();
  await ctx.t.close();
  await ctx.sink.close();
});

test('workspace B\'s one email comes within the first few after workspace A\'s burst is queued', async (ctx) => {
  const { t, a, b, sink } = ctx;
  const burst: string[] = [];
  for (let i = 0; i < BURST; i++) {
    burst.push(await sendPaced(t, a.key, { from: `news@${a.domain}`, to: `reader${i}@example.org`, subject: `Newsletter ${i}`, text: 'This week…' }));
  }
  // The smarthost holds A's first transactions; the rest of the burst is queued behind them.
  await waitUntil(() => ctx.held > 0, 'the smarthost holds A\'s first transactions');
  await waitUntil(async () => (await workItems(t.stores.documents).get(burst[BURST - 1])) !== null, 'A\'s whole burst is in the schedule');
  const code = await sendPaced(t, b.key, { from: `security@${b.domain}`, to: 'someone@example.net', subject: 'Your sign-in code', text: '123456' });
  await waitUntil(async () => (await workItems(t.stores.documents).get(code)) !== null, 'B\'s email is in the schedule');
  const heldAtRelease = ctx.held;
  ctx.gate.resolve();

  const isCode = (m: SmtpSink['messages'][number]) => m.rcptTo.some((r) => r.address === 'someone@example.net');
  await waitUntil(() => sink.messages.some(isCode), 'B\'s email reaches the smarthost', 60_000);
  const before = sink.messages.findIndex(isCode);
  const ofA = sink.messages.slice(0, before).filter((m) => m.rcptTo.some((r) => r.address.startsWith('reader'))).length;
  // A fair turn: the transactions held when B's email was queued, then a few more at most. The
  // sender claims up to twice the smarthost's connections, so as many of A's as were held had
  // been claimed and were waiting for a connection then: they go first, and use up those few.
  const fair = heldAtRelease + 5;
  assert.ok(ofA <= fair, `the smarthost received ${ofA} of workspace A's ${BURST} emails before workspace B's one email `
    + `(${heldAtRelease} were held in flight when B's was queued; a fair turn would put it within the next few)`);
});

test.run();
