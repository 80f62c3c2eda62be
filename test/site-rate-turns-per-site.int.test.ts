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
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { workItems } from '../apps/services/delivery/work-items.ts';
import { sendPaced } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import type { SmtpSink } from './support/smtp-sink.ts';
import { startShapedSites, type ShapedSites } from './support/shaped-sites.ts';

const test = suite<ShapedSites>('sender: a rate-shaped site\'s slots go in turns there, whatever the workspaces send elsewhere');
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
  // The shaped site's slots 250 ms apart (with retries scaled down).
  Object.assign(ctx, await startShapedSites({ [SHAPED]: SHAPED_MX, [ELSEWHERE]: ELSEWHERE_MX }, `${SHAPED_MX} messages_per_minute=12\n`, {
    onData: async (_raw, session) => {
      if (session.envelope.rcptTo.some((r) => r.address.endsWith(`@${ELSEWHERE}`))) await new Promise((resolve) => setTimeout(resolve, ELSEWHERE_ANSWER_MS));
      return {};
    },
  }));
});

test.after((ctx) => ctx.close());

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
