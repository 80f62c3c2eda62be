// What a send makes the API process remember of its recipient domains. Each send reads what the
// workspace's records say about its domain names (apps/services/admission.ts, domainFacts)
// through the reused reads of management documents (apps/services/management/reused-reads.ts),
// keyed by the workspace id and every distinct recipient domain joined: with a development key,
// up to 50 names of up to 252 characters, about 12.7 KB a key. Such sends are refused 422
// (test_recipient_not_allowed) and give their rate slot back, so one development key sends them
// without end. A read is reused for 250 ms: past that nothing needs it, and it goes, rather than
// staying until 10,000 entries (some 120 MiB of keys) are held.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { settledHeapUsed } from './support/heap.ts';


const MiB = 1024 * 1024;
const SENDS = 600;
/** Entries the reused reads of one kind hold before they are forgotten (reused-reads.ts LIMIT). */
const LIMIT = 10_000;
/** What the other caches filled by senders' choices are held to: tens of MiB. */
const BUDGET = 32 * MiB;

interface Fixture { t: TestApp; tenant: DeliveryTenant }
const test = suite<Fixture>('memory a development key\'s refused sends leave in the API process');

test.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.tenant = await deliveryTenant(f.t, 'dev-sender.example.test', 'development');
});

test.after(async (f) => {
  await f.t.close();
});


// Labels of 63 characters: a recipient domain of 249 characters, a send's 50 of them distinct.
const label = (seed: string) => seed.padEnd(63, 'x');
const domainOf = (send: number, recipient: number) => `${label(`s${send}r${recipient}`)}.${label('a')}.${label('b')}.${'c'.repeat(52)}.test`;

async function refusedSend(f: Fixture, send: number): Promise<void> {
  const to = Array.from({ length: 50 }, (_, r) => `u@${domainOf(send, r)}`);
  const response = await fetch(`${f.t.url}/v1/emails`, {
    method: 'POST',
    headers: { authorization: `Bearer ${f.tenant.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ from: `app@${f.tenant.domain}`, to, subject: 'hi', text: 'hello' }),
  });
  const body = await response.text();
  // The positive marker: the send was refused for its recipients' domains, after they were read.
  assert.is(response.status, 422, body);
  assert.match(body, /"test_recipient_not_allowed"/);
}

test(`${SENDS} refused development sends to 50 long domains each: what stays on the heap, times the ${LIMIT} entries kept, is within ${BUDGET / MiB} MiB`, async (f) => {
  assert.is(domainOf(0, 0).length, 249);
  // Warm up: every code path compiled, every first-use structure made.
  for (let i = 0; i < 50; i++) await refusedSend(f, -1 - i);
  const before = await settledHeapUsed();
  for (let i = 0; i < SENDS; i++) await refusedSend(f, i);
  // Long past the 250 ms a read is reused for: nothing needs these entries any more.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const after = await settledHeapUsed();
  const perSend = (after - before) / SENDS;
  const atBound = perSend * LIMIT;
  assert.ok(atBound < BUDGET,
    `each refused send left ${Math.round(perSend / 1024)} KiB on the heap (${Math.round((after - before) / MiB)} MiB for ${SENDS}, still held after they expired): at the ${LIMIT} entries kept, ${Math.round(atBound / MiB)} MiB`);
});

test.run();
