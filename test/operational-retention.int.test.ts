// `relay retention` prunes operational data past its documented period (domain/retention.ts),
// each kind made by the code that makes it in service (sessions by sign-in, invitations by
// inviting, rate-limit slots by admissions' reservations, send-rate slots by the send-rate
// gate, webhook deliveries by fan-out and attempts, work items from email streams, TLS session
// counts by the MX transport's sink, TLS report records by the daily reports, site snapshots by
// the sender's publisher, MTA-STS policies by the policy store), then swept
// by the retention part at a moment just before and just after the period ends: what is past
// it is gone, read back through the same code; what is not stays.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores, type Stores } from '../apps/runtime.ts';
import { startRetention } from '../apps/pipeline/retention.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { syncWorkItem, workItems } from '../apps/services/delivery/work-items.ts';
import { createSession } from '../apps/services/management/sessions.ts';
import { createWorkspace, inviteMember, listWorkspaceInvitations } from '../apps/services/management/workspaces.ts';
import type { PruneReport } from '../apps/services/operational-retention.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import { RateLimiter } from '../apps/services/rate-limits.ts';
import { sharedSendRate } from '../apps/services/send-rate.ts';
import { deliveriesOf, deliveryViewsOf, fanOut, recordAttempt, takeAttempt } from '../apps/services/webhooks/deliveries.ts';
import { DELIVERY_POLICY } from '../domain/email/delivery.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { OPERATIONAL_RETENTION } from '../domain/retention.ts';
import { SiteRegistry, publishSites } from '../apps/services/delivery/sites.ts';
import { mtaStsPolicyStore } from '../apps/services/mta-sts-policies.ts';
import { sendTlsReports } from '../apps/services/tls-reports/daily-reports.ts';
import { TlsSessionCounter } from '../apps/services/tls-reports/session-counts.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { startDnsServer } from './support/dns-server.ts';
import { WEBHOOK_POLICY } from '../domain/webhooks/delivery.ts';
import type { WebhookEvent } from '../domain/webhooks/events.ts';
import { loadConfig } from '../infra/config.ts';
import { accepted, attempted, claimed, outcome, toNewEvent } from './support/email-events.ts';

const T0 = new Date('2026-11-01T10:00:00.000Z');
const at = (ms: number) => new Date(T0.getTime() + ms);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

interface Context { dir: string; stores: Stores }

const test = suite<Context>('operational data retention');

test.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-operational-retention-'));
  ctx.stores = await openStores(loadConfig({ RELAY_DATA_DIR: ctx.dir, RELAY_LOG_LEVEL: 'silent' }));
  await prepareStores(ctx.stores.documents);
});

