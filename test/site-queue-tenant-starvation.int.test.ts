// Defect: the sender serves a recipient site's due mail strictly earliest first (by due time,
// then email id: apps/processors/sender.ts dueBySite over the `deliveries` schedule), with no
// notion of whose mail it is. A site's connections and rate (domain/delivery/sites.ts, by
// default 5 connections and 600 messages a minute per sender) are shared by every workspace
// sending to that mailbox provider, so once one workspace has queued a burst for a site (a
// newsletter to Gmail users, say), another workspace's single email to the same site, admitted
// a moment later, goes out only after the whole burst: 2,000 queued messages at the default
// 600 a minute keep a password reset from another customer waiting more than three minutes,
// and a site an operator shaped lower (or one that throttled Relay, which halves its rate)
// for far longer.
//
// Why it matters: Relay is multi-tenant; a customer of a transactional service expects its
// one email to go out within moments whatever another customer is sending. The dispatcher
// already keeps one site's backlog from holding up other sites ("no site holds up the others",
// apps/processors/sender.ts) and the webhooks keep one project's backlog from holding up
// another's (apps/services/webhooks/project-shares.ts); within a site, workspaces get no turns.
//
// Correct behaviour: within a site's connections and rate, workspaces take turns (or each has a
// share), so a workspace with one email due waits behind at most a few of another's, not its
// whole backlog.
//
// The test: default site limits (no shaping file). The shared MX holds its first answers until
// workspace B's one email is in the schedule, so that workspace A's burst is queued for the site
// at that moment; then it answers everything at once. B's message should be among the first few
// the MX receives after the held ones; it arrives after every one of A's.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { workItems } from '../apps/services/delivery/work-items.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, sendPaced, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context { dns: TestDnsServer; sink: SmtpSink; t: TestApp; a: DeliveryTenant; b: DeliveryTenant; gate: ReturnType<typeof deferred<void>>; held: number }

const test = suite<Context>('sender: one workspace\'s burst to a site and another workspace\'s one email to it');
const MX = 'mx.provider.test';
const PROVIDER = 'provider.test';
const BURST = 60;

test.before(async (ctx) => {
  ctx.gate = deferred<void>();
  ctx.held = 0;
  ctx.dns = await startDnsServer([]);
  ctx.sink = await startSmtpSink({
    onData: async () => {
      ctx.held++;
      await ctx.gate.promise;
      return {};
    },
  });
  ctx.t = await startTestApp({
    RELAY_DELIVERY: 'mx',
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_MX_PORT: String(ctx.sink.port),
    RELAY_MX_ALLOW: '127.0.0.1',
    // Spacing, pauses and retries scaled down; the claim's grace stays far above the hold.
    RELAY_DELIVERY_RETRY_SCALE: '0.05',
  }, { processors: true });
  ctx.a = await deliveryTenant(ctx.t);
  ctx.b = await deliveryTenant(ctx.t);
  ctx.dns.setZone([
    ...ctx.a.zone, ...ctx.b.zone,
    { name: PROVIDER, type: 'MX', data: { preference: 10, exchange: MX } },
    { name: MX, type: 'A', data: '127.0.0.1' },
  ]);
});

test.after(async (ctx) => {
  ctx.gate.resolve();
  await ctx.t.close();
  await ctx.sink.close();
  await ctx.dns.close();
});

test('workspace B\'s one email to a site comes within the first few after workspace A\'s burst to it is queued', async (ctx) => {
  const { t, a, b, sink } = ctx;
  const burst: string[] = [];
  for (let i = 0; i < BURST; i++) {
    burst.push(await sendPaced(t, a.key, { from: `news@${a.domain}`, to: `reader${i}@${PROVIDER}`, subject: `Newsletter ${i}`, text: 'This week…' }));
  }
  // A's burst is at the site: the first transactions are held at the MX, the rest queued.
  await waitUntil(() => ctx.held > 0, 'the MX holds A\'s first transactions');
  await waitUntil(async () => (await workItems(t.stores.documents).get(burst[BURST - 1])) !== null, 'A\'s whole burst is in the schedule');
  const reset = await sendPaced(t, b.key, { from: `security@${b.domain}`, to: `someone@${PROVIDER}`, subject: 'Your password reset code', text: '123456' });
  await waitUntil(async () => (await workItems(t.stores.documents).get(reset)) !== null, 'B\'s email is in the schedule');
  const heldAtRelease = ctx.held;
  ctx.gate.resolve();

  const isReset = (m: SmtpSink['messages'][number]) => m.rcptTo.some((r) => r.address === `someone@${PROVIDER}`);
  await waitUntil(() => sink.messages.some(isReset), 'B\'s email reaches the MX', 60_000);
  const before = sink.messages.findIndex(isReset);
  const ofA = sink.messages.slice(0, before).filter((m) => m.rcptTo.some((r) => r.address.startsWith('reader'))).length;
  // A fair turn: the transactions held when B's email was queued, then a few more at most.
  const fair = heldAtRelease + 5;
  assert.ok(ofA <= fair, `the MX received ${ofA} of workspace A's ${BURST} emails before workspace B's one email `
    + `(${heldAtRelease} were held in flight when B's was queued; a fair turn would put it within the next few)`);
});

test.run();
