// The deliverability projection end to end: a generated history of a few thousand emails
// (bounces, complaints, delays after delivery, reports ahead of the sender's own outcome, BCC
// recipients) is appended to the event store, forwarded to the log and applied by the live
// consumer group `<ns>.deliverability`; some records are then delivered again. Checked:
// - GET /v1/projects/:projectId/stats equals counts made here directly from the events, and its
//   rates equal rates made here from them as the API defines them, over the whole range and each
//   hour of it;
// - `relay projections rebuild deliverability --into` gives the live documents exactly;
// - the stats survive dropping the read model and rebuilding it (`relay projections rebuild`).
// On the embedded default and, with RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL, on Kafka and
// the MongoDB wire (FerretDB here).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { encodeEvent, eventsTopic } from '../apps/pipeline/topics.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import type { StoredEvent } from '../infra/ports/event-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { groupCaughtUp } from './support/consumer-groups.ts';
import { appendHistory, generateHistory, seeded, type EmailPlan } from './support/history.ts';
import { call, newCaller, workspaceWithProject } from './support/management.ts';
import { runRelay } from './support/relay-process.ts';

// ---- counts made directly from the events (the rules as written in docs/event-status-rules.md) ----

const RANK: Record<string, number> = {
  queued: 0, simulated: 0, processing: 1, sent: 2, delayed: 3, delivered: 4, soft_bounced: 5, failed: 5,
  rejected: 6, hard_bounced: 6, suppressed: 7, complained: 8,
};
const FINAL = new Set(['sent', 'delivered', 'failed', 'rejected', 'hard_bounced', 'soft_bounced', 'complained', 'suppressed']);
const COUNTED = ['accepted', 'suppressed', 'sent', 'delivered', 'delayed', 'soft_bounced', 'hard_bounced', 'complained', 'rejected', 'failed'];
/** A report: only up, but always past failed. */
const reportedOver = (current: string, reported: string) => (current === 'failed' || RANK[reported] > RANK[current] ? reported : current);

interface Counted { recipient: string; at: string; hour: string; domain: string; sendingDomain: string; outcome: string; code: string | null }

function countDirectly(plans: EmailPlan[]): Counted[] {
  const out: Counted[] = [];
  for (const plan of plans) {
    let statuses: string[] = [];
    let domains: string[] = [];
    let sendingDomain = '';
    const reached: Array<Set<string>> = [];
    const reach = (i: number, status: string, at: string, code: string | null) => {
      const outcome = status === 'queued' ? 'accepted' : status;
      const add = (o: string) => {
        if (!COUNTED.includes(o) || reached[i].has(o)) return;
        reached[i].add(o);
        out.push({ recipient: `${plan.emailId}#${i}`, at, hour: `${at.slice(0, 13)}:00:00.000Z`, domain: domains[i], sendingDomain, outcome: o, code: ['hard_bounced', 'soft_bounced', 'rejected', 'failed'].includes(o) ? code : null });
      };
      add(outcome);
      if (outcome === 'delivered') add('sent');
    };
    for (const event of plan.events) {
      const d = event.data as Record<string, any>;
      if (event.type === 'EmailAccepted' || event.type === 'EmailSuppressed') {
        const addresses: string[] = [...d.toAddresses, ...d.ccAddresses];
        sendingDomain = d.fromDomain;
        domains = addresses.map((a) => a.split('@')[1]);
        const status = event.type === 'EmailAccepted' ? 'queued' : 'suppressed';
        statuses = addresses.map(() => status);
        addresses.forEach((_, i) => {
          reached[i] = new Set();
          reach(i, status, d.occurredAt, null);
        });
      } else if (event.type === 'DeliveryClaimed') {
        statuses = statuses.map((s) => (FINAL.has(s) ? s : 'processing'));
      } else if (event.type === 'DeliveryAttempted' || event.type === 'DeliveryFailed') {
        for (const r of d.recipients) {
          if (r.index >= statuses.length) continue;
          const outcome = event.type === 'DeliveryFailed' ? 'failed' : r.status;
          const code = event.type === 'DeliveryFailed' ? d.failureCode : [r.smtpCode, r.enhancedCode].filter((c) => c !== null).join(' ');
          // Reported first: counted as though it had come before that report, whose status stands.
          if (r.reportedFirst) reach(r.index, outcome, d.occurredAt, code);
          const status = r.reportedFirst ? reportedOver(outcome, statuses[r.index]) : outcome;
          if (statuses[r.index] === status) continue;
          statuses[r.index] = status;
          reach(r.index, status, d.occurredAt, code);
        }
      } else if (event.type === 'RecipientReported') {
        const i = d.recipientIndex;
        if (d.outcome === 'undetermined' || i >= statuses.length || reportedOver(statuses[i], d.outcome) === statuses[i]) continue;
        statuses[i] = d.outcome;
        reach(i, d.outcome, d.occurredAt, d.status);
      }
    }
  }
  return out;
}

