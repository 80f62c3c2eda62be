// Sends with custom headers through POST /v1/emails to the outbox, read back as the .eml the
// outbox transport wrote once mailauth verified its DKIM signature: for tests of what goes on
// the wire. A test app with every processor, a delivery tenant, and a DNS server for its zone.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './app.ts';
import { deliveryTenant, dkimResults, waitForDetail, type DeliveryTenant } from './delivery.ts';
import { startDnsServer, type TestDnsServer } from './dns-server.ts';

export interface OutboxSends {
  t: TestApp;
  tenant: DeliveryTenant;
  dns: TestDnsServer;
  /** POST /v1/emails from `fromName` at the tenant's domain to ann@example.org, with these headers. */
  post(headers: Record<string, string>): Promise<Awaited<ReturnType<TestApp['app']['inject']>>>;
  /** post(), accepted and sent: the .eml and the names of the fields its signature covers (lower case). */
  sent(headers: Record<string, string>): Promise<{ raw: Buffer; signed: string[] }>;
  close(): Promise<void>;
}

export async function startOutboxSends(message: { fromName: string; local: string; subject: string }): Promise<OutboxSends> {
  const t = await startTestApp({}, { processors: true });
  const tenant = await deliveryTenant(t);
  const dns = await startDnsServer(tenant.zone);
  const post = async (headers: Record<string, string>) => t.app.inject({
    method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${tenant.key}` },
    payload: { from: `${message.fromName} <${message.local}@${tenant.domain}>`, to: 'ann@example.org', subject: message.subject, text: 'Hi Ann', headers },
  });
  return {
    t, tenant, dns, post,
    async sent(headers) {
      const response = await post(headers);
      assert.is(response.statusCode, 202, response.body);
      const id = response.json().id as string;
      await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'is sent', 10_000);
      const raw = readFileSync(join(t.config.dataDir, 'outbox', `${id}.eml`));
      const [verdict] = await dkimResults(dns, raw);
      assert.is(verdict.status.result, 'pass', verdict.info);
      return { raw, signed: (verdict.signingHeaders?.headers ?? []).map((line) => line.split(':')[0].toLowerCase()) };
    },
    async close() {
      await t.close();
      await dns.close();
    },
  };
}
