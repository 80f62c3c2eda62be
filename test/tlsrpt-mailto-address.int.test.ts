// A TLS-RPT rua mailto names its address percent-encoded (RFC 8460 3, RFC 6068): once decoded
// it must be an address as domain/mailbox.ts reads it. `mailto:ops%2Cteam@reports.test` decodes
// to `ops,team@reports.test`, no addr-spec (a comma needs a quoted local part): it was kept, the
// report went to RCPT TO:<ops,team@reports.test> while its To header, the addresses joined with
// ", " and parsed again by nodemailer, named `team@reports.test`. Now such a destination is left
// out, as is `"a<b>"@…` (nodemailer drops angle brackets from a header address); a quoted local
// part holding the comma is kept, and To names exactly the envelope's recipients, handed to
// nodemailer as addresses, not joined and parsed again (which wrote `"a\,b"` as `"a,b"`).
// Driven through sendTlsReports (real document store, DNS cache against the test DNS server);
// the mail the transport is handed is read by python3 and mailauth.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sendTlsReports, type TlsReportingDeps } from '../apps/services/tls-reports/daily-reports.ts';
import { canonicalAddress } from '../domain/mailbox.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { webhookEgress } from '../infra/http/webhook-egress.ts';
import type { MailTransport } from '../infra/ports/mail-transport.ts';
import { closeTlsReportDay, DAY, startTlsReportDay, type TlsReportDay } from './support/tls-report-day.ts';

const test = suite<TlsReportDay>('TLS report mailto addresses');

test.before(async (ctx) => {
  Object.assign(ctx, await startTlsReportDay('v=TLSRPTv1; rua=mailto:ops%2Cteam@reports.test,mailto:%22ops%2Cteam%22@reports.test,mailto:%22a%3Cb%3E%22@reports.test,mailto:%22a%5C%2Cb%22@reports.test,mailto:tls@reports.test'));
});

test.after(async (ctx) => {
  await closeTlsReportDay(ctx);
});

test('an encoded comma outside quotes or a bracket: left out; the To header names exactly the envelope\'s recipients, each a valid addr-spec', async (ctx) => {
  const sent: Array<{ raw: Buffer; recipients: string[] }> = [];
  const transport = {
    name: 'capture',
    send: async (message: { raw: Buffer; envelope: { recipients: string[] } }) => {
      sent.push({ raw: message.raw, recipients: message.envelope.recipients });
      return { recipients: message.envelope.recipients.map((address) => ({ address, result: 'accepted', smtpCode: 250, enhancedCode: null, response: '250 ok' })), providerMessageId: null };
    },
    close: async () => {},
  } as unknown as MailTransport;
  const deps: TlsReportingDeps = {
    documents: ctx.documents, dns: new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000 })), transport, secrets: null as never,
    from: 'tlsrpt@relay-ops.test', egress: webhookEgress, https: { dnsServers: [ctx.dns.address], allow: new Set() },
    now: () => new Date(Date.parse(`${DAY}T00:00:00Z`) + 90_000_000), onError: (error: Error) => { throw error; },
  };
  await sendTlsReports(deps, DAY);
  assert.is(sent.length, 1, 'one report mail');
  const [{ raw, recipients }] = sent;
  const [verdict] = (await dkimVerify(raw, { resolver: async () => [[`v=DKIM1; k=rsa; p=${ctx.key.publicKeyBase64}`]] })).results;
  assert.is(verdict.status.result, 'pass', verdict.info);
  const to = JSON.parse(execFileSync('python3', ['-c', [
    'import email, json, sys',
    'from email import policy',
    'm = email.message_from_bytes(sys.stdin.buffer.read(), policy=policy.default)',
    'print(json.dumps([a.addr_spec for a in m["to"].addresses]))',
  ].join('\n')], { input: raw }).toString()) as string[];
  // An addr-spec local part with a comma must be quoted (RFC 5321 4.1.2, RFC 5322 3.4.1).
  for (const r of recipients) assert.ok(/^("(?:[^"\\]|\\.)*"|[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+)@[A-Za-z0-9.-]+$/.test(r), `RCPT TO:<${r}> is not an addr-spec`);
  // python writes a quoted local part in its canonical form (`"a\,b"` as `"a,b"`), as canonicalAddress does.
  assert.equal(to, recipients.map(canonicalAddress), 'the To header names the envelope recipients');
  const field = raw.toString('latin1').match(/\r\nTo:(.*?)\r\n(?=\S)/s)![1].replace(/\r\n/g, '');
  for (const r of recipients) assert.ok(field.includes(r), `To: ${field} does not name ${r} as RCPT TO does`);
  assert.equal(recipients, ['"ops,team"@reports.test', '"a\\,b"@reports.test', 'tls@reports.test'], 'an unquoted comma\'s or bracket\'s destination is left out, the others kept');
});

test.run();
