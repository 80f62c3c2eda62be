// Defect: the sender looks up the site of each new recipient domain (its MX set) before it
// schedules mail for it, at most 16 lookups at once (MAX_LOOKUPS, apps/services/delivery/sites.ts),
// started in the order the schedule is read: earliest due first, then by (time-ordered) email id
// (apps/processors/sender.ts dueBySite). An item whose domain is not looked up yet is passed
// over, whoever it belongs to. So when one workspace has queued mail for many domains the
// sender has not met yet (a B2B newsletter, a list imported from a CRM), another workspace's
// single email to a new domain gets its lookup only after every one of the burst's domains ahead
// of it: 2,000 such domains keep it waiting for 125 rounds of lookups, and where the burst's
// domains answer slowly or not at all (dead domains on a poorly kept list: a resolver's timeout
// each, 5 s by default here) that is minutes to over ten minutes, before the email is even tried.
// dueBySite reads at most 10 pages of 128 items per look, so an email behind 1,280 unresolved
// items is not even seen until the burst's lookups have moved them on.
//
// Why it matters: Relay is multi-tenant; one customer's list of new domains must not hold up
// another customer's password reset. The lookup bound protects the DNS resolver; it should not
// be spent first-come-first-served across tenants.
//
// Correct behaviour: the lookup slots are shared out between workspaces (turns, or at most a
// share of MAX_LOOKUPS each while another workspace's mail waits), so a workspace's one new
// domain is looked up within the next few lookups, not after the whole burst's.
//
// The test: 40 emails of workspace A to 40 new domains whose resolver holds the MX answers (a
// slow authoritative server) until workspace B's one email, to a new domain that answers at once,
// is in the schedule; then every held answer is given. B's domain's MX question should come
// within the first few after the 16 held; it comes after nearly all of A's.
import dgram from 'node:dgram';
import dnsPacket from 'dns-packet';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { workItems } from '../apps/services/delivery/work-items.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, sendPaced, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

const BURST = 40;
const MX = 'mx.shared.test';
const domainOfA = (i: number) => `company${i}.test`;
const DOMAIN_OF_B = 'customer-of-b.test';

/**
 * A resolver in front of the test DNS server that holds the MX questions for `held` names
 * until released (an authoritative server that is slow to answer), and records the order of
 * the MX questions it is asked.
 */
interface HoldingResolver { address: string; mxQuestions: string[]; heldNow: number; release(): void; close(): Promise<void> }

async function startHoldingResolver(upstream: TestDnsServer, held: (name: string) => boolean): Promise<HoldingResolver> {
  const socket = dgram.createSocket('udp4');
  let released = false;
  const waiting: Array<() => void> = [];
  const resolver: HoldingResolver = {
    address: '',
    mxQuestions: [],
    heldNow: 0,
    release() {
      released = true;
      for (const go of waiting.splice(0)) go();
      resolver.heldNow = 0;
    },
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
  const forward = (message: Buffer, to: dgram.RemoteInfo) => {
    const out = dgram.createSocket('udp4');
    out.on('message', (reply) => {
      socket.send(reply, to.port, to.address);
      out.close();
    });
    out.on('error', () => out.close());
    out.send(message, upstream.port, '127.0.0.1');
  };
  socket.on('message', (message, from) => {
    let question: { name: string; type: string } | undefined;
    try {
      question = dnsPacket.decode(message).questions?.[0];
    } catch {
      return;
    }
    const name = question?.name.toLowerCase() ?? '';
    if (question?.type === 'MX' && !resolver.mxQuestions.includes(name)) resolver.mxQuestions.push(name);
    if (question?.type === 'MX' && held(name) && !released) {
      resolver.heldNow++;
      waiting.push(() => forward(message, from));
      return;
    }
    forward(message, from);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
  resolver.address = `127.0.0.1:${socket.address().port}`;
  return resolver;
}

interface Context { dns: TestDnsServer; resolver: HoldingResolver; sink: SmtpSink; t: TestApp; a: DeliveryTenant; b: DeliveryTenant }

const test = suite<Context>('sender: site lookups of one workspace\'s new domains and another workspace\'s one new domain');

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
  ctx.resolver = await startHoldingResolver(ctx.dns, (name) => /^company\d+\.test$/.test(name));
  ctx.sink = await startSmtpSink();
  ctx.t = await startTestApp({
    RELAY_DELIVERY: 'mx',
    RELAY_DNS_SERVERS: ctx.resolver.address,
    RELAY_MX_PORT: String(ctx.sink.port),
    RELAY_MX_ALLOW: '127.0.0.1',
    RELAY_DELIVERY_RETRY_SCALE: '0.05',
  }, { processors: true });
  ctx.a = await deliveryTenant(ctx.t);
  ctx.b = await deliveryTenant(ctx.t);
  const zone: ZoneRecord[] = [...ctx.a.zone, ...ctx.b.zone, { name: MX, type: 'A', data: '127.0.0.1' }];
  for (let i = 0; i < BURST; i++) zone.push({ name: domainOfA(i), type: 'MX', data: { preference: 10, exchange: MX } });
  zone.push({ name: DOMAIN_OF_B, type: 'MX', data: { preference: 10, exchange: MX } });
  ctx.dns.setZone(zone);
});

test.after(async (ctx) => {
  ctx.resolver.release();
  await ctx.t.close();
  await ctx.sink.close();
  await ctx.resolver.close();
  await ctx.dns.close();
});

test('workspace B\'s one new domain is looked up within the next few lookups after workspace A\'s burst of new domains', async (ctx) => {
  const { t, a, b, resolver } = ctx;
  const burst: string[] = [];
  for (let i = 0; i < BURST; i++) {
    burst.push(await sendPaced(t, a.key, { from: `news@${a.domain}`, to: `buyer@${domainOfA(i)}`, subject: `Our offer ${i}`, text: 'This month…' }));
  }
  await waitUntil(async () => (await workItems(t.stores.documents).get(burst[BURST - 1])) !== null, 'A\'s whole burst is in the schedule');
  await waitUntil(() => resolver.heldNow > 0, 'the resolver holds the lookups of A\'s domains');
  const reset = await sendPaced(t, b.key, { from: `security@${b.domain}`, to: `someone@${DOMAIN_OF_B}`, subject: 'Your password reset code', text: '123456' });
  await waitUntil(async () => (await workItems(t.stores.documents).get(reset)) !== null, 'B\'s email is in the schedule');
  const heldAtRelease = resolver.heldNow;
  const askedAtRelease = resolver.mxQuestions.length;
  resolver.release();

  await waitUntil(() => resolver.mxQuestions.includes(DOMAIN_OF_B), 'B\'s domain is looked up', 60_000);
  const ofA = resolver.mxQuestions.indexOf(DOMAIN_OF_B);
  // A fair share: the lookups under way when B's email was queued, then a few more at most.
  const fair = askedAtRelease + 5;
  assert.ok(ofA <= fair, `${ofA} of workspace A's ${BURST} new domains were looked up before workspace B's one `
    + `(${heldAtRelease} lookups were held, ${askedAtRelease} asked, when B's email was queued; a fair share would look B's up within the next few)`);
});

test.run();
