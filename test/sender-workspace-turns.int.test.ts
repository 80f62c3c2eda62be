// The sender gives workspaces turns at its schedule (apps/processors/sender.ts dueBySite, by the
// workspaceId its work items record): the edges of that rule that the tenant-starvation tests do
// not reach.
//
// - Work items written before items recorded their workspace name none: they are still sent, and
//   take their turns together, as one workspace, so another workspace's one email is not held
//   behind them either.
// - A look at the schedule gives at most 64 workspaces turns; the next look goes on from where it
//   stopped. When more workspaces than that have mail due at a site with no room, a workspace
//   further on, with mail for a site that has room, is still reached (and sent) within a look or
//   two, not only once the full site frees.
//
// The schedule is written while no sender runs (an API-only instance on the same data
// directory), so that its items are exactly as the test sets them when the sender starts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { syncWorkItem, workItems } from '../apps/services/delivery/work-items.ts';
import { originOfRequest } from '../domain/events/metadata.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer } from './support/dns-server.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

const test = suite('sender: workspace turns at the schedule');

/** POST /v1/emails, waiting out the per-key request rate (100 a second) when a burst reaches it. */
async function send(t: TestApp, key: string, body: Record<string, unknown>): Promise<string> {
  for (;;) {
    const response = await t.app.inject({ method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${key}` }, payload: body });
    if (response.statusCode === 202) return response.json().id as string;
    if (response.statusCode !== 429) throw new Error(`POST /v1/emails: ${response.statusCode} ${response.body}`);
    await new Promise((resolve) => setTimeout(resolve, 1000 * Number(response.headers['retry-after'] ?? 1)));
  }
}

/** Writes each email's work item as the sender would, then lets `edit` change it (before any sender runs). */
async function schedule(t: TestApp, ids: string[], edit: (item: Record<string, unknown>) => Record<string, unknown>): Promise<void> {
  const items = workItems(t.stores.documents);
  for (const id of ids) {
    const written = await syncWorkItem(t.stores.documents, t.stores.events, id, originOfRequest(`test-${id}`), t.ctx.services.policies.delivery);
    assert.ok(written, `${id} has a work item`);
    const { _v, ...item } = written as typeof written & { _v: number };
    assert.ok(await items.replace(edit(item) as never, _v), `${id}'s work item is rewritten`);
  }
}

const withoutWorkspace = ({ workspaceId: _, ...item }: Record<string, unknown>) => item;

test('items that name no workspace are sent, and take their turns together: another workspace\'s one email is not held behind them', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-turns-'));
  const sink = await startSmtpSink();
  const env = { RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${sink.port}?tls=none`, RELAY_DELIVERY_RETRY_SCALE: '0.05' };
  let sender: TestApp | null = null;
  try {
    const api = await startTestApp(env, { dataDir });
    const a = await deliveryTenant(api);
    const b = await deliveryTenant(api);
    const older: string[] = [];
    for (let i = 0; i < 30; i++) older.push(await send(api, a.key, { from: `news@${a.domain}`, to: `reader${i}@example.org`, subject: `Newsletter ${i}`, text: 'This week…' }));
    const code = await send(api, b.key, { from: `security@${b.domain}`, to: 'someone@example.net', subject: 'Your sign-in code', text: '123456' });
    // A's items as an older sender wrote them; B's as this one does.
    await schedule(api, older, withoutWorkspace);
    await schedule(api, [code], (item) => item);
    assert.is((await workItems(api.stores.documents).get(code))?.workspaceId, b.workspaceId);
    assert.is((await workItems(api.stores.documents).get(older[0]))?.workspaceId, undefined);
    await api.close();

    sender = await startTestApp(env, { dataDir, processors: ['sender'] });
    const t = sender;
    const isCode = (m: SmtpSink['messages'][number]) => m.rcptTo.some((r) => r.address === 'someone@example.net');
    await waitUntil(() => sink.messages.filter((m) => !isCode(m)).length === older.length && sink.messages.some(isCode), 'every email reaches the smarthost', 60_000);
    const before = sink.messages.findIndex(isCode);
    // The sender's first look starts 10 (twice the smarthost's 5 connections) in turns: A's
    // earliest, B's, then A's next ones. By due time and id alone B's would be the 31st.
    assert.ok(before <= 10, `the smarthost received ${before} of the 30 items without a workspace before workspace B's one email (its turn comes second)`);
    await waitUntil(async () => (await Promise.all([...older, code].map((id) => workItems(t.stores.documents).get(id)))).every((item) => item === null), 'no item is left in the schedule');
  } finally {
    await sender?.close();
    await sink.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('with more workspaces due at a full site than one look gives turns, a workspace further on is reached and sent while that site is still full', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-turns-'));
  const gate = deferred<void>();
  let held = 0;
  const sink = await startSmtpSink({
    // The busy site's first transactions wait here: its connections stay taken.
    onData: async (_raw, session) => {
      if (!session.envelope.rcptTo.some((r) => r.address.endsWith('@busy.test'))) return {};
      held++;
      await gate.promise;
      return {};
    },
  });
  const dns = await startDnsServer([]);
  const env = {
    RELAY_DELIVERY: 'mx', RELAY_DNS_SERVERS: dns.address, RELAY_MX_PORT: String(sink.port), RELAY_MX_ALLOW: '127.0.0.1', RELAY_DELIVERY_RETRY_SCALE: '0.05',
  };
  let sender: TestApp | null = null;
  try {
    const api = await startTestApp(env, { dataDir });
    const a: DeliveryTenant = await deliveryTenant(api);
    const b: DeliveryTenant = await deliveryTenant(api);
    dns.setZone([
      ...a.zone, ...b.zone,
      { name: 'busy.test', type: 'MX', data: { preference: 10, exchange: 'mx.busy.test' } },
      { name: 'mx.busy.test', type: 'A', data: '127.0.0.1' },
      { name: 'quiet.test', type: 'MX', data: { preference: 10, exchange: 'mx.quiet.test' } },
      { name: 'mx.quiet.test', type: 'A', data: '127.0.0.1' },
    ]);
    const WORKSPACES = 70;
    const busy: string[] = [];
    for (let i = 0; i < WORKSPACES; i++) busy.push(await send(api, a.key, { from: `news@${a.domain}`, to: `reader${i}@busy.test`, subject: `Newsletter ${i}`, text: 'This week…' }));
    const code = await send(api, b.key, { from: `security@${b.domain}`, to: 'someone@quiet.test', subject: 'Your sign-in code', text: '123456' });
    // Each of A's emails as another workspace's, all ordered before B's (workspace ids begin "ws").
    let n = 0;
    await schedule(api, busy, (item) => ({ ...item, workspaceId: `0-workspace-${String(n++).padStart(3, '0')}` }));
    await schedule(api, [code], (item) => item);
    await api.close();

    sender = await startTestApp(env, { dataDir, processors: ['sender'] });
    await waitUntil(() => held > 0, 'the busy site\'s first transactions are held');
    await waitUntil(() => sink.messages.some((m) => m.rcptTo.some((r) => r.address === 'someone@quiet.test')), 'B\'s email reaches the quiet site while the busy one is full', 30_000);
    assert.ok(sink.messages.every((m) => !m.rcptTo.some((r) => r.address.endsWith('@busy.test'))), 'no busy-site transaction has ended: that site was full throughout');
  } finally {
    gate.resolve();
    await sender?.close();
    await sink.close();
    await dns.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
