// RFC 8461 3.2 gives max_age a "maximum value of 31557600" (a year). mailauth's policy parser
// rejects a whole policy whose max_age is larger, before Relay's own cap (Math.min with that
// maximum) could apply: the domain was treated as having no policy (mail to any MX host, over
// any TLS or none) and the policy reported as sts-policy-invalid. A policy host that publishes a
// larger max_age asks for its policy to be kept as long as possible, not to be ignored: the
// policy is used now, held for the maximum. Its lines stay as published (the TLS report's
// policy-string, RFC 8460 4.4). A max_age that is not a number is still no policy.
//
// Through real interfaces: the test DNS server, a real HTTPS policy host (test CA), the mx
// transport delivering to a real SMTP server whose certificate names the listed MX host.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MtaStsResolver } from '../infra/mail/mta-sts.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { TlsSessionResult } from '../infra/mail/tls-sessions.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

const MAXIMUM = 31_557_600;

/** Domain → the max_age its policy publishes. */
const PUBLISHED: Record<string, string> = {
  'year.test': String(MAXIMUM),
  'year-and-a-second.test': String(MAXIMUM + 1),
  'two-years.test': String(2 * MAXIMUM),
  'ten-digits.test': '9999999999',
  'twenty-digits.test': '99999999999999999999',
  'negative.test': '-1',
  'words.test': 'forever',
};

interface Context { ca: TestCa; dns: TestDnsServer; policies: PolicyServer; sink: SmtpSink; now: number; transport?: MxTransport }

const test = suite<Context>('MTA-STS: a max_age above the maximum');

const policyWithMaxAge = (maxAge: string) => policyText('enforce', ['mx.listed.test']).replace(/max_age: \d+/, `max_age: ${maxAge}`);

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  const domains = Object.keys(PUBLISHED);
  ctx.policies = await startPolicyServer(ctx.ca.issue(domains.map((d) => `mta-sts.${d}`)));
  const mxCert = ctx.ca.issue(['mx.listed.test']);
  ctx.sink = await startSmtpSink({ cert: { key: Buffer.from(mxCert.key), cert: Buffer.from(mxCert.cert) } });
  const zone: ZoneRecord[] = [
    { name: 'mx.listed.test', type: 'A', data: '127.0.0.1' },
    { name: 'mx.unlisted.test', type: 'A', data: '127.0.0.1' },
  ];
  for (const [domain, maxAge] of Object.entries(PUBLISHED)) {
    ctx.policies.policies.set(domain, policyWithMaxAge(maxAge));
    zone.push(
      { name: `_mta-sts.${domain}`, type: 'TXT', data: 'v=STSv1; id=m1' }, { name: `mta-sts.${domain}`, type: 'A', data: '127.0.0.1' },
      // The preferred MX host is not in the policy: only a policy in force keeps mail from it.
      { name: domain, type: 'MX', data: { preference: 5, exchange: 'mx.unlisted.test' } }, { name: domain, type: 'MX', data: { preference: 10, exchange: 'mx.listed.test' } },
    );
  }
  ctx.dns = await startDnsServer(zone);
  ctx.now = Date.now();
});

test.after.each(async (ctx) => {
  await ctx.transport?.close();
  ctx.transport = undefined;
});

test.after(async (ctx) => {
  await ctx.policies.close();
  await ctx.sink.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

const dnsOf = (ctx: Context) => new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
const resolver = (ctx: Context, dns = dnsOf(ctx)) =>
  new MtaStsResolver({ dns, port: ctx.policies.port, ca: ctx.ca.ca, allowAddresses: new Set(['127.0.0.1']), fetchTimeoutMs: 2000, now: () => ctx.now });

for (const domain of ['year-and-a-second.test', 'two-years.test', 'ten-digits.test', 'twenty-digits.test']) {
  test(`max_age ${PUBLISHED[domain]}: the policy applies, held for the maximum (${MAXIMUM} s); its lines as published`, async (ctx) => {
    const { policy, failure } = await resolver(ctx).policyFor(domain);
    assert.is(failure, undefined, `refused: ${failure?.resultType} ${failure?.detail}`);
    assert.equal([policy?.mode, policy?.mx, policy?.maxAge], ['enforce', ['mx.listed.test'], MAXIMUM]);
    assert.is(policy!.expiresAt, ctx.now + MAXIMUM * 1000);
    assert.ok(policy!.lines.includes(`max_age: ${PUBLISHED[domain]}`), policy!.lines.join(' | '));
  });
}

test(`max_age ${MAXIMUM}, the maximum itself: as published`, async (ctx) => {
  const { policy, failure } = await resolver(ctx).policyFor('year.test');
  assert.equal([policy?.mode, policy?.maxAge, failure], ['enforce', MAXIMUM, undefined]);
});

test('a max_age that is not a non-negative number is still no policy (sts-policy-invalid)', async (ctx) => {
  for (const domain of ['negative.test', 'words.test']) {
    const { policy, failure } = await resolver(ctx).policyFor(domain);
    assert.is(policy, null, domain);
    assert.is(failure?.resultType, 'sts-policy-invalid', domain);
    assert.match(failure?.detail ?? '', /Invalid max_age field/, domain);
  }
});

test('a policy with a max_age above the maximum is enforced: the unlisted preferred MX host is passed over, the listed one gets the mail', async (ctx) => {
  const dns = dnsOf(ctx);
  const sessions: TlsSessionResult[] = [];
  ctx.transport = new MxTransport({
    dnsServers: [], dns, heloName: 'relay.example.test', port: ctx.sink.port, tls: { ca: ctx.ca.ca }, connectTimeoutMs: 3000, commandTimeoutMs: 3000,
    allowAddresses: new Set(['127.0.0.1']), mtaSts: resolver(ctx, dns), tlsReports: { record: (session) => sessions.push(session) },
  });
  const outcome = await ctx.transport.send({
    emailId: 'em_max_age', envelope: { mailFrom: 'b@bounce.example.test', recipients: ['ann@two-years.test'] },
    raw: Buffer.from('From: a@example.test\r\nSubject: max_age\r\n\r\nhi\r\n'), messageId: 'max-age@example.test',
  });
  assert.equal(outcome.recipients.map((r) => r.result), ['delivered'], outcome.recipients[0].response);
  assert.is(ctx.sink.messages.at(-1)!.servername, 'mx.listed.test', 'the policy was in force');
  assert.equal(sessions.map((s) => [s.policy.type, s.mxHost ?? null, s.result]), [
    ['sts', 'mx.unlisted.test', 'validation-failure'],
    ['sts', 'mx.listed.test', 'success'],
  ]);
  assert.ok(sessions[1].policy.strings.includes(`max_age: ${2 * MAXIMUM}`), 'reported with the policy as published');
});

test.run();
