// `relay sites`: what each sender instance's sites are doing (apps/services/delivery/sites.ts),
// from the snapshots the senders write every few seconds: limits, the adaptive rate now, a
// pause after throttling, the latest throttling reply.
import { parseArgs } from 'node:util';
import { loadConfig } from '../../infra/config.ts';
import { siteSnapshots, type SiteSnapshot } from '../services/delivery/sites.ts';
import { asksForHelp } from './command.ts';
import { openExistingStores } from './existing-stores.ts';
import { printable, printableJson } from './printable.ts';
import { compareText } from '../../domain/text.ts';

const USAGE = [
  'usage: relay sites [--json]',
  'Recipient sites (domains grouped by MX host set) as each sender instance last reported them:',
  'its limits (connections, messages per connection, per minute), the rate it allows now, until',
  'when it is paused after throttling replies, counts, and the latest throttling reply.',
].join('\n');

// Site names are MX host names from DNS and the reply is the remote server's text, both chosen
// by whoever runs a recipient domain: shown printable.
export function sitesTable(snapshots: SiteSnapshot[]): string {
  const rows = [['SITE', 'INSTANCE', 'CONN', 'PER CONN', 'LIMIT/MIN', 'RATE/MIN', 'PAUSED UNTIL', 'DELIVERED', 'DEFERRED', 'THROTTLES', 'LAST THROTTLING REPLY']];
  for (const s of [...snapshots].sort((a, b) => compareText(a.site, b.site) || compareText(a.instance, b.instance))) {
    const site = printable(s.site);
    rows.push([
      site.length > 48 ? `${site.slice(0, 45)}...` : site, s.instance, String(s.limits.connections), String(s.limits.messagesPerConnection),
      String(s.limits.messagesPerMinute), String(s.rate), s.pausedUntil ?? '-', String(s.delivered), String(s.deferred), String(s.throttles),
      printable((s.recent[0] ?? '-').replace(/\s+/g, ' ')).slice(0, 60),
    ]);
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ')).join('\n');
}

export async function sites(args: string[]): Promise<number> {
  if (asksForHelp(args)) {
    console.log(USAGE);
    return 0;
  }
  let json = false;
  try {
    json = parseArgs({ args, options: { json: { type: 'boolean' } }, strict: true }).values.json ?? false;
  } catch (error) {
    console.error(`relay: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const stores = await openExistingStores(loadConfig(), ['documents']);
  if (!stores) return 1;
  try {
    const snapshots = (await siteSnapshots(stores.documents).find({ orderBy: [['_id', 'asc']], limit: 10_000 })).map(({ _v, ...s }) => {
      void _v;
      return s;
    });
    if (json) for (const s of snapshots) console.log(printableJson(s));
    else console.log(snapshots.length === 0 ? 'no sites yet: a sender reports its sites every few seconds once it sends' : sitesTable(snapshots));
    return 0;
  } finally {
    await stores.close();
  }
}