const tally = (list: Counted[], key: (c: Counted) => string) => {
  const map = new Map<string, number>();
  for (const c of list) map.set(key(c), (map.get(key(c)) ?? 0) + 1);
  return map;
};

/**
 * A rate as apps/api/MANAGEMENT-API.md defines it: the recipients that reached `counts` in
 * [from, to) against those that reached any of `base` in it, each recipient once.
 */
function rateOf(list: Counted[], counts: string, base: string[], from: string, to: string): number | null {
  const within = list.filter((c) => c.at >= from && c.at < to);
  const part = new Set(within.filter((c) => c.outcome === counts).map((c) => c.recipient)).size;
  const whole = new Set(within.filter((c) => base.includes(c.outcome)).map((c) => c.recipient)).size;
  return whole === 0 ? null : Math.round((part / whole) * 1e6) / 1e6;
}
/** Hard bounces among the recipients with an attempt outcome: accepted by the next hop, or refused for good. */
const bounceRateOf = (list: Counted[], from: string, to: string) => rateOf(list, 'hard_bounced', ['sent', 'hard_bounced'], from, to);
/** Complaints among the recipients sent: accepted by the next hop, or proven arrived by a delivery notice or a complaint. */
const complaintRateOf = (list: Counted[], from: string, to: string) => rateOf(list, 'complained', ['sent', 'delivered', 'complained'], from, to);

// ---- the suite ----

interface Setup { env: Record<string, string>; dataDir: string | null; emails: number; cleanUp(documents: DocumentStore): Promise<void> }

