// A site shaped to a low rate lets one message through per slot; the sender's other picks for it
// are moved to the site's next free slot (apps/processors/sender.ts takeSiteSlot), together. At
// each slot the sender's look at the schedule picks the site's due mail in workspace turns, and
// the first picked takes the slot, so which workspace goes first has to move on from look to
// look: were it the same each time, workspace B's one email would lose every slot to workspace
// A's backlog, moved to the same slots, until that backlog was sent.
//
// The test: a site shaped to 30 messages a minute (spacing scaled down), workspace A's burst
// queued for it and being sent; then workspace B's one email to the same site. B's message
// should reach the MX within a slot or two of being queued, not after A's backlog.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { workItems } from '../apps/services/delivery/work-items.ts';
import { sendPaced } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import type { SmtpSink } from './support/smtp-sink.ts';
import { startShapedSites, type ShapedSites } from './support/shaped-sites.ts';

const test = suite<ShapedSites>('sender: a rate-shaped site\'s slots, one workspace\'s backlog and another workspace\'s one email');
const MX = 'mx.slow.test';
const SLOW = 'slow.test';
const BURST = 20;

test.before(async (ctx) => {
  // Slots 100 ms apart (with retries scaled down).
  Object.assign(ctx, await startShapedSites({ [SLOW]: MX }, `${MX} messages_per_minute=30\n`));
});

test.after((ctx) => ctx.close());

test('workspace B\'s one email takes one of the next slots of a site where workspace A\'s backlog waits for its slots', async (ctx) => {
  const { t, a, b, sink } = ctx;
  const isA = (m: SmtpSink['messages'][number]) => m.rcptTo.some((r) => r.address.startsWith('reader'));
  const burst: string[] = [];
  for (let i = 0; i < BURST; i++) {
    burst.push(await sendPaced(t, a.key, { from: `news@${a.domain}`, to: `reader${i}@${SLOW}`, subject: `Newsletter ${i}`, text: 'This week…' }));
  }
  await waitUntil(async () => (await workItems(t.stores.documents).get(burst[BURST - 1])) !== null, 'A\'s whole burst is in the schedule');
  await waitUntil(() => sink.messages.some(isA), 'the site receives A\'s first messages');
  const reset = await sendPaced(t, b.key, { from: `security@${b.domain}`, to: `someone@${SLOW}`, subject: 'Your password reset code', text: '123456' });
  await waitUntil(async () => (await workItems(t.stores.documents).get(reset)) !== null, 'B\'s email is in the schedule');
  const ofAAtQueue = sink.messages.filter(isA).length;
  assert.ok(ofAAtQueue < BURST - 3, `A's backlog is still waiting when B's email is queued (${ofAAtQueue} of ${BURST} sent)`);

  const isReset = (m: SmtpSink['messages'][number]) => m.rcptTo.some((r) => r.address === `someone@${SLOW}`);
  await waitUntil(() => sink.messages.some(isReset), 'B\'s email reaches the MX', 90_000);
  const ofA = sink.messages.slice(0, sink.messages.findIndex(isReset)).filter(isA).length;
  // The slot under way when B's email was queued, then A's turn and B's, at most.
  assert.ok(ofA <= ofAAtQueue + 3, `the site let ${ofA - ofAAtQueue} more of workspace A's messages through before workspace B's one (${ofAAtQueue} of ${BURST} had gone when it was queued)`);
});

test.run();
