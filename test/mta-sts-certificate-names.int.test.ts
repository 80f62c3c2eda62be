// Under MTA-STS a certificate names a host only by a DNS-ID (RFC 8461 3.3 for the policy host,
// 4.2 for an MX host, by RFC 6125): a subjectAltName dNSName equal to the host, or a wildcard
// that is the whole leftmost label and stands for one label. Node's tls.checkServerIdentity, which
// Relay used for both, also accepts (Node 24):
// - a certificate with no dNSName (no subjectAltName, or IP addresses only) through its subject
//   Common Name;
// - partial wildcards: `m*.example.test` and `*x.example.test` name `mx.example.test`.
// So a certificate issued for something else (a CN-only certificate of an internal CA, a
// partial wildcard no public CA would issue) was taken as naming the policy host, letting its
// holder serve the domain's policy, and as naming an MX host, letting its holder receive mail
// the domain's `enforce` policy was meant to keep from it; and under `testing` the TLS report
// said such sessions succeeded. The chain is still checked by Node (a certificate from a CA not
// trusted stays refused).
//
// Through real interfaces: certificates made by a test CA with exactly the names each case
// needs (test/support/certificate-names.ts), real HTTPS policy hosts serving them, real SMTP
// servers presenting them on STARTTLS, the test DNS server for MX, A and _mta-sts records; the
// TLS report sink's records as the transport hands them over.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MtaStsResolver } from '../infra/mail/mta-sts.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { TlsSessionResult } from '../infra/mail/tls-sessions.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';
import { issueNamed } from './support/certificate-names.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

/** Policy hosts: the certificate each presents, and whether it names `mta-sts.<domain>`. */
const POLICY_HOSTS: Array<{ domain: string; names: { cn: string; san?: string[] }; namesHost: boolean; why: string }> = [
  { domain: 'exact.test', names: { cn: 'unrelated.test', san: ['DNS:mta-sts.exact.test'] }, namesHost: true, why: 'a DNS-ID equal to the host (the CN does not matter)' },
  { domain: 'wild.test', names: { cn: 'unrelated.test', san: ['DNS:*.wild.test'] }, namesHost: true, why: 'a wildcard DNS-ID for the leftmost label' },
  { domain: 'upper.test', names: { cn: 'unrelated.test', san: ['DNS:MTA-STS.Upper.TEST'] }, namesHost: true, why: 'a DNS-ID in another case' },
  { domain: 'cn.test', names: { cn: 'mta-sts.cn.test' }, namesHost: false, why: 'no subjectAltName: the host only in the CN (Node accepts it)' },
  { domain: 'cnwild.test', names: { cn: '*.cnwild.test' }, namesHost: false, why: 'no subjectAltName: a wildcard CN (Node accepts it)' },
  { domain: 'ipsan.test', names: { cn: 'mta-sts.ipsan.test', san: ['IP:127.0.0.1'] }, namesHost: false, why: 'a subjectAltName with no DNS name: the host only in the CN (Node accepts it)' },
  { domain: 'prefix.test', names: { cn: 'unrelated.test', san: ['DNS:mta-*.prefix.test'] }, namesHost: false, why: 'a partial wildcard, prefix (Node accepts it)' },
  { domain: 'suffix.test', names: { cn: 'unrelated.test', san: ['DNS:*-sts.suffix.test'] }, namesHost: false, why: 'a partial wildcard, suffix (Node accepts it)' },
  { domain: 'deep.outer.test', names: { cn: 'unrelated.test', san: ['DNS:*.outer.test'] }, namesHost: false, why: 'a wildcard for two labels' },
  { domain: 'bare.test', names: { cn: 'unrelated.test', san: ['DNS:*.mta-sts.bare.test'] }, namesHost: false, why: 'a wildcard for no label' },
];

/** MX hosts `mx.<variant>.test`: the certificate each presents; domains `<mode>.<variant>.test` send to it. */
const MX_VARIANTS: Record<string, { cn: string; san?: string[] }> = {
  wildcard: { cn: 'unrelated.test', san: ['DNS:*.wildcard.test'] },
  cn: { cn: 'mx.cn.test' },
  partial: { cn: 'unrelated.test', san: ['DNS:m*.partial.test', 'DNS:*x.partial.test'] },
};
const MODES = ['enforce', 'testing'] as const;

