// TLS reports count sessions (RFC 8460 4.4: the summary's counts and each failure detail's
// failed-session-count are sessions), not messages: a message that reuses a pooled connection
// adds nothing, whether the MX host is one an MTA-STS policy in `testing` mode does not list or
// the domain's policy could not be fetched. A fetch failure the resolver remembers (5 minutes)
// is counted with each new session made meanwhile, once per session. Under `enforce`, an MX host
// the policy does not list is passed over (RFC 8461 4.1) and reported as the session that would
// have been made: once per attempt that sets up a session (or ends without one, its mail
// deferred), not again for a message a pooled session carries.
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
  const mxCert = ctx.ca.issue(['mx.shared.test', 'mx.enforce.test', 'mx.other.test']);
  ctx.sink = await startSmtpSink({ cert: { key: Buffer.from(mxCert.key), cert: Buffer.from(mxCert.cert) } });
  ctx.policies = await startPolicyServer(ctx.ca.issue(['mta-sts.testing.test', 'mta-sts.nopolicy.test', 'mta-sts.enforce.test', 'mta-sts.stuck.test']));
  ctx.policies.policies.set('testing.test', policyText('testing', ['good.testing.test']));
  // enforce.test prefers mx.other.test, which its policy does not list; stuck.test has no other.
  ctx.policies.policies.set('enforce.test', policyText('enforce', ['mx.enforce.test']));
  ctx.policies.policies.set('stuck.test', policyText('enforce', ['mx.stuck.test']));
  // nopolicy.test publishes an id but no policy file: every fetch is a 404.
  ctx.dns = await startDnsServer([
    { name: 'testing.test', type: 'MX', data: { preference: 10, exchange: 'mx.shared.test' } },
    { name: 'nopolicy.test', type: 'MX', data: { preference: 10, exchange: 'mx.shared.test' } },
    { name: 'mx.shared.test', type: 'A', data: '127.0.0.1' },
    { name: '_mta-sts.testing.test', type: 'TXT', data: 'v=STSv1; id=t1' },
    { name: '_mta-sts.nopolicy.test', type: 'TXT', data: 'v=STSv1; id=n1' },
    { name: 'mta-sts.testing.test', type: 'A', data: '127.0.0.1' },
    { name: 'mta-sts.nopolicy.test', type: 'A', data: '127.0.0.1' },
    { name: 'enforce.test', type: 'MX', data: { preference: 5, exchange: 'mx.other.test' } },
    { name: 'enforce.test', type: 'MX', data: { preference: 10, exchange: 'mx.enforce.test' } },
    { name: 'stuck.test', type: 'MX', data: { preference: 10, exchange: 'mx.other.test' } },
    { name: 'mx.other.test', type: 'A', data: '127.0.0.1' },
    { name: 'mx.enforce.test', type: 'A', data: '127.0.0.1' },
    { name: '_mta-sts.enforce.test', type: 'TXT', data: 'v=STSv1; id=e1' },
    { name: '_mta-sts.stuck.test', type: 'TXT', data: 'v=STSv1; id=s1' },
    { name: 'mta-sts.enforce.test', type: 'A', data: '127.0.0.1' },
    { name: 'mta-sts.stuck.test', type: 'A', data: '127.0.0.1' },
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

const PASSED_OVER = ['sts', 'mx.other.test', 'validation-failure'];
const SESSION = ['sts', 'mx.enforce.test', 'success'];

async function deliveredToListed(ctx: Context, t: MxTransport, to: string): Promise<void> {
  const outcome = await t.send(message(to));
  assert.equal(outcome.recipients.map((r) => r.result), ['delivered'], outcome.recipients[0].response);
  assert.is(ctx.sink.messages.at(-1)!.servername, 'mx.enforce.test', 'the listed host, the unlisted one passed over');
}

test('enforce: messages over one pooled session to the listed host: the host passed over is one failed session, beside the one successful session', async (ctx) => {
  const t = transport(ctx);
  const before = ctx.sink.connections;
  for (const to of ['a@enforce.test', 'b@enforce.test', 'c@enforce.test']) await deliveredToListed(ctx, t, to);
  assert.is(ctx.sink.connections - before, 1, 'one session carried the three messages');
  assert.equal(counted(ctx), [PASSED_OVER, SESSION], `counted: ${JSON.stringify(counted(ctx))}`);
});

test('enforce, one message per connection: each new session counts the host passed over again, once', async (ctx) => {
  const t = transport(ctx, { messagesPerConnection: () => 1 });
  const before = ctx.sink.connections;
  for (const to of ['a@enforce.test', 'b@enforce.test']) await deliveredToListed(ctx, t, to);
  assert.is(ctx.sink.connections - before, 2);
  assert.equal(counted(ctx), [PASSED_OVER, SESSION, PASSED_OVER, SESSION]);
});

test('enforce, no host qualifies: each attempt, deferred without a session, counts the host it passed over once', async (ctx) => {
  const t = transport(ctx);
  const before = ctx.sink.connections;
  for (const to of ['a@stuck.test', 'b@stuck.test']) {
    const [recipient] = (await t.send(message(to))).recipients;
    assert.equal([recipient.result, recipient.stage], ['deferred', 'tls'], recipient.response);
    assert.match(recipient.response, /MTA-STS \(enforce\) of stuck\.test: MX host mx\.other\.test does not match the policy's mx patterns \(mx\.stuck\.test\)/);
  }
  assert.is(ctx.sink.connections - before, 0);
  const passedOver = ['sts', 'mx.other.test', 'validation-failure'];
  assert.equal(counted(ctx), [passedOver, passedOver]);
});

test.run();
