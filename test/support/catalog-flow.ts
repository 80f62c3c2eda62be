// A real flow for the event-catalog tests: Relay (embedded, every processor, the API on a real
// socket) delivering through a scripted smarthost, the feedback SMTP server taking reports, and a
// tenant whose mail goes out there. The smarthost answers as Postfix does: a refused recipient's
// reply quotes its address ("550 5.1.1 <a@b>: Recipient address rejected: …"), and the message's
// 250 names its queue id ("250 2.0.0 Ok: queued as …"). By recipient domain it refuses
// (REFUSING_DOMAIN), greylists once (GREYLISTING_DOMAIN), defers for ever (DEFERRING_DOMAIN) or
// cuts the connection after the message's last byte (DROPPING_DOMAIN: the fate is unknown).
// Events are read back only the way analysts read them: `relay events export`, in a child process.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { InboundServer } from '../../apps/inbound/inbound-server.ts';
import { startTestApp, type TestApp } from './app.ts';
import { deliveryTenant, detail, type DeliveryTenant } from './delivery.ts';
import { waitUntil } from './eventually.ts';
import { startTestInbound } from './inbound.ts';
import { workspaceOwner, type Caller } from './management.ts';
import { runRelay } from './relay-process.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './smtp-sink.ts';
import { PROCESSORS } from '../../apps/processors/registry.ts';
import { eventsTopic, groupOf } from '../../apps/pipeline/topics.ts';
import { verpAddress, VERP_MAC_PURPOSE } from '../../domain/delivery/verp.ts';

/** An event as `relay events export` prints it (one JSON line). */
export interface ExportedEvent {
  id: string;
  streamId: string;
  revision: number;
  position: string;
  type: string;
  data: Record<string, any>;
  metadata: Record<string, any>;
  recordedAt: string;
}

export interface CatalogFlow {
  dataDir: string;
  sink: SmtpSink;
  t: TestApp;
  inbound: InboundServer;
  tenant: DeliveryTenant;
  owner: Caller;
  /** The API's address (a real socket). */
  url: string;
  close(): Promise<void>;
}

let queueIds = 0;

/** Recipients at this domain are refused at RCPT TO, Postfix's way (the reply quotes the address). */
export const REFUSING_DOMAIN = 'refuse.example.org';
/** Each recipient at this domain is deferred (450, greylisted) the first time, then accepted. */
export const GREYLISTING_DOMAIN = 'greylist.example.org';
/** Recipients at this domain are always deferred (450). */
export const DEFERRING_DOMAIN = 'defer.example.org';
/** A message to a recipient at this domain is taken to its last byte, then the connection is cut without a reply. */
export const DROPPING_DOMAIN = 'drop.example.org';

export async function startCatalogFlow(env: Record<string, string> = {}): Promise<CatalogFlow> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-catalog-flow-'));
  const greylisted = new Set<string>();
  const sink = await startSmtpSink({
    onRcptTo: ({ address }) => {
      if (address.endsWith(`@${REFUSING_DOMAIN}`)) return smtpError(550, `5.1.1 <${address}>: Recipient address rejected: User unknown in virtual mailbox table`);
      if (address.endsWith(`@${DEFERRING_DOMAIN}`)) return smtpError(450, `4.2.2 <${address}>: Recipient address rejected: Mailbox full`);
      if (address.endsWith(`@${GREYLISTING_DOMAIN}`) && !greylisted.has(address)) {
        greylisted.add(address);
        return smtpError(450, `4.7.1 <${address}>: Recipient address rejected: Greylisted, try again later`);
      }
    },
    onData: (_raw, session) => session.envelope.rcptTo.some((r) => r.address.endsWith(`@${DROPPING_DOMAIN}`))
      ? 'drop'
      : { reply: `2.0.0 Ok: queued as Q${String(++queueIds).padStart(6, '0')}` },
  });
  const t = await startTestApp({ RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${sink.port}?tls=none`, ...env }, { processors: true, dataDir, listen: true });
  const inbound = await startTestInbound(t);
  const tenant = await deliveryTenant(t);
  const owner = await workspaceOwner(t, tenant.workspaceId, `catalog-owner-${Date.now()}@example.test`);
  return {
    dataDir, sink, t, inbound, tenant, owner, url: t.url!,
    async close() {
      await inbound.stop();
      await t.close();
      await sink.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** POST /v1/emails over HTTP with the tenant's key. */
export async function sendOverHttp(flow: CatalogFlow, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<{ id: string; status: string }> {
  const response = await fetch(`${flow.url}/v1/emails`, {
    method: 'POST',
    headers: { authorization: `Bearer ${flow.tenant.key}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 202) throw new Error(`POST /v1/emails: ${response.status} ${text}`);
  return JSON.parse(text) as { id: string; status: string };
}

