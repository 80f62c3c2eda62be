// TLS reports count sessions (RFC 8460 4.4: the summary's counts and each failure detail's
// failed-session-count are sessions), not messages: a message that reuses a pooled connection
// adds nothing, whether the MX host is one an MTA-STS policy in `testing` mode does not list or
// the domain's policy could not be fetched. A fetch failure the resolver remembers (5 minutes)
// is counted with each new session made meanwhile, once per session.
//
// Through real interfaces: the mx transport and MTA-STS resolver, the test DNS server, a real
// HTTPS policy host (which answers 404 for a domain without a policy file) and a real SMTP server
// whose certificate (test CA) names the MX host; sessions as the TLS report sink receives them.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MtaStsResolver } from '../infra/mail/mta-sts.ts';
import { MxTransport, type MxTransportOptions } from '../infra/mail/mx-transport.ts';
import type { TlsSessionResult } from '../infra/mail/tls-sessions.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context { ca: TestCa; dns: TestDnsServer; sink: SmtpSink; policies: PolicyServer; sessions: TlsSessionResult[]; transport?: MxTransport }

const message = (to: string): OutgoingMessage => ({
  emailId: 'em_count', envelope: { mailFrom: 'b@bounce.example.test', recipients: [to] }, raw: Buffer.from('From: a@example.test\r\nSubject: count\r\n\r\nhi\r\n'), messageId: 'count@example.test',
});

const test = suite<Context>('TLS reports: each session counted once');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  const mxCert = ctx.ca.issue(['mx.shared.test']);
  ctx.sink = await startSmtpSink({ cert: { key: Buffer.from(mxCert.key), cert: Buffer.from(mxCert.cert) } });
  ctx.policies = await startPolicyServer(ctx.ca.issue(['mta-sts.testing.test', 'mta-sts.nopolicy.test']));
  ctx.policies.policies.set('testing.test', policyText('testing', ['good.testing.test']));
  // nopolicy.test publishes an id but no policy file: every fetch is a 404.
  ctx.dns = await startDnsServer([
    { name: 'testing.test', type: 'MX', data: { preference: 10, exchange: 'mx.shared.test' } },
    { name: 'nopolicy.test', type: 'MX', data: { preference: 10, exchange: 'mx.shared.test' } },
    { name: 'mx.shared.test', type: 'A', data: '127.0.0.1' },
    { name: '_mta-sts.testing.test', type: 'TXT', data: 'v=STSv1; id=t1' },
    { name: '_mta-sts.nopolicy.test', type: 'TXT', data: 'v=STSv1; id=n1' },
    { name: 'mta-sts.testing.test', type: 'A', data: '127.0.0.1' },
    { name: 'mta-sts.nopolicy.test', type: 'A', data: '127.0.0.1' },
  ]);
});

test.before.each((ctx) => {
  ctx.sessions = [];
});

test.after.each(async (ctx) => {
  await ctx.transport?.close();
  ctx.transport = undefined;
});

test.after(async (ctx) => {
  await ctx.sink.close();
  await ctx.policies.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

function transport(ctx: Context, options: Partial<MxTransportOptions> = {}): MxTransport {
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
  const allowAddresses = new Set(['127.0.0.1']);
  ctx.transport = new MxTransport({
    dnsServers: [], dns, heloName: 'relay.example.test', port: ctx.sink.port, tls: { ca: ctx.ca.ca }, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses,
    mtaSts: new MtaStsResolver({ dns, port: ctx.policies.port, ca: ctx.ca.ca, allowAddresses, fetchTimeoutMs: 2000 }),
    tlsReports: { record: (session) => ctx.sessions.push(session) },
    ...options,
  });
  return ctx.transport;
}

const counted = (ctx: Context) => ctx.sessions.map((s) => [s.policy.type, s.mxHost ?? null, s.result]);

async function delivered(t: MxTransport, to: string): Promise<void> {
  const outcome = await t.send(message(to));
  assert.equal(outcome.recipients.map((r) => r.result), ['delivered'], outcome.recipients[0].response);
}

test('testing: messages over one pooled session to an MX the policy does not list are one failed session', async (ctx) => {
  const t = transport(ctx);
  const before = ctx.sink.connections;
  for (const to of ['a@testing.test', 'b@testing.test', 'c@testing.test']) await delivered(t, to);
  assert.is(ctx.sink.connections - before, 1, 'one session carried the three messages');
  assert.equal(counted(ctx), [['sts', 'mx.shared.test', 'validation-failure']]);
});

test('a policy that could not be fetched: counted with the session of the message that fetched, not again for messages over that session', async (ctx) => {
  const t = transport(ctx);
  const before = ctx.sink.connections;
  for (const to of ['a@nopolicy.test', 'b@nopolicy.test', 'c@nopolicy.test']) await delivered(t, to);
  assert.is(ctx.sink.connections - before, 1);
  assert.is(ctx.policies.fetches.get('nopolicy.test'), 1, 'the failure is remembered, not fetched again');
  assert.equal(counted(ctx), [['no-policy-found', null, 'sts-policy-fetch-error'], ['no-policy-found', 'mx.shared.test', 'success']]);
});

test('a remembered fetch failure is counted once with each new session made while it stands', async (ctx) => {
  ctx.policies.fetches.clear();
  // One message per connection: each message is a new session.
  const t = transport(ctx, { messagesPerConnection: () => 1 });
  const before = ctx.sink.connections;
  for (const to of ['a@nopolicy.test', 'b@nopolicy.test']) await delivered(t, to);
  assert.is(ctx.sink.connections - before, 2);
  assert.is(ctx.policies.fetches.get('nopolicy.test'), 1);
  const session = [['no-policy-found', null, 'sts-policy-fetch-error'], ['no-policy-found', 'mx.shared.test', 'success']];
  assert.equal(counted(ctx), [...session, ...session]);
});

test.run();