test.after(async (ctx) => {
  await ctx.stores.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

/** One pass of the retention part at `now`; what it pruned. */
async function sweepAt(ctx: Context, now: Date): Promise<PruneReport> {
  let report: PruneReport | undefined;
  let swept: Date | undefined;
  const retention = await startRetention({
    documents: ctx.stores.documents, events: ctx.stores.events, deliveryPolicy: DELIVERY_POLICY, now: () => now, everyMs: 3_600_000,
    onPruned: (r) => (report = r), onSwept: (when) => (swept = when), onError: (error) => { throw error; },
  });
  await retention.stop();
  assert.equal(swept, now, 'the pass completed');
  return report!;
}

const count = (ctx: Context, collection: string) => ctx.stores.documents.collection(collection).count();

test('sessions: one expired is removed, one still live stays', async (ctx) => {
  const { documents } = ctx.stores;
  const expired = await createSession(documents, 'usr_expired', T0);
  const live = await createSession(documents, 'usr_live', at(13 * DAY));
  const expiresAt = Date.parse(expired.session.expiresAt);
  assert.is((await sweepAt(ctx, new Date(expiresAt - 1))).sessions, 0, 'not before it expires');
  assert.is((await sweepAt(ctx, new Date(expiresAt))).sessions, 1);
  assert.is(await documents.collection(COLLECTIONS.sessions).get(expired.session._id), null);
  assert.ok(await documents.collection(COLLECTIONS.sessions).get(live.session._id));
});

test('invitations: a lapsed one is removed, a pending one stays listed', async (ctx) => {
  const { documents } = ctx.stores;
  const owner = { _id: 'usr_owner', email: 'owner@retention.test', passwordHash: 'x', createdAt: T0.toISOString() };
  const { workspace } = await createWorkspace(documents, owner, 'Retention', T0);
  const lapsing = await inviteMember(documents, { workspace, actorUserId: owner._id, actorRole: 'owner', email: 'late@retention.test', role: 'viewer' }, T0);
  await inviteMember(documents, { workspace, actorUserId: owner._id, actorRole: 'owner', email: 'fresh@retention.test', role: 'viewer' }, at(10 * DAY));
  const lapsedAt = new Date(Date.parse(lapsing.expiresAt));
  assert.is((await sweepAt(ctx, new Date(lapsedAt.getTime() - 1))).invitations, 0);
  assert.is((await sweepAt(ctx, lapsedAt)).invitations, 1);
  assert.equal((await listWorkspaceInvitations(documents, workspace, lapsedAt)).map((i) => i.email), ['fresh@retention.test']);
  assert.is(await count(ctx, COLLECTIONS.invitations), 1, 'the lapsed one is gone from the store, not only from the list');
});

test('request-rate slots an hour after their window, a development key\'s window a day after it ended', async (ctx) => {
  const { documents } = ctx.stores;
  const limiter = new RateLimiter(documents, { sweepEveryMs: 3_600_000 });
  try {
    await limiter.reserve({ keyId: 'key_dev_retention', workspaceId: 'ws_rate', environment: 'development' }, T0);
  } finally {
    await limiter.close();
  }
  const slots = await count(ctx, COLLECTIONS.rateLimitSlots);
  assert.ok(slots >= 2, 'the key\'s and the workspace\'s slots');
  assert.is(await count(ctx, COLLECTIONS.rateLimitWindows), 1);
  // The development window is 60 s; slots expire 10 s after their window.
  assert.is((await sweepAt(ctx, at(HOUR))).rateLimitSlots, 0, 'within the hour');
  assert.is((await sweepAt(ctx, at(HOUR + 71_000))).rateLimitSlots, slots);
  assert.is(await count(ctx, COLLECTIONS.rateLimitSlots), 0);
  assert.is((await sweepAt(ctx, at(DAY))).rateLimitWindows, 0, 'the window ended less than a day ago');
  assert.is((await sweepAt(ctx, at(DAY + 61_000))).rateLimitWindows, 1);
  assert.is(await count(ctx, COLLECTIONS.rateLimitWindows), 0);
});

test('send-rate slots an hour after their second', async (ctx) => {
  const gate = sharedSendRate(ctx.stores.documents, 10, () => T0.getTime());
  await gate.acquire();
  await gate.acquire();
  assert.is(await count(ctx, COLLECTIONS.sendRateSlots), 2);
  assert.is((await sweepAt(ctx, at(HOUR))).sendRateSlots, 0);
  assert.is((await sweepAt(ctx, at(HOUR + 1_000))).sendRateSlots, 2);
  assert.is(await count(ctx, COLLECTIONS.sendRateSlots), 0);
});

const webhookEvent = (emailId: string, id: string): WebhookEvent => ({
  id, type: 'email.sent', created_at: T0.toISOString(),
  data: { email_id: emailId, project_id: 'prj_hooks', test_mode: false, status: 'sent', recipients: ['ann@example.test'], provider_message_id: null },
} as WebhookEvent);

const endpoint = (id: string) => ({
  _id: id, workspaceId: 'ws_hooks', projectId: 'prj_hooks', url: 'https://hooks.example.com/', events: ['email.sent'], description: null,
  enabled: true, secretSealed: 'x', createdAt: T0.toISOString(), updatedAt: T0.toISOString(),
}) as Parameters<typeof fanOut>[2][number];

test('webhook deliveries with their attempt logs: succeeded and failed ones 30 days after their last attempt; pending ones never', async (ctx) => {
  const { documents } = ctx.stores;
  const emailId = 'em_hooks';
  await fanOut(documents, [webhookEvent(emailId, 'evt_a')], [endpoint('whe_ok'), endpoint('whe_gone'), endpoint('whe_later'), endpoint('whe_retrying')], T0);
  const byEndpoint = async (id: string) => (await deliveriesOf(documents).find({ where: { endpointId: id } }))[0];
  const attempt = async (id: string, when: Date, httpStatus: number) => {
    const taken = (await takeAttempt(documents, await byEndpoint(id), when, WEBHOOK_POLICY))!;
    assert.ok(await recordAttempt(documents, taken, { httpStatus, errorCode: httpStatus < 300 ? null : 'http_error', durationMs: 5, createdAt: when.toISOString() }, when, WEBHOOK_POLICY));
  };
  await attempt('whe_ok', T0, 200);
  await attempt('whe_gone', T0, 410);
  for (let i = 0; i < 6; i++) {
    const due = (await byEndpoint('whe_gone')).nextAttemptAt!;
    await attempt('whe_gone', new Date(due), 410);
  }
  const failedAt = Date.parse((await byEndpoint('whe_gone')).updatedAt);
  await attempt('whe_later', at(5 * DAY), 200);
  await attempt('whe_retrying', T0, 500); // still pending: its next attempt is due in a minute
  assert.equal((await byEndpoint('whe_gone')).status, 'failed');

  const period = OPERATIONAL_RETENTION.finishedWebhookDeliveryMs;
  assert.is(period, 30 * DAY);
  assert.is((await sweepAt(ctx, at(period))).webhookDeliveries, 0, 'the period has not passed for any');
  assert.is((await sweepAt(ctx, at(period + 1))).webhookDeliveries, 1, 'the 200 at T0');
  assert.is((await sweepAt(ctx, new Date(failedAt + period + 1))).webhookDeliveries, 1, 'the failed one, 30 days after its seventh attempt');
  const left = await deliveryViewsOf(documents, emailId);
  assert.equal(left.map((d) => d.status).sort(), ['pending', 'succeeded']);
  assert.is(left.find((d) => d.status === 'succeeded')!.attemptLogs[0].createdAt, at(5 * DAY).toISOString());
  assert.is((await sweepAt(ctx, at(400 * DAY))).webhookDeliveries, 1, 'the later success, in time');
  assert.equal((await deliveryViewsOf(documents, emailId)).map((d) => d.status), ['pending'], 'a pending delivery is never pruned');
});

test('delivery work items: one left behind by a finished delivery is removed a day past due; one still due stays', async (ctx) => {
  const { documents, events } = ctx.stores;
  const append = (emailId: string, list: Parameters<typeof toNewEvent>[0][]) =>
    events.append(emailStreamId(emailId), list.map(toNewEvent), { expectedRevision: 'no_stream' });
  await append('em_finished', [accepted({ emailId: 'em_finished' }), claimed(), attempted([outcome(0, 'sent'), outcome(1, 'sent'), outcome(2, 'sent')])]);
  await append('em_waiting', [accepted({ emailId: 'em_waiting' })]);
  const origin = { correlationId: 'test', causationId: 'test' };
  // The waiting email's item is what syncing its stream makes; the finished one's is what a
  // sender that died between the outcome and the item's removal leaves behind.
  const waiting = await syncWorkItem(documents, events, 'em_waiting', origin, DELIVERY_POLICY);
  assert.ok(waiting, 'the waiting email has a step due');
  await workItems(documents).insert({ _id: 'em_finished', step: 'attempt', attempt: 1, dueAt: waiting.dueAt, streamRevision: 0, origin });
  const dueAt = Date.parse(waiting.dueAt);

  assert.is((await sweepAt(ctx, new Date(dueAt + OPERATIONAL_RETENTION.overdueWorkItemMs))).workItems, 0, 'not a day overdue yet');
  assert.is(await count(ctx, COLLECTIONS.deliveries), 2);
  assert.is((await sweepAt(ctx, new Date(dueAt + OPERATIONAL_RETENTION.overdueWorkItemMs + 1))).workItems, 1);
  assert.is(await workItems(documents).get('em_finished'), null);
  const kept = await workItems(documents).get('em_waiting');
  assert.equal([kept?.step, kept?.attempt, kept?.dueAt], ['attempt', 1, waiting.dueAt], 'the step still due is kept as it was');
});

test('mx delivery: TLS session counts a week after their day, TLS report records 30 days after theirs, a stopped sender\'s site snapshots a day after its last write, MTA-STS policies once expired', async (ctx) => {
  const { documents } = ctx.stores;
  // Sessions of 2026-11-01 (T0's day), counted as the MX transport tells them.
  const counter = new TlsSessionCounter(documents);
  counter.record({ recipientDomain: 'example.org', policy: { type: 'no-policy-found', domain: 'example.org', strings: [], mxHosts: [] }, result: 'success', mxHost: 'mx.example.org', at: T0 });
  await counter.close();
  // That day's report, sent the next day: example.org publishes no _smtp._tls record.
  const dns = await startDnsServer([]);
  try {
    const done = await sendTlsReports({
      documents, dns: new DnsCache(new StubResolver({ servers: [dns.address], timeoutMs: 1000, tries: 1 })), transport: null as never, secrets: null as never, from: null,
      egress: null as never, https: { dnsServers: [], allow: new Set() }, now: () => at(DAY), onError: (error) => { throw error; },
    }, '2026-11-01');
    assert.equal(done.map((r) => r.status), ['no_destination']);
  } finally {
    await dns.close();
  }
  // A sender's site snapshot, last written at T0.
  const sites = new SiteRegistry({ dns: null, rules: [], now: () => T0.getTime() });
  sites.started(await sites.resolve('example.org'));
  await publishSites(documents, sites, (error) => { throw error; }, 3_600_000).stop();
  // A policy fetched at T0 with max_age one day.
  await mtaStsPolicyStore(documents).save({ domain: 'example.org', id: 'p1', mode: 'enforce', mx: ['mx.example.org'], maxAge: 86_400, lines: ['version: STSv1'], expiresAt: T0.getTime() + DAY });
  const kinds = (report: PruneReport) => [report.tlsSessionCounts, report.tlsReports, report.siteSnapshots, report.mtaStsPolicies];
  for (const collection of [COLLECTIONS.tlsSessionCounts, COLLECTIONS.tlsReports, COLLECTIONS.sites, COLLECTIONS.mtaStsPolicies]) assert.is(await count(ctx, collection), 1, collection);

  // T0's day ends at 2026-11-02T00:00Z.
  const dayEnd = Date.parse('2026-11-02T00:00:00.000Z');
  assert.equal(kinds(await sweepAt(ctx, at(DAY - 1))), [0, 0, 0, 0], 'a policy within max_age, a snapshot a day old at most, counts and report of a recent day stay');
  assert.equal(kinds(await sweepAt(ctx, at(DAY))), [0, 0, 0, 1], 'the policy goes once its max_age ran out');
  assert.equal(kinds(await sweepAt(ctx, at(DAY + 1))), [0, 0, 1, 0], 'the snapshot not rewritten for over a day goes');
  assert.equal(kinds(await sweepAt(ctx, new Date(dayEnd + OPERATIONAL_RETENTION.tlsSessionCountMs - 1))), [0, 0, 0, 0], 'counts of a day that ended less than a week ago stay');
  assert.equal(kinds(await sweepAt(ctx, new Date(dayEnd + OPERATIONAL_RETENTION.tlsSessionCountMs))), [1, 0, 0, 0]);
  assert.equal(kinds(await sweepAt(ctx, new Date(dayEnd + OPERATIONAL_RETENTION.tlsReportMs - 1))), [0, 0, 0, 0]);
  assert.equal(kinds(await sweepAt(ctx, new Date(dayEnd + OPERATIONAL_RETENTION.tlsReportMs))), [0, 1, 0, 0]);
  for (const collection of [COLLECTIONS.tlsSessionCounts, COLLECTIONS.tlsReports, COLLECTIONS.sites, COLLECTIONS.mtaStsPolicies]) assert.is(await count(ctx, collection), 0, collection);
});

test.run();