interface Context {
  ca: TestCa;
  dns: TestDnsServer;
  /** One per policy host case, by domain. */
  policyHosts: Map<string, PolicyServer>;
  /** Serves every `<mode>.<variant>.test` policy, with a certificate that names its hosts. */
  policies: PolicyServer;
  sinks: Map<string, SmtpSink>;
  sessions: TlsSessionResult[];
  transport?: MxTransport;
}

const test = suite<Context>('MTA-STS: a certificate names a host by a DNS-ID only');

const a = (name: string): ZoneRecord => ({ name, type: 'A', data: '127.0.0.1' });

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  const zone: ZoneRecord[] = [];
  ctx.policyHosts = new Map();
  for (const { domain, names } of POLICY_HOSTS) {
    const server = await startPolicyServer(issueNamed(ctx.ca, names));
    server.policies.set(domain, policyText('enforce', [`mx.${domain}`]));
    ctx.policyHosts.set(domain, server);
    zone.push(a(`mta-sts.${domain}`), { name: `_mta-sts.${domain}`, type: 'TXT', data: 'v=STSv1; id=p1' });
  }
  const mxDomains = Object.keys(MX_VARIANTS).flatMap((variant) => MODES.map((mode) => `${mode}.${variant}.test`));
  ctx.policies = await startPolicyServer(ctx.ca.issue(mxDomains.map((d) => `mta-sts.${d}`)));
  ctx.sinks = new Map();
  for (const [variant, names] of Object.entries(MX_VARIANTS)) {
    const cert = issueNamed(ctx.ca, names);
    ctx.sinks.set(variant, await startSmtpSink({ cert: { key: Buffer.from(cert.key), cert: Buffer.from(cert.cert) } }));
    zone.push(a(`mx.${variant}.test`));
    for (const mode of MODES) {
      const domain = `${mode}.${variant}.test`;
      ctx.policies.policies.set(domain, policyText(mode, [`mx.${variant}.test`]));
      zone.push(
        { name: domain, type: 'MX', data: { preference: 10, exchange: `mx.${variant}.test` } },
        a(`mta-sts.${domain}`), { name: `_mta-sts.${domain}`, type: 'TXT', data: 'v=STSv1; id=m1' },
      );
    }
  }
  ctx.dns = await startDnsServer(zone);
});

test.before.each((ctx) => {
  ctx.sessions = [];
});

test.after.each(async (ctx) => {
  await ctx.transport?.close();
  ctx.transport = undefined;
});

test.after(async (ctx) => {
  for (const server of ctx.policyHosts.values()) await server.close();
  await ctx.policies.close();
  for (const sink of ctx.sinks.values()) await sink.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

const dnsOf = (ctx: Context) => new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));

for (const { domain, namesHost, why } of POLICY_HOSTS) {
  test(`policy host: ${why}: ${namesHost ? 'the policy is fetched' : 'no policy, sts-webpki-invalid naming the host'}`, async (ctx) => {
    const server = ctx.policyHosts.get(domain)!;
    const resolver = new MtaStsResolver({ dns: dnsOf(ctx), port: server.port, ca: ctx.ca.ca, allowAddresses: new Set(['127.0.0.1']), fetchTimeoutMs: 2000 });
    const { policy, failure } = await resolver.policyFor(domain);
    assert.is(server.fetches.get(domain) ?? 0, namesHost ? 1 : 0, namesHost ? 'the policy was fetched' : 'no request went to a host whose certificate does not name it');
    if (namesHost) {
      assert.equal([policy?.mode, policy?.mx, failure], ['enforce', [`mx.${domain}`], undefined]);
      return;
    }
    assert.is(policy, null, `the certificate (${why}) was taken as naming mta-sts.${domain}: an ${policy?.mode} policy for ${policy?.mx}`);
    assert.is(failure?.resultType, 'sts-webpki-invalid', failure?.detail);
    assert.match(failure?.detail ?? '', new RegExp(`^https://mta-sts\\.${domain.replaceAll('.', '\\.')}/\\.well-known/mta-sts\\.txt: certificate does not name mta-sts\\.${domain.replaceAll('.', '\\.')}: `));
  });
}

test('policy host: a certificate from a CA not trusted is still refused, whatever its names', async (ctx) => {
  const server = ctx.policyHosts.get('exact.test')!;
  const resolver = new MtaStsResolver({ dns: dnsOf(ctx), port: server.port, allowAddresses: new Set(['127.0.0.1']), fetchTimeoutMs: 2000 });
  const { policy, failure } = await resolver.policyFor('exact.test');
  assert.is(policy, null);
  assert.is(failure?.resultType, 'sts-webpki-invalid');
  assert.not.match(failure?.detail ?? '', /does not name/, 'refused for its chain');
});

