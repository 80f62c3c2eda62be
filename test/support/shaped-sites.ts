// A Relay delivering as its own MX (`mx`) to recipient sites shaped by a shaping file, every MX
// host on one local SMTP server, with two sending tenants: the setting of the tests of how
// workspaces share a rate-limited site.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestApp, type TestApp } from './app.ts';
import { deliveryTenant, type DeliveryTenant } from './delivery.ts';
import { startDnsServer, type TestDnsServer } from './dns-server.ts';
import { startSmtpSink, type SmtpSink, type SmtpSinkOptions } from './smtp-sink.ts';

export interface ShapedSites {
  dns: TestDnsServer;
  sink: SmtpSink;
  t: TestApp;
  a: DeliveryTenant;
  b: DeliveryTenant;
  close(): Promise<void>;
}

/**
 * `sites` maps each recipient domain to its MX host (127.0.0.1 on the sink); `shaping` is the
 * shaping file's text. Retries are scaled down (RELAY_DELIVERY_RETRY_SCALE 0.05), and with them
 * the spacing of a site's slots.
 */
export async function startShapedSites(sites: Record<string, string>, shaping: string, sink: SmtpSinkOptions = {}): Promise<ShapedSites> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-shaped-sites-'));
  const shapingFile = join(dir, 'shaping.conf');
  writeFileSync(shapingFile, shaping);
  const dns = await startDnsServer([]);
  const smtp = await startSmtpSink(sink);
  const t = await startTestApp({
    RELAY_DELIVERY: 'mx',
    RELAY_DNS_SERVERS: dns.address,
    RELAY_MX_PORT: String(smtp.port),
    RELAY_MX_ALLOW: '127.0.0.1',
    RELAY_SHAPING_FILE: shapingFile,
    RELAY_DELIVERY_RETRY_SCALE: '0.05',
  }, { processors: true });
  const a = await deliveryTenant(t);
  const b = await deliveryTenant(t);
  dns.setZone([
    ...a.zone, ...b.zone,
    ...Object.entries(sites).flatMap(([domain, mx]) => [
      { name: domain, type: 'MX' as const, data: { preference: 10, exchange: mx } },
      { name: mx, type: 'A' as const, data: '127.0.0.1' },
    ]),
  ]);
  return {
    dns, sink: smtp, t, a, b,
    close: async () => {
      await t.close();
      await smtp.close();
      await dns.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
