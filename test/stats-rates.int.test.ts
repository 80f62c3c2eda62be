// The stats API's two rates over real mail: Relay sends through a smarthost (a real SMTP sink)
// with every processor running; reports reach the real inbound server at the return paths the
// sink saw; the rates are read from GET /v1/projects/:projectId/stats. Each rate counts
// recipients against a base holding them, each recipient once, so it is never above 1:
// - bounce_rate = hard_bounced / recipients with an attempt outcome (sent, or hard_bounced): a
//   recipient the next hop refuses at RCPT TO (550 5.1.1) never was `sent` and is in the base
//   all the same, so a project whose every recipient is refused has a rate of 1 and is at risk;
//   a recipient sent and bounced later by a notice is in it once.
// - complaint_rate = complained / recipients sent (accepted by the next hop, or proven arrived by
//   a delivery notice or a complaint): through a smarthost nothing is `delivered` without a
//   notice, and complaints there still give a rate and a level.
// Each rate comes with its base (bounce_rate_base, complaint_rate_base), so that a reader can
// tell 1 in 3 from 1,000 in 3,000.
import type { InboundServer } from '../apps/inbound/inbound-server.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { createApiKey } from '../apps/services/management/api-keys.ts';
import { connectDomain, createDomain, markDomainVerified } from '../apps/services/management/domains.ts';
import { setWorkspaceActivation } from '../apps/services/management/workspaces.ts';
import type { Project } from '../domain/management.ts';
import * as assert from 'uvu/assert';
import { suite } from 'uvu';
import { startTestApp, type TestApp } from './support/app.ts';
import { startTestInbound } from './support/inbound.ts';
import { send, waitForDetail } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';
import { arf, deliverReport, dsn } from './support/reports.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

const test = suite('stats rates over real mail');

let sink: SmtpSink;
let t: TestApp;
let inbound: InboundServer;
let tenants = 0;

interface Tenant { owner: Caller; projectId: string; key: string; domain: string }

/** A production project of an activated workspace, its owner signed in (stats need a member's session), with a key and a verified domain. */
async function tenant(): Promise<Tenant> {
  const n = ++tenants;
  const owner = await newCaller(t, `owner${n}@stats-rates.test`);
  const { workspaceId, projectId } = await workspaceWithProject(t, owner, 'production');
  const documents = t.ctx.documents;
  const now = t.ctx.now();
  await setWorkspaceActivation(documents, workspaceId, true, now);
  const domain = `rates${n}.example.test`;
  const created = await createDomain(documents, { workspaceId, name: domain }, now, t.ctx.services.secrets);
  await markDomainVerified(documents, created._id, 'rates fixture', now);
  await connectDomain(documents, created._id, projectId);
  const project = (await documents.collection<Project>(COLLECTIONS.projects).get(projectId))!;
  const { secret } = await createApiKey(documents, { project, name: 'sender', permissions: ['email:send', 'email:read'] }, now);
  return { owner, projectId, key: secret, domain };
}

async function stats(who: Tenant) {
  const from = new Date(Date.now() - 2 * 3_600_000).toISOString();
  const to = new Date(Date.now() + 2 * 3_600_000).toISOString();
  const response = await call(t, 'GET', `/v1/projects/${who.projectId}/stats?from=${from}&to=${to}&granularity=hour`, { as: who.owner });
  assert.is(response.statusCode, 200, response.body);
  return response.json();
}

/** Waits until the stats show these totals (the deliverability processor has applied everything). */
async function statsOnceCounted(who: Tenant, expected: Record<string, number>) {
  let last: any;
  await waitUntil(async () => {
    last = await stats(who);
    return Object.entries(expected).every(([outcome, n]) => last.totals[outcome] === n);
  }, `the stats count ${JSON.stringify(expected)} (last ${JSON.stringify(last?.totals)})`, 30_000);
  return last;
}

async function sendTo(who: Tenant, to: string, status: string): Promise<string> {
  const id = await send(t, who.key, { from: `hello@${who.domain}`, to, subject: 'Rates', text: 'hi' });
  await waitForDetail(t, who.key, id, (d) => d.status === status, `is ${status}`);
  return id;
}

function returnPathOf(id: string, address: string): string {
  const message = sink.messages.find((m) => m.raw.toString().includes(`<${id}@`) && m.rcptTo.some((r) => r.address === address));
  if (!message || message.mailFrom === false) throw new Error(`no transaction of ${id} to ${address} at the sink`);
  return message.mailFrom.address;
}