function transport(ctx: Context, variant: string): MxTransport {
  const dns = dnsOf(ctx);
  const allowAddresses = new Set(['127.0.0.1']);
  ctx.transport = new MxTransport({
    dnsServers: [], dns, heloName: 'relay.example.test', port: ctx.sinks.get(variant)!.port, tls: { ca: ctx.ca.ca }, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses,
    mtaSts: new MtaStsResolver({ dns, port: ctx.policies.port, ca: ctx.ca.ca, allowAddresses, fetchTimeoutMs: 2000 }),
    tlsReports: { record: (session) => ctx.sessions.push(session) },
  });
  return ctx.transport;
}

const message = (to: string): OutgoingMessage => ({
  emailId: 'em_names', envelope: { mailFrom: 'b@bounce.example.test', recipients: [to] }, raw: Buffer.from('From: a@example.test\r\nSubject: names\r\n\r\nhi\r\n'), messageId: 'names@example.test',
});

const reported = (ctx: Context) => ctx.sessions.map((s) => [s.policy.type, s.mxHost ?? null, s.result]);

test('MX host: a wildcard DNS-ID for the leftmost label names it: delivered under enforce and testing, each session a success', async (ctx) => {
  const sink = ctx.sinks.get('wildcard')!;
  const t = transport(ctx, 'wildcard');
  for (const mode of MODES) {
    ctx.sessions = [];
    const outcome = await t.send(message(`ann@${mode}.wildcard.test`));
    assert.equal(outcome.recipients.map((r) => r.result), ['delivered'], outcome.recipients[0].response);
    // (Sessions under enforce are pooled apart from opportunistic ones: each mode sets up its own.)
    assert.equal(reported(ctx), [['sts', 'mx.wildcard.test', 'success']], mode);
  }
  assert.is(sink.messages.length, 2);
  assert.ok(sink.messages.every((m) => m.secure && m.servername === 'mx.wildcard.test'));
});

const MISNAMED = [
  ['cn', 'no subjectAltName, the host only in the CN'],
  ['partial', 'only partial wildcards (m*., *x.)'],
] as const;

for (const [variant, what] of MISNAMED) {
  const host = `mx.${variant}.test`;
  test(`MX host, certificate with ${what}: enforce refuses the session before MAIL FROM, the mail deferred naming MTA-STS; reported certificate-host-mismatch`, async (ctx) => {
    const sink = ctx.sinks.get(variant)!;
    const [connections, mailFroms] = [sink.connections, sink.mailFromCommands.length];
    const outcome = await transport(ctx, variant).send(message(`ann@enforce.${variant}.test`));
    const [recipient] = outcome.recipients;
    assert.equal([recipient.result, recipient.stage], ['deferred', 'tls'], recipient.response);
    assert.match(recipient.response, new RegExp(`${host.replaceAll('.', '\\.')} \\[127\\.0\\.0\\.1\\]: MTA-STS \\(enforce\\) of enforce\\.${variant}\\.test: certificate does not name ${host.replaceAll('.', '\\.')}`));
    assert.is(sink.connections - connections, 1, 'the session was made (STARTTLS, certificate seen)');
    assert.is(sink.mailFromCommands.length - mailFroms, 0, 'and closed before MAIL FROM');
    assert.equal(reported(ctx), [['sts', host, 'certificate-host-mismatch']]);
    assert.is(ctx.sessions[0].receivingIp, '127.0.0.1');
  });

  test(`MX host, certificate with ${what}: testing delivers as before, the session reported as certificate-host-mismatch, not as a success`, async (ctx) => {
    const sink = ctx.sinks.get(variant)!;
    const delivered = sink.messages.length;
    const outcome = await transport(ctx, variant).send(message(`bob@testing.${variant}.test`));
    assert.equal(outcome.recipients.map((r) => r.result), ['delivered'], outcome.recipients[0].response);
    assert.is(sink.messages.length - delivered, 1);
    assert.ok(sink.messages.at(-1)!.secure, 'over TLS all the same');
    assert.equal(reported(ctx), [['sts', host, 'certificate-host-mismatch']]);
    assert.match(ctx.sessions[0].detail ?? '', new RegExp(`certificate does not name ${host.replaceAll('.', '\\.')}`));
  });
}

test.run();
