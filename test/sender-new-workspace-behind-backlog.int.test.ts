// A workspace's new email is in the sender's next turns at once, however long another workspace's
// backlog and however many workspaces have mail scheduled (apps/processors/sender.ts dueBySite).
//
// A look at the schedule reads its earliest page (what is due, whoever's it is) and, behind a
// backlog longer than that page, finds other workspaces with due mail by a scan of a few reads a
// look (its cost must not grow with the workspaces whose mail is all due later:
// test/sender-look-cost-grows-with-idle-workspaces.int.test.ts). First attempts are dated 1970 and
// ordered by their time-ordered ids, so the earliest page holds only the backlog; a third
// workspace's new email used to be found only when the scan reached it, or once the backlog had
// shrunk to less than a page: with 1,000 workspaces holding a retry due later, after 135 of a
// 150-email burst instead of after about 10. The sender's consumer writes that email's work item
// itself, so it can give its workspace a turn in the next look.
//
// The test, through a smarthost (the sender's window is then 20 items): 1,000 workspaces each hold a
// retry due in an hour (named to come before the tenants' workspaces in the scan); workspace B has
// sent before (its first email's one-off costs, its domain's key, are behind it); the smarthost holds
// workspace A's first transactions while A's burst of 150 is queued behind them, until B's new email
// is in the schedule; then it answers everything. B's email should come right after the transactions
// the sender had already started, well before A's 30th.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { workItems, type WorkItem } from '../apps/services/delivery/work-items.ts';
import { originOfRequest } from '../domain/events/metadata.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, sendPaced, type DeliveryTenant } from './support/delivery.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context { sink: SmtpSink; t: TestApp; a: DeliveryTenant; b: DeliveryTenant; gate: ReturnType<typeof deferred<void>>; held: number }

const test = suite<Context>('sender: a workspace\'s new email behind another\'s backlog longer than a page, with 1,000 workspaces\' retries scheduled');
const IDLE_WORKSPACES = 1_000;
const BURST = 150;

test.before(async (ctx) => {
  ctx.gate = deferred<void>();
  ctx.held = 0;
  ctx.sink = await startSmtpSink({
    onData: async (_raw, session) => {
      if (!session.envelope.rcptTo.some((r) => r.address.startsWith('reader'))) return {};
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
  }, { processors: ['sender'] });
  ctx.a = await deliveryTenant(ctx.t);
  ctx.b = await deliveryTenant(ctx.t);
});

test.after(async (ctx) => {
  ctx.gate.resolve();
  await ctx.t.close();
  await ctx.sink.close();
});

test('workspace B\'s new email is sent before workspace A\'s 30th, behind A\'s burst of 150 and 1,000 workspaces\' retries', async (ctx) => {
  const { t, a, b, sink } = ctx;
  // Each workspace's retry, as the sender writes it after a deferral (never due here, so its stream is not needed).
  // Workspace ids begin "ws_": these come first in the scan's workspace order.
  const later = new Date(t.ctx.now().getTime() + 3_600_000).toISOString();
  const retries = Array.from({ length: IDLE_WORKSPACES }, (_, i): WorkItem => ({
    _id: `em_retry_${String(i).padStart(5, '0')}`, step: 'attempt', attempt: 2, dueAt: later, streamRevision: 3,
    origin: originOfRequest(`retry-${i}`), domain: 'greylisting.example', workspaceId: `0-retrying-${String(i).padStart(5, '0')}`,
  }));
  for (let i = 0; i < retries.length; i += 100) await workItems(t.stores.documents).insertMany!(retries.slice(i, i + 100));

  const isWelcome = (m: SmtpSink['messages'][number]) => m.rcptTo.some((r) => r.address === 'welcome@example.net');
  await sendPaced(t, b.key, { from: `security@${b.domain}`, to: 'welcome@example.net', subject: 'Welcome', text: 'Hello' });
  await waitUntil(() => sink.messages.some(isWelcome), 'B\'s earlier email reaches the smarthost');

  const burst: string[] = [];
  for (let i = 0; i < BURST; i++) {
    burst.push(await sendPaced(t, a.key, { from: `news@${a.domain}`, to: `reader${i}@example.org`, subject: `Newsletter ${i}`, text: 'This week…' }));
  }
  await waitUntil(() => ctx.held > 0, 'the smarthost holds A\'s first transactions');
  await waitUntil(async () => (await workItems(t.stores.documents).get(burst[BURST - 1])) !== null, 'A\'s whole burst is in the schedule');
  const code = await sendPaced(t, b.key, { from: `security@${b.domain}`, to: 'someone@example.net', subject: 'Your sign-in code', text: '123456' });
  await waitUntil(async () => (await workItems(t.stores.documents).get(code)) !== null, 'B\'s email is in the schedule');
  const heldAtRelease = ctx.held;
  ctx.gate.resolve();

  const isCode = (m: SmtpSink['messages'][number]) => m.rcptTo.some((r) => r.address === 'someone@example.net');
  await waitUntil(() => sink.messages.some(isCode), 'B\'s email reaches the smarthost', 120_000);
  const ofA = sink.messages.slice(0, sink.messages.findIndex(isCode)).filter((m) => m.rcptTo.some((r) => r.address.startsWith('reader'))).length;
  // The sender claims up to twice the smarthost's 5 connections: those it had claimed go first, then B's.
  assert.ok(ofA < 30, `the smarthost received ${ofA} of workspace A's ${BURST} emails before workspace B's new one `
    + `(${heldAtRelease} were held when B's was queued, with ${IDLE_WORKSPACES} workspaces' retries scheduled for later)`);
});

test.run();
