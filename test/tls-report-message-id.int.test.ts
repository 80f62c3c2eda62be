// The TLS report mail (RFC 8460 5.3) has one msg-id for its Message-ID (RFC 5322 3.6.4: id-left
// "@" id-right, neither holding "@"), and the transport is handed the same id: the report id is
// one already (`<day>.<hash>@<submitter>`), so no second "@<submitter>" is added. Driven through
// sendTlsReports with a real document store, the real DNS cache against the test DNS server and
// a transport that keeps what it is given; the mail is read back by postal-mime.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import PostalMime from 'postal-mime';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { sendTlsReports, type TlsReportingDeps } from '../apps/services/tls-reports/daily-reports.ts';
import { ensureTlsSessionCountIndexes, TlsSessionCounter } from '../apps/services/tls-reports/session-counts.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { generateDkimKeyPair } from '../infra/dns/dkim-keys.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { webhookEgress } from '../infra/http/webhook-egress.ts';
import type { MailTransport } from '../infra/ports/mail-transport.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';

interface Context { dns: TestDnsServer; dir: string; documents: SqliteDocumentStore }
const test = suite<Context>('TLS report mail: Message-ID');
const DAY = '2031-04-01';

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([{ name: '_smtp._tls.partner.test', type: 'TXT', data: 'v=TLSRPTv1; rua=mailto:tlsrpt@reports.test' }]);
  ctx.dir = mkdtempSync(join(tmpdir(), 'tls-report-message-id-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'documents.db'));
  await ensureTlsSessionCountIndexes(ctx.documents);
  const counter = new TlsSessionCounter(ctx.documents);
  counter.record({ recipientDomain: 'partner.test', policy: { type: 'no-policy-found', domain: 'partner.test', strings: [], mxHosts: [] }, result: 'success', mxHost: 'mx.partner.test', at: new Date(`${DAY}T12:00:00Z`) });
  await counter.close();
  const key = await generateDkimKeyPair();
  // A verified sending domain for RELAY_TLSRPT_FROM, its key kept in clear (as earlier versions did), so no secret is needed.
  await ctx.documents.collection<any>(COLLECTIONS.domains).insert({ _id: 'dom_tlsrpt', name: 'relay-ops.test', status: 'verified', dkimSelector: key.selector, dkimPrivateKeyPem: key.privateKeyPem });
});

test.after(async (ctx) => {
  await ctx.dns.close();
  await ctx.documents.close?.();
  rmSync(ctx.dir, { recursive: true, force: true });
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