/** A management call over HTTP as the tenant's owner (session cookie, no Origin: a non-browser client). */
export async function manage(flow: CatalogFlow, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const response = await fetch(`${flow.url}${path}`, {
    method,
    headers: { cookie: flow.owner.cookie, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : null };
}

/** Waits until the email's detail (GET /v1/emails/{id}) satisfies `done`. */
export async function waitForEmail(flow: CatalogFlow, id: string, done: (d: any) => boolean, what: string): Promise<any> {
  let last: any;
  await waitUntil(async () => done((last = await detail(flow.t, flow.tenant.key, id))), `${id} ${what}`, 30_000).catch((error) => {
    throw new Error(`${(error as Error).message}; last ${JSON.stringify({ status: last?.status, recipients: last?.recipients, events: last?.events?.map((e: any) => e.type) })}`);
  });
  return last;
}

/** The return path the smarthost saw for the copy of `emailId` sent to `address`. */
export function returnPathOf(flow: CatalogFlow, emailId: string, address: string): string {
  const copy = flow.sink.messages.find((m) => m.raw.toString().includes(`<${emailId}@`) && m.rcptTo.some((r) => r.address === address));
  if (!copy) throw new Error(`no copy of ${emailId} went to ${address}`);
  return (copy.mailFrom as { address: string }).address;
}

/** Every processor has handled every event in the store: a positive marker that nothing more is on its way. */
export async function allCaughtUp(flow: CatalogFlow): Promise<void> {
  const topic = eventsTopic(flow.t.config.logNamespace);
  const groups = PROCESSORS.map((p) => groupOf(flow.t.config.logNamespace, p.name));
  const events = (await flow.t.stores.events.readAll({ maxCount: 1_000_000 })).length;
  await waitUntil(async () => {
    const offsets = await flow.t.stores.log.groupOffsets(topic, groups);
    const records = offsets.filter((o) => o.group === groups[0]).reduce((n, o) => n + Number(o.end), 0);
    return records >= events && offsets.every((o) => Number(o.end) - Math.max(Number(o.committed ?? o.start), Number(o.start)) === 0);
  }, `every processor has handled all ${events} events`, 60_000);
}

/** `relay events export` (extra arguments appended), parsed. */
export async function exportEvents(flow: CatalogFlow, args: string[] = []): Promise<ExportedEvent[]> {
  const run = await runRelay(['events', 'export', ...args], { RELAY_DATA_DIR: flow.dataDir });
  if (run.code !== 0) throw new Error(`relay events export ${args.join(' ')}: exit ${run.code}: ${run.stderr}`);
  return run.stdout.split('\n').filter((line) => line.trim() !== '').map((line) => JSON.parse(line) as ExportedEvent);
}

/** The return path Relay gives recipient `index` of an email (domain/delivery/verp.ts, with Relay's own key), as the sender signs it. */
export function returnPathFor(flow: CatalogFlow, emailId: string, index: number): string {
  const mac = (data: string) => flow.t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, data);
  return verpAddress({ emailId, recipientIndex: index, mailFromDomain: `bounce.${flow.tenant.domain}` }, mac);
}
