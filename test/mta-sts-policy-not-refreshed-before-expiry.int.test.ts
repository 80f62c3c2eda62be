// Defect: a cached MTA-STS policy is never refreshed while its id stays the same. Relay fetches
// a policy once and keeps it until its max_age ends, however long that is and however often
// mail goes to the domain; only at expiry does it fetch again. So a policy host that answered
// every day for a week but cannot be reached at the moment the week's policy expires (an
// attacker blocking it, or an outage) leaves the domain with no policy: mail then goes to any
// MX, over any TLS or none, for at least the 5 minutes before the next try.
//
// Why it matters: RFC 8461 3.3: "to mitigate the risk of persistent interference with policy
// refresh, as discussed in-depth in Section 10, MTAs SHOULD proactively refresh cached policies
// before they expire; a suggested refresh frequency is once per day." Section 10.2 explains
// that this refresh is what makes a long max_age protect against an attacker who can block the
// policy host only around expiry. Postfix's mta-sts resolver and other MTAs refresh proactively.
//
// Correct behaviour: a policy older than about a day is fetched again (same id) when mail goes to
// the domain, which renews its max_age; a policy host unreachable right at the first fetch's
// expiry then leaves the renewed policy in force, and mail keeps going only to the MX hosts the
// policy lists.
//
// Through real interfaces: the real mx transport and MTA-STS resolver (its clock moved by the
// test), the test DNS server, a real HTTPS policy host and a real SMTP sink whose certificate
// (test CA) names both MX hosts.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MtaStsResolver } from '../infra/mail/mta-sts.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context { ca: TestCa; dns: TestDnsServer; sink: SmtpSink; policies: PolicyServer; now: number; transport?: MxTransport }

const WEEK_S = 7 * 86_400;
const DAY_MS = 86_400_000;
const test = suite<Context>('MTA-STS: a cached policy is refreshed before it expires');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  const mxCert = ctx.ca.issue(['good.weekly.test', 'mx.unlisted.test']);
  ctx.sink = await startSmtpSink({ cert: { key: Buffer.from(mxCert.key), cert: Buffer.from(mxCert.cert) } });
  ctx.policies = await startPolicyServer(ctx.ca.issue(['mta-sts.weekly.test']));
  ctx.policies.policies.set('weekly.test', policyText('enforce', ['good.weekly.test'], WEEK_S));
  ctx.dns = await startDnsServer([
    // The preferred MX is not in the policy: only the policy keeps mail away from it.
    { name: 'weekly.test', type: 'MX', data: { preference: 5, exchange: 'mx.unlisted.test' } },
    { name: 'weekly.test', type: 'MX', data: { preference: 20, exchange: 'good.weekly.test' } },
    { name: 'mx.unlisted.test', type: 'A', data: '127.0.0.1' },
    { name: 'good.weekly.test', type: 'A', data: '127.0.0.1' },
    { name: '_mta-sts.weekly.test', type: 'TXT', data: 'v=STSv1; id=w1' },
    { name: 'mta-sts.weekly.test', type: 'A', data: '127.0.0.1' },
  ]);
  ctx.now = Date.now();
});

test.after(async (ctx) => {
  await ctx.transport?.close();
  await ctx.sink?.close();
  await ctx.policies?.close();
  await ctx.dns?.close();
  ctx.ca?.remove();
});

const message = (to: string): OutgoingMessage => ({
  emailId: 'em_weekly', envelope: { mailFrom: 'b@bounce.example.test', recipients: [to] }, raw: Buffer.from('From: a@example.test\r\nSubject: sts\r\n\r\nhi\r\n'), messageId: 'weekly@example.test',
});

test('a week-long policy, its host answering every day, still applies when the host is unreachable right after the first fetch\'s expiry', async (ctx) => {
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
  const allowAddresses = new Set(['127.0.0.1']);
  const transport = (ctx.transport = new MxTransport({
    dnsServers: [], dns, heloName: 'relay.example.test', port: ctx.sink.port, tls: { ca: ctx.ca.ca }, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses,
    mtaSts: new MtaStsResolver({ dns, port: ctx.policies.port, ca: ctx.ca.ca, allowAddresses, fetchTimeoutMs: 2000, now: () => ctx.now }),
  }));
  const start = ctx.now;
  // Mail every day of the week, the policy host answering throughout.
  for (let day = 0; day < 7; day++) {
    ctx.now = start + day * DAY_MS + 60_000;
    const outcome = await transport.send(message(`day${day}@weekly.test`));
    assert.equal(outcome.recipients.map((r) => r.result), ['delivered']);
    assert.is(ctx.sink.messages.at(-1)!.servername, 'good.weekly.test', `day ${day}: enforced`);
  }
  const fetches = ctx.policies.fetches.get('weekly.test') ?? 0;
  // The policy host goes away (blocked) just after the first fetch's max_age ends.
  await ctx.policies.close();
  ctx.now = start + WEEK_S * 1000 + 120_000;
  const outcome = await transport.send(message('late@weekly.test'));
  assert.equal(outcome.recipients.map((r) => r.result), ['delivered']);
  assert.is(
    ctx.sink.messages.at(-1)!.servername, 'good.weekly.test',
    `the policy was fetched ${fetches} time(s) in 7 days of mail; once it expired with its host unreachable, mail went to the MX the policy does not list`,
  );
});

test.run();
