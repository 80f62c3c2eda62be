// Defect: under an MTA-STS policy in `testing` mode, one SMTP session to an MX host that the
// policy's mx patterns do not list is counted twice in the TLS report: once as a
// `validation-failure` (reported before connecting, without the receiving IP) and once more as a
// successful session (the connection's TLS verdict, its certificate being valid for the host).
// One message, one session: the report says two sessions, one of which succeeded.
//
// Why it matters: RFC 8460 4.4's summary counts sessions: total-successful-session-count is "the
// aggregate count of successfully negotiated TLS-enabled connections" and the failure details
// count "(attempted) sessions". A domain owner testing an MTA-STS policy before enforcing it
// reads the report to learn whether enforcing would break mail; here the session that would be
// refused under `enforce` shows up as a success as well, and the totals exceed the sessions
// made. (The mismatch is also counted again for every message that reuses the pooled
// connection, while the connection's verdict is counted once.)
//
// Correct behaviour: the one session appears once, as a failure (`validation-failure` for the
// unlisted MX): total-successful-session-count 0, total-failure-session-count 1.
//
// Through real interfaces: a message through the real mx transport and MTA-STS resolver (test
// DNS server, real HTTPS policy host, real SMTP sink with a certificate from a test CA naming
// the MX), counted by the real session counter into a real document store; the day's report is
// sent by sendTlsReports by HTTPS POST to a real HTTPS server, gunzipped and checked against
// RFC 8460's schema (test/fixtures/tlsrpt/rfc8460-report.schema.json) with ajv.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sendTlsReports, type TlsReportingDeps } from '../apps/services/tls-reports/daily-reports.ts';
import { ensureTlsSessionCountIndexes, TlsSessionCounter } from '../apps/services/tls-reports/session-counts.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { webhookEgress } from '../infra/http/webhook-egress.ts';
import { MtaStsResolver } from '../infra/mail/mta-sts.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { MailTransport } from '../infra/ports/mail-transport.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { makeTestCa, trustTestCa, type TestCa } from './support/https-receiver.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context {
  ca: TestCa; dns: TestDnsServer; sink: SmtpSink; policies: PolicyServer; dir: string; documents: SqliteDocumentStore;
  server: Server; port: number; posts: Array<{ path: string; type: string | undefined; body: Buffer }>;
}

const schema = JSON.parse(readFileSync(new URL('./fixtures/tlsrpt/rfc8460-report.schema.json', import.meta.url), 'utf8'));
const ajv = new Ajv({ allErrors: true, strict: true });
(addFormats as unknown as (a: Ajv) => void)(ajv);
const validate = ajv.compile(schema);

