// The TLS report mail (RFC 8460 5.3) has one msg-id for its Message-ID (RFC 5322 3.6.4: id-left
// "@" id-right, neither holding "@"), and the transport is handed the same id: the report id is
// one already (`<day>.<hash>@<submitter>`), so no second "@<submitter>" is added. Driven through
// sendTlsReports with a real document store, the real DNS cache against the test DNS server and
// a transport that keeps what it is given; the mail is read back by postal-mime.
import PostalMime from 'postal-mime';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sendTlsReports, type TlsReportingDeps } from '../apps/services/tls-reports/daily-reports.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { webhookEgress } from '../infra/http/webhook-egress.ts';
import type { MailTransport } from '../infra/ports/mail-transport.ts';
import { closeTlsReportDay, DAY, startTlsReportDay, type TlsReportDay } from './support/tls-report-day.ts';

const test = suite<TlsReportDay>('TLS report mail: Message-ID');

test.before(async (ctx) => {
  Object.assign(ctx, await startTlsReportDay('v=TLSRPTv1; rua=mailto:tlsrpt@reports.test'));
});

test.after(async (ctx) => {
  await closeTlsReportDay(ctx);
});

test('the report mail\'s Message-ID is one msg-id: a single "@" between id-left and id-right', async (ctx) => {
  const sent: Array<{ raw: Buffer; messageId: string }> = [];
  const transport = {
    name: 'capture',
    send: async (message: { raw: Buffer; messageId: string; envelope: { recipients: string[] } }) => {
      sent.push({ raw: message.raw, messageId: message.messageId });
      return { recipients: message.envelope.recipients.map((address) => ({ address, result: 'accepted', smtpCode: 250, enhancedCode: null, response: '250 ok' })), providerMessageId: null };
    },
    close: async () => {},
  } as unknown as MailTransport;
  const deps: TlsReportingDeps = {
    documents: ctx.documents, dns: new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000 })), transport, secrets: null as never,
    from: 'tlsrpt@relay-ops.test', egress: webhookEgress, https: { dnsServers: [ctx.dns.address], allow: new Set() },
    now: () => new Date(Date.parse(`${DAY}T00:00:00Z`) + 90_000_000), onError: (error: Error) => { throw error; },
  };
  const done = await sendTlsReports(deps, DAY);
  assert.equal(done.map((r) => [r.domain, r.status]), [['partner.test', 'sent']]);
  assert.is(sent.length, 1);
  const parsed = await PostalMime.parse(sent[0].raw);
  const header = parsed.headers.find((h) => h.key === 'message-id')?.value ?? '';
  const msgId = /^<([^<>@\s]+)@([^<>@\s]+)>$/;
  assert.match(header, msgId, `Message-ID: ${header}`);
  assert.is(`<${sent[0].messageId}>`, header, 'the messageId handed to the transport is the Message-ID');
});

test.run();