test.before(async () => {
  sink = await startSmtpSink({
    onRcptTo: (address) => (address.address.startsWith('gone')
      ? smtpError(550, `5.1.1 <${address.address}>: Recipient address rejected: User unknown in virtual mailbox table`)
      : undefined),
  });
  t = await startTestApp({ RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${sink.port}?tls=none` }, { processors: true });
  inbound = await startTestInbound(t);
});

test.after(async () => {
  await inbound?.stop();
  await t?.close();
  await sink?.close();
});

test('bounce_rate: recipients refused at RCPT TO are in the numerator and must be in the denominator (a rate is at most 1)', async () => {
  const who = await tenant();
  await sendTo(who, 'fine@example.org', 'sent');
  for (const address of ['gone1@example.org', 'gone2@example.org', 'gone3@example.org']) await sendTo(who, address, 'hard_bounced');
  const s = await statsOnceCounted(who, { accepted: 4, sent: 1, hard_bounced: 3 });
  // Four recipients were handed to the next hop; three of them bounced: 75 %.
  assert.ok(s.totals.bounce_rate !== null && s.totals.bounce_rate <= 1, `bounce_rate ${s.totals.bounce_rate} for 3 bounces among 4 recipients sent to`);
  assert.is(s.totals.bounce_rate, 0.75);
  assert.is(s.totals.bounce_rate_base, 4, 'the recipients the rate is over');
});

test('bounce_rate: a project whose every recipient hard-bounces at RCPT TO has a rate and is at risk', async () => {
  const who = await tenant();
  await sendTo(who, 'gone4@example.org', 'hard_bounced');
  await sendTo(who, 'gone5@example.org', 'hard_bounced');
  const s = await statsOnceCounted(who, { accepted: 2, hard_bounced: 2 });
  assert.is(s.totals.bounce_rate, 1, `bounce_rate for 2 bounces among 2 recipients sent to (totals ${JSON.stringify(s.totals)})`);
  assert.is(s.totals.bounce_rate_base, 2);
  assert.is(s.totals.complaint_rate, null, 'nobody was sent');
  assert.is(s.totals.complaint_rate_base, 0);
  assert.is(s.thresholds.bounce_rate.level, 'risk');
});

test('complaint_rate: a complained recipient was delivered; complaints never outnumber the denominator', async () => {
  const who = await tenant();
  const ids: Record<string, string> = {};
  for (const address of ['happy@example.org', 'angry1@example.org', 'angry2@example.org', 'quiet@example.org']) ids[address] = await sendTo(who, address, 'sent');
  await deliverReport(inbound.port, returnPathOf(ids['happy@example.org'], 'happy@example.org'), dsn({ recipient: 'happy@example.org', action: 'delivered', status: '2.0.0' }));
  for (const address of ['angry1@example.org', 'angry2@example.org']) {
    await deliverReport(inbound.port, returnPathOf(ids[address], address), arf({ recipient: address, feedbackType: 'abuse' }));
  }
  const s = await statsOnceCounted(who, { sent: 4, delivered: 1, complained: 2 });
  assert.ok(s.totals.complaint_rate !== null && s.totals.complaint_rate <= 1, `complaint_rate ${s.totals.complaint_rate} for 2 complaints among 4 recipients sent to`);
  assert.is(s.totals.complaint_rate, 0.5);
  assert.is(s.totals.complaint_rate_base, 4, 'each recipient once, the delivered and complained ones too');
  assert.is(s.thresholds.complaint_rate.level, 'risk');
});

test('complaint_rate: complaints through a smarthost without delivery notices give a rate and a level', async () => {
  const who = await tenant();
  const ids: Record<string, string> = {};
  for (const address of ['angry3@example.org', 'calm1@example.org', 'calm2@example.org']) ids[address] = await sendTo(who, address, 'sent');
  await deliverReport(inbound.port, returnPathOf(ids['angry3@example.org'], 'angry3@example.org'), arf({ recipient: 'angry3@example.org', feedbackType: 'abuse' }));
  const s = await statsOnceCounted(who, { sent: 3, complained: 1 });
  assert.ok(s.totals.complaint_rate !== null, `complaint_rate for 1 complaint among 3 recipients sent to (totals ${JSON.stringify(s.totals)})`);
  assert.is(s.totals.complaint_rate, 0.333333);
  assert.is(s.thresholds.complaint_rate.level, 'risk', 'a third of the recipients complained');
});

test('bounce_rate: a recipient sent and bounced later by a notice is in the base once', async () => {
  const who = await tenant();
  const ids: Record<string, string> = {};
  for (const address of ['later@example.org', 'fine2@example.org', 'fine3@example.org']) ids[address] = await sendTo(who, address, 'sent');
  await deliverReport(inbound.port, returnPathOf(ids['later@example.org'], 'later@example.org'), dsn({ recipient: 'later@example.org', action: 'failed', status: '5.1.1', diagnostic: 'smtp; 550 5.1.1 user unknown' }));
  const s = await statsOnceCounted(who, { sent: 3, hard_bounced: 1 });
  assert.is(s.totals.bounce_rate, 0.333333, `one bounce among three recipients sent to (totals ${JSON.stringify(s.totals)})`);
  assert.is(s.totals.bounce_rate_base, 3, 'the recipient sent and bounced is in the base once');
  assert.is(s.thresholds.bounce_rate.level, 'risk');
});

test.run();