function deliverabilitySuite(name: string, setup: (() => Setup) | null): void {
  const test = suite(`deliverability (${name})`);
  if (!setup) {
    console.log(`skipped ${name}: RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set (start the engines: eval "$(bash infra/engines/engines.sh up)")`);
    test.skip('skipped: no engines', () => {});
    test.run();
    return;
  }
  const s = setup();
  let t: TestApp;
  let cookie = '';
  let projectId = '';
  let plans: EmailPlan[] = [];
  let events: StoredEvent[] = [];
  const FROM = '2026-11-01T00:00:00.000Z';
  const TO = '2026-11-05T00:00:00.000Z';

  const stats = async (query: string) => {
    const response = await call(t, 'GET', `/v1/projects/${projectId}/stats?from=${FROM}&to=${TO}&${query}`, { as: cookie });
    assert.is(response.statusCode, 200, response.body);
    return response.json();
  };
  const snapshot = async (collection: string) => {
    const docs = await t.stores.documents.collection<{ _id: string }>(collection).find({ orderBy: [['_id', 'asc']], limit: 100_000 });
    return new Map(docs.map(({ _v, ...doc }) => [doc._id, doc]));
  };
  const caughtUp = (records: number) => groupCaughtUp(t, 'deliverability', records, 240_000);

  test.before(async () => {
    t = await startTestApp(s.env, { processors: ['deliverability'], dataDir: s.dataDir ?? undefined });
    const owner = await newCaller(t, `owner-${randomBytes(3).toString('hex')}@example.test`);
    cookie = owner.cookie;
    ({ projectId } = await workspaceWithProject(t, owner, 'production'));
    plans = generateHistory({ emails: s.emails, projectId, start: '2026-11-01T03:00:00.000Z', spacingMs: Math.floor((2 * 86_400_000) / s.emails) });
    const appended = await appendHistory(t.stores.events, plans);
    events = await t.stores.events.readAll({ filter: { streamPrefixes: ['email-'] } });
    assert.is(events.length, appended);
    await caughtUp(events.length);
    // Redeliveries: a tenth of the records again, as after a crash before the offsets were committed.
    const random = seeded(7);
    const again = events.filter(() => random() < 0.1);
    await t.stores.log.publish(eventsTopic(t.config.logNamespace), again.map((e) => ({ key: e.streamId, value: encodeEvent(e), headers: { 'event-type': e.type, 'event-id': e.id } })));
    await caughtUp(events.length + again.length);
  });

  test.after(async () => {
    await s.cleanUp(t.stores.documents);
    await t.close();
    if (s.dataDir) rmSync(s.dataDir, { recursive: true, force: true });
  });

  test('the stats equal counts made directly from the events, redeliveries and reordered reports included', async () => {
    const expected = countDirectly(plans);
    const outcomes = tally(expected, (c) => c.outcome);
    assert.ok((outcomes.get('complained') ?? 0) > 5 && (outcomes.get('hard_bounced') ?? 0) > 20 && (outcomes.get('delayed') ?? 0) > 20, 'the history has every kind of outcome');
    const hourly = await stats('granularity=hour');
    for (const outcome of COUNTED) assert.is(hourly.totals[outcome], outcomes.get(outcome) ?? 0, `total ${outcome}`);
    assert.is(hourly.totals.bounce_rate, bounceRateOf(expected, FROM, TO), 'bounce rate');
    assert.is(hourly.totals.complaint_rate, complaintRateOf(expected, FROM, TO), 'complaint rate');
    assert.is(hourly.series.length, 96, 'every hour of the four days');
    const perHour = tally(expected, (c) => `${c.hour}|${c.outcome}`);
    for (const point of hourly.series) {
      for (const outcome of COUNTED) assert.is(point[outcome], perHour.get(`${point.period}|${outcome}`) ?? 0, `${outcome} in ${point.period}`);
    }
    const byDomain = await stats('granularity=day&groupBy=recipient_domain');
    const perDayDomain = tally(expected, (c) => `${c.hour.slice(0, 10)}|${c.domain}|${c.outcome}`);
    let points = 0;
    for (const point of byDomain.series) {
      for (const outcome of COUNTED) assert.is(point[outcome], perDayDomain.get(`${point.period.slice(0, 10)}|${point.group}|${outcome}`) ?? 0, `${outcome} on ${point.period} at ${point.group}`);
      points++;
    }
    assert.is(points, new Set([...perDayDomain.keys()].map((k) => k.split('|').slice(0, 2).join('|'))).size, 'one point per day and recipient domain');
    const bySender = await stats('granularity=day&groupBy=sending_domain');
    const perSender = tally(expected, (c) => `${c.sendingDomain}|${c.outcome}`);
    for (const sender of ['mail.alpha.test', 'mail.beta.test']) {
      const sum = (outcome: string) => bySender.series.filter((p: { group: string }) => p.group === sender).reduce((n: number, p: Record<string, number>) => n + p[outcome], 0);
      for (const outcome of COUNTED) assert.is(sum(outcome), perSender.get(`${sender}|${outcome}`) ?? 0, `${outcome} from ${sender}`);
    }
    // Failing recipient domains, most failures first, with their most common reply code.
    const failures = expected.filter((c) => c.code !== null);
    const perDomain = tally(failures, (c) => c.domain);
    assert.equal(hourly.recipient_domains.map((d: { domain: string; failures: number }) => [d.domain, d.failures]),
      [...perDomain].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])));
    for (const domain of hourly.recipient_domains) {
      const codes = [...tally(failures.filter((c) => c.domain === domain.domain), (c) => c.code!)].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
      assert.equal([domain.top_reply.code, domain.top_reply.count], codes[0], `top reply at ${domain.domain}`);
      assert.not.match(domain.top_reply.text, /@/, 'no address in a reply shown');
    }
    assert.is(hourly.latency.accepted_to_sent.count, outcomes.get('sent'), 'every sent recipient has its accepted→sent latency');
  });

  test('each hour\'s rates are the hour\'s recipients against the base they are in, never above 1', async () => {
    const expected = countDirectly(plans);
    let rated = 0;
    for (let at = Date.parse(FROM); at < Date.parse(TO); at += 3_600_000) {
      const from = new Date(at).toISOString();
      const to = new Date(at + 3_600_000).toISOString();
      const response = await call(t, 'GET', `/v1/projects/${projectId}/stats?from=${from}&to=${to}&granularity=hour`, { as: cookie });
      assert.is(response.statusCode, 200, response.body);
      const { totals } = response.json();
      assert.is(totals.bounce_rate, bounceRateOf(expected, from, to), `bounce rate from ${from}`);
      assert.is(totals.complaint_rate, complaintRateOf(expected, from, to), `complaint rate from ${from}`);
      for (const rate of [totals.bounce_rate, totals.complaint_rate]) assert.ok(rate === null || (rate >= 0 && rate <= 1), `a rate of ${rate} from ${from}`);
      if (totals.bounce_rate !== null) rated++;
    }
    assert.ok(rated >= 40, `most hours have a bounce rate (${rated})`);
  });

  test('relay projections rebuild deliverability --into gives the live documents exactly', async () => {
    const run = await runRelay(['projections', 'rebuild', 'deliverability', '--into', 'deliverability_check', '--json'], s.env);
    assert.is(run.code, 0, run.stderr);
    assert.match(run.stderr, /100%/, 'progress reaches 100%');
    const result = JSON.parse(run.stdout);
    assert.is(result.events, events.length);
    const live = await snapshot(COLLECTIONS.deliverability);
    const rebuilt = await snapshot('deliverability_check');
    assert.is(live.size, plans.length);
    assert.is(rebuilt.size, live.size);
    for (const [id, doc] of live) assert.equal(rebuilt.get(id), doc, `email ${id}`);
    const dropped = await runRelay(['projections', 'drop', 'deliverability_check'], s.env);
    assert.is(dropped.code, 0, dropped.stderr);
  });

  test('the stats survive dropping the read model and rebuilding it', async () => {
    const before = await stats('granularity=hour&groupBy=recipient_domain');
    await t.stores.documents.drop(COLLECTIONS.deliverability);
    assert.is((await stats('granularity=hour')).totals.accepted, 0, 'nothing to count once dropped');
    const run = await runRelay(['projections', 'rebuild', 'deliverability'], s.env);
    assert.is(run.code, 0, run.stderr);
    assert.match(run.stdout, /swapped in/);
    assert.equal(await stats('granularity=hour&groupBy=recipient_domain'), before);
  });

  test('the query is checked: an empty range, too many hours, another project', async () => {
    const bad = async (query: string, code = 400) => {
      const response = await call(t, 'GET', `/v1/projects/${projectId}/stats?${query}`, { as: cookie });
      assert.is(response.statusCode, code, `${query}: ${response.body}`);
      return response.json().error.message as string;
    };
    assert.match(await bad(`from=${TO}&to=${FROM}`), /before/);
    assert.match(await bad('from=2026-01-01T00:00:00Z&to=2026-03-01T00:00:00Z&granularity=hour'), /31 days/);
    await bad('granularity=minute');
    await bad('groupBy=template');
    const stranger = await newCaller(t, `stranger-${randomBytes(3).toString('hex')}@example.test`);
    const response = await call(t, 'GET', `/v1/projects/${projectId}/stats`, { as: stranger });
    assert.is(response.statusCode, 403);
    const anonymous = await call(t, 'GET', `/v1/projects/${projectId}/stats`);
    assert.is(anonymous.statusCode, 401);
  });

  test.run();
}

deliverabilitySuite('embedded', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-deliverability-'));
  return { env: { RELAY_DATA_DIR: dataDir }, dataDir, emails: 2500, cleanUp: async () => {} };
});

const brokers = process.env.RELAY_KAFKA_BROKERS?.trim();
const mongoUrl = process.env.RELAY_MONGODB_URL?.trim();
deliverabilitySuite('Kafka and the MongoDB wire', brokers && mongoUrl ? () => {
  const run = randomBytes(4).toString('hex');
  const url = new URL(mongoUrl);
  url.pathname = `/relay_deliverability_${run}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-deliverability-'));
  return {
    env: { RELAY_DATA_DIR: dataDir, RELAY_KAFKA_BROKERS: brokers, RELAY_MONGODB_URL: url.toString(), RELAY_LOG_NAMESPACE: `deliverability_${run}` },
    dataDir,
    emails: 300,
    cleanUp: async (documents) => {
      for (const name of Object.values(COLLECTIONS)) await documents.drop(name).catch(() => {});
    },
  };
} : null);