const test = suite<Context>('TLS report: a testing-mode session to an unlisted MX');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  const mxCert = ctx.ca.issue(['mx.unlisted.test']);
  ctx.sink = await startSmtpSink({ cert: { key: Buffer.from(mxCert.key), cert: Buffer.from(mxCert.cert) } });
  ctx.policies = await startPolicyServer(ctx.ca.issue(['mta-sts.testing.test']));
  ctx.policies.policies.set('testing.test', policyText('testing', ['good.testing.test']));
  const cert = ctx.ca.issue(['localhost']);
  ctx.posts = [];
  ctx.server = createServer({ key: cert.key, cert: cert.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      ctx.posts.push({ path: req.url ?? '/', type: req.headers['content-type'], body: Buffer.concat(chunks) });
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => ctx.server.listen(0, '127.0.0.1', () => resolve()));
  ctx.port = (ctx.server.address() as { port: number }).port;
  ctx.dns = await startDnsServer([
    { name: 'testing.test', type: 'MX', data: { preference: 10, exchange: 'mx.unlisted.test' } },
    { name: 'mx.unlisted.test', type: 'A', data: '127.0.0.1' },
    { name: '_mta-sts.testing.test', type: 'TXT', data: 'v=STSv1; id=t1' },
    { name: 'mta-sts.testing.test', type: 'A', data: '127.0.0.1' },
    { name: '_smtp._tls.testing.test', type: 'TXT', data: `v=TLSRPTv1; rua=https://localhost:${ctx.port}/tlsrpt` },
  ]);
  ctx.dir = mkdtempSync(join(tmpdir(), 'tlsrpt-testing-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'documents.db'));
  await ensureTlsSessionCountIndexes(ctx.documents);
});

test.after(async (ctx) => {
  ctx.server?.closeAllConnections();
  await new Promise<void>((resolve) => (ctx.server ? ctx.server.close(() => resolve()) : resolve()));
  await ctx.sink?.close();
  await ctx.policies?.close();
  await ctx.dns?.close();
  await ctx.documents?.close?.();
  if (ctx.dir) rmSync(ctx.dir, { recursive: true, force: true });
  ctx.ca?.remove();
});

test('one delivered message over one session is one session in the report: a failure, not also a success', async (ctx) => {
  const counter = new TlsSessionCounter(ctx.documents);
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
  const allowAddresses = new Set(['127.0.0.1']);
  const transport = new MxTransport({
    dnsServers: [], dns, heloName: 'relay.example.test', port: ctx.sink.port, tls: { ca: ctx.ca.ca }, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses,
    mtaSts: new MtaStsResolver({ dns, port: ctx.policies.port, ca: ctx.ca.ca, allowAddresses, fetchTimeoutMs: 2000 }),
    tlsReports: counter,
  });
  try {
    const outcome = await transport.send({
      emailId: 'em_testing', envelope: { mailFrom: 'b@bounce.example.test', recipients: ['ann@testing.test'] },
      raw: Buffer.from('From: a@example.test\r\nSubject: testing\r\n\r\nhi\r\n'), messageId: 'testing@example.test',
    });
    assert.equal(outcome.recipients.map((r) => r.result), ['delivered'], 'testing mode delivers');
  } finally {
    await transport.close();
    await counter.close();
  }
  assert.is(ctx.sink.connections, 1, 'one SMTP session was made');
  assert.is(ctx.sink.messages.length, 1);

  const day = new Date().toISOString().slice(0, 10);
  const unused = { name: 'unused', send: async () => { throw new Error('no mailto here'); }, close: async () => {} } as unknown as MailTransport;
  const deps: TlsReportingDeps = {
    documents: ctx.documents, dns: new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000 })), transport: unused, secrets: null as never,
    from: null, egress: webhookEgress, https: { dnsServers: [ctx.dns.address], allow: new Set([`localhost:${ctx.port}`]) },
    now: () => new Date(Date.parse(`${day}T00:00:00Z`) + 90_000_000), onError: (error: Error) => { throw error; },
  };
  const done = await sendTlsReports(deps, day);
  assert.equal(done.map((r) => [r.domain, r.status]), [['testing.test', 'sent']]);
  assert.is(ctx.posts.length, 1);
  assert.is(ctx.posts[0].type, 'application/tlsrpt+gzip');
  const report: any = JSON.parse(gunzipSync(ctx.posts[0].body).toString('utf8'));
  const asSent: unknown = report;
  assert.ok(validate(asSent), JSON.stringify(validate.errors));
  assert.is(report.policies.length, 1);
  const [entry] = report.policies;
  assert.is(entry.policy['policy-type'], 'sts');
  const { summary } = entry;
  const details = (entry['failure-details'] ?? []).map((d: any) => `${d['result-type']} ${d['receiving-mx-hostname']} x${d['failed-session-count']}`).join(', ');
  assert.is(
    summary['total-successful-session-count'] + summary['total-failure-session-count'], 1,
    `one session, but the report counts ${summary['total-successful-session-count']} successful and ${summary['total-failure-session-count']} failed (${details})`,
  );
  assert.equal(summary, { 'total-successful-session-count': 0, 'total-failure-session-count': 1 });
});

test.run();
