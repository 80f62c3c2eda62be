// A day of TLS sessions to report on, for the tests of the daily TLS report mail: a document store
// holding one successful session to partner.test on DAY, a DNS server whose TLSRPT record for
// partner.test is `record`, and a verified sending domain for RELAY_TLSRPT_FROM whose DKIM key is
// kept in clear (as earlier versions did), so that no secret is needed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { COLLECTIONS } from '../../apps/services/collections.ts';
import { ensureTlsSessionCountIndexes, TlsSessionCounter } from '../../apps/services/tls-reports/session-counts.ts';
import { generateDkimKeyPair, type DkimKeyPair } from '../../infra/dns/dkim-keys.ts';
import { SqliteDocumentStore } from '../../infra/sqlite/document-store.ts';
import { startDnsServer, type TestDnsServer } from './dns-server.ts';

export const DAY = '2031-04-01';

export interface TlsReportDay { dns: TestDnsServer; dir: string; documents: SqliteDocumentStore; key: DkimKeyPair }

export async function startTlsReportDay(record: string, sendingDomain = 'relay-ops.test'): Promise<TlsReportDay> {
  const dns = await startDnsServer([{ name: '_smtp._tls.partner.test', type: 'TXT', data: record }]);
  const dir = mkdtempSync(join(tmpdir(), 'tls-report-day-'));
  const documents = new SqliteDocumentStore(join(dir, 'documents.db'));
  await ensureTlsSessionCountIndexes(documents);
  const counter = new TlsSessionCounter(documents);
  counter.record({ recipientDomain: 'partner.test', policy: { type: 'no-policy-found', domain: 'partner.test', strings: [], mxHosts: [] }, result: 'success', mxHost: 'mx.partner.test', at: new Date(`${DAY}T12:00:00Z`) });
  await counter.close();
  const key = await generateDkimKeyPair();
  await documents.collection<any>(COLLECTIONS.domains).insert({ _id: 'dom_tlsrpt', name: sendingDomain, status: 'verified', dkimSelector: key.selector, dkimPrivateKeyPem: key.privateKeyPem });
  return { dns, dir, documents, key };
}

export async function closeTlsReportDay(day: Partial<TlsReportDay>): Promise<void> {
  await day.dns?.close();
  await day.documents?.close?.();
  if (day.dir) rmSync(day.dir, { recursive: true, force: true });
}
