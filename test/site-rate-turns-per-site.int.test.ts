// Workspaces take turns at each recipient site, whatever they send elsewhere (apps/processors/sender.ts
// dueBySite, per-site turns). A site shaped to a low rate lets one message through per slot, and the
// first of the sender's picks for it to start takes that slot (the others move to the next one). Were
// the order of those picks the order of the sender's turns over its whole schedule, which go first to
// the workspace whose last email started longest ago anywhere, a workspace that keeps sending to
// other sites would always count as just served, and its one email to the shaped site would lose
// every slot there to another workspace's backlog at that site, however long it waited there (a
// reviewer measured 12 slots of 12).
//
// The test: a site shaped to 12 messages a minute (slots 250 ms apart, scaled down), workspace B's
// backlog queued for it and being sent; workspace A's burst to another site (a slow one: 250 ms a
// message over its 5 connections) being sent; then A's one email to the shaped site. It should take
// one of the next slots there, not wait until A's burst elsewhere is over or B's backlog is sent.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { workItems } from '../apps/services/delivery/work-items.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, sendPaced, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context { dir: string; dns: TestDnsServer; sink: SmtpSink; t: TestApp; a: DeliveryTenant; b: DeliveryTenant }

const test = suite<Context>('sender: a rate-shaped site\'s slots go in turns there, whatever the workspaces send elsewhere');
const SHAPED = 'shaped.test';
const SHAPED_MX = 'mx.shaped.test';
const ELSEWHERE = 'elsewhere.test';
const ELSEWHERE_MX = 'mx.elsewhere.test';
/** B's backlog at the shaped site: 10 s of its slots. */
const BACKLOG = 40;
/** A's burst to the other site: at least 5 s of its connections. */
const BURST = 100;
/** How long the other site takes to answer each message (its 5 connections: a start every 50 ms or so). */
const ELSEWHERE_ANSWER_MS = 250;

test.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-site-turns-'));
  const shaping = join(ctx.dir, 'shaping.conf');
  writeFileSync(shaping, `${SHAPED_MX} messages_per_minute=12\n`);
  ctx.dns = await startDnsServer([]);
  ctx.sink = await startSmtpSink({
    onData: async (_raw, session) => {
      if (session.envelope.rcptTo.some((r) => r.address.endsWith(`@${ELSEWHERE}`))) await new Promise((resolve) => setTimeout(resolve, ELSEWHERE_ANSWER_MS));
      return {};
    },
  });
  ctx.t = await startTestApp({
    RELAY_DELIVERY: 'mx',
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_MX_PORT: String(ctx.sink.port),
    RELAY_MX_ALLOW: '127.0.0.1',
    RELAY_SHAPING_FILE: shaping,
    // The shaped site's slots 250 ms apart; retries scaled down too.
    RELAY_DELIVERY_RETRY_SCALE: '0.05',
  }, { processors: true });
  ctx.a = await deliveryTenant(ctx.t);
  ctx.b = await deliveryTenant(ctx.t);
  ctx.dns.setZone([
    ...ctx.a.zone, ...ctx.b.zone,
    { name: SHAPED, type: 'MX', data: { preference: 10, exchange: SHAPED_MX } },
    { name: SHAPED_MX, type: 'A', data: '127.0.0.1' },
    { name: ELSEWHERE, type: 'MX', data: { preference: 10, exchange: ELSEWHERE_MX } },
    { name: ELSEWHERE_MX, type: 'A', data: '127.0.0.1' },
  ]);
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.sink.close();
  await ctx.dns.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

test('workspace A\'s one email takes one of the next slots of the shaped site while A keeps sending elsewhere and B\'s backlog waits there', async (ctx) => {
  const { t, a, b, sink } = ctx;
  const to = (m: SmtpSink['messages'][number], suffix: string) => m.rcptTo.some((r) => r.address.endsWith(suffix));
  const isB = (m: SmtpSink['messages'][number]) => to(m, `@${SHAPED}`) && m.rcptTo.some((r) => r.address.startsWith('customer'));
  const isAElsewhere = (m: SmtpSink['messages'][number]) => to(m, `@${ELSEWHERE}`);

  const backlog: string[] = [];
  for (let i = 0; i < BACKLOG; i++) {
    backlog.push(await sendPaced(t, b.key, { from: `shop@${b.domain}`, to: `customer${i}@${SHAPED}`, subject: `Your order ${i}`, text: 'Shipped.' }));
  }
  await waitUntil(async () => (await workItems(t.stores.documents).get(backlog[BACKLOG - 1])) !== null, 'B\'s whole backlog is in the schedule');
  await waitUntil(() => sink.messages.some(isB), 'the shaped site receives B\'s first messages');

  const burst: string[] = [];
  for (let i = 0; i < BURST; i++) {
    burst.push(await sendPaced(t, a.key, { from: `news@${a.domain}`, to: `reader${i}@${ELSEWHERE}`, subject: `Newsletter ${i}`, text: 'This week…' }));
  }
  await waitUntil(() => sink.messages.some(isAElsewhere), 'the other site receives A\'s first messages');

  const code = await sendPaced(t, a.key, { from: `security@${a.domain}`, to: `someone@${SHAPED}`, subject: 'Your sign-in code', text: '123456' });
  await waitUntil(async () => (await workItems(t.stores.documents).get(code)) !== null, 'A\'s email to the shaped site is in the schedule');
  const ofBAtQueue = sink.messages.filter(isB).length;
  const ofAElsewhereAtQueue = sink.messages.filter(isAElsewhere).length;
  assert.ok(ofBAtQueue < BACKLOG - 10, `B's backlog is still waiting at the shaped site when A's email is queued (${ofBAtQueue} of ${BACKLOG} sent)`);
  assert.ok(ofAElsewhereAtQueue < BURST - 20, `A's burst elsewhere is still being sent when its email to the shaped site is queued (${ofAElsewhereAtQueue} of ${BURST} sent)`);

  const isCode = (m: SmtpSink['messages'][number]) => m.rcptTo.some((r) => r.address === `someone@${SHAPED}`);
  await waitUntil(() => sink.messages.some(isCode), 'A\'s email reaches the shaped site', 90_000);
  const before = sink.messages.slice(0, sink.messages.findIndex(isCode));
  const ofB = before.filter(isB).length;
  const ofAElsewhere = before.filter(isAElsewhere).length;
  // The slot under way when A's email was queued, then a turn of B's and A's, at most.
  assert.ok(ofB <= ofBAtQueue + 3, `the shaped site let ${ofB - ofBAtQueue} more of workspace B's messages through before workspace A's one `
    + `(${ofBAtQueue} of ${BACKLOG} had gone when it was queued; meanwhile A sent ${ofAElsewhere - ofAElsewhereAtQueue} to the other site)`);
});

test.run();
