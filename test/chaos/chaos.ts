// The chaos run (`npm run chaos`, docs/operations.md "Chaos"): distributed Relay as separate
// processes on Kafka + FerretDB (the embedded event store shared through one data directory,
// as the distributed tests run it), an SMTP sink for the senders, an HTTPS webhook receiver
// behind a test CA. A driver sends emails at a steady rate, feeds bounce reports for some of
// them through the inbound SMTP server, and SIGKILLs a part on a seeded schedule, starting it
// again at once. Then it waits for the pipeline to drain (positive markers, bounded) and
// judges the outcome (checks.ts).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { MongoClient, type Collection } from 'mongodb';
import { openStores, type Stores } from '../../apps/runtime.ts';
import { COLLECTIONS } from '../../apps/services/collections.ts';
import { loadEmail } from '../../apps/services/email-stream.ts';
import { PROJECTIONS } from '../../apps/services/projection-registry.ts';
import { eventsTopic, groupOf } from '../../apps/pipeline/topics.ts';
import { PROCESSORS } from '../../apps/processors/registry.ts';
import { upcastEmailEvent } from '../../domain/email/upcast.ts';
import { isFinalDeliveryStatus, STATUSES, type Status } from '../../domain/email/status.ts';
import { WEBHOOK_EVENT_TYPES, webhookEventsOf } from '../../domain/webhooks/events.ts';
import { loadConfig } from '../../infra/config.ts';
import { makeTestCa, startHttpsReceiver } from '../support/https-receiver.ts';
import { freePort, runRelay } from '../support/relay-process.ts';
import { deliverReport, dsn } from '../support/reports.ts';
import { evaluate, summary, type Check, type Facts, type KillRecord, type ReadModelComparison, type SentEmail, type WebhookRequest } from './checks.ts';
import { distributedParts, startCluster, type Cluster } from './cluster.ts';
import { startCountingSink } from './counting-sink.ts';
import { killSchedule } from './schedule.ts';

export interface ChaosOptions {
  emails: number;
  ratePerSecond: number;
  /** Mean time between kills. */
  killIntervalMs: number;
  seed: number;
  /** Whether the sender is among the parts killed (it is, twice as often as any other part). */
  senderKills: boolean;
  /** How long the pipeline may take to drain once sending has ended. */
  drainTimeoutMs: number;
  /** Where progress lines go. */
  log: (line: string) => void;
  /** Keep the data directory and write every part's output there, whatever the outcome. */
  keep?: boolean;
  /** The webhook endpoints to create (default both: `all` takes every event type, `problems` bounced, failed and suppressed). */
  endpoints?: Array<keyof typeof ENDPOINTS>;
}

export interface ChaosResult {
  facts: Facts;
  checks: Check[];
  ok: boolean;
  summary: string;
}

/** Every tenth recipient bounces: its report is fed once its message reached the sink. */
const BOUNCES = (index: number) => index % 10 === 3;
const DOMAIN = 'chaos.example.test';
/** The receiver fails the first attempt of about one webhook event in twelve, so retries run through the kills too. */
const FAILS_FIRST = (eventId: string) => [...eventId].reduce((h, c) => (h * 31 + c.charCodeAt(0)) >>> 0, 7) % 12 === 0;
export const ENDPOINTS = {
  all: { path: '/hooks/all', events: [...WEBHOOK_EVENT_TYPES] as string[] },
  problems: { path: '/hooks/problems', events: ['email.bounced', 'email.failed', 'email.suppressed'] },
};

const seconds = (ms: number) => Math.round(ms / 100) / 10;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));

export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const brokers = process.env.RELAY_KAFKA_BROKERS;
  const mongoUrl = process.env.RELAY_MONGODB_URL;
  if (!brokers || !mongoUrl) throw new Error('set RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL (eval "$(bash infra/engines/engines.sh up)")');
  const log = options.log;
  const run = randomBytes(4).toString('hex');
  const dir = mkdtempSync(join(tmpdir(), 'relay-chaos-'));
  const database = (name: string) => Object.assign(new URL(mongoUrl), { pathname: `/${name}` }).toString();
  const liveDb = `relay_chaos_${run}`;
  const freshDb = `relay_chaos_${run}_rebuilt`;
  const ca = makeTestCa();
  const cleanups: Array<() => Promise<unknown> | unknown> = [() => ca.remove()];
  let cluster: Cluster | undefined;
  let ok = false;
  try {
    // The receiver: a 2xx for everything but some first attempts; what it answered is recorded.
    const receiver = await startHttpsReceiver(ca.issue(['localhost']));
    cleanups.push(() => receiver.close());
    const webhookRequests: WebhookRequest[] = [];
    const failed = new Set<string>();
    receiver.answer = (request) => {
      const eventId = request.headers['relay-event-id'] ?? '';
      const status = FAILS_FIRST(eventId) && !failed.has(eventId) ? (failed.add(eventId), 503) : 200;
      webhookRequests.push({ path: request.path, eventId, body: request.body, status });
      return { status };
    };

    const inboundPort = await freePort();
    const reports: Array<Promise<void>> = [];
    const bouncesFed: string[] = [];
    const byRcpt = new Map<string, number>();
    const bounced = new Set<string>();
    let stopReports = false;
    const sink = await startCountingSink(({ rcpt, mailFrom }) => {
      const index = byRcpt.get(rcpt);
      if (index === undefined || !BOUNCES(index) || bounced.has(rcpt)) return;
      bounced.add(rcpt);
      reports.push(feedBounce(inboundPort, mailFrom, rcpt, () => stopReports).then((fed) => void (fed && bouncesFed.push(rcpt))));
    });
    cleanups.push(() => sink.close());

    const env = {
      RELAY_DATA_DIR: join(dir, 'data'),
      RELAY_KAFKA_BROKERS: brokers,
      RELAY_MONGODB_URL: database(liveDb),
      RELAY_LOG_NAMESPACE: `chaos_${run}`,
      RELAY_DELIVERY: 'smtp',
      RELAY_SMTP_URL: `smtp://127.0.0.1:${sink.port}?tls=none`,
      // Open claims are judged after 10 min × 0.01 = 6 s; webhook retries after 60 ms, 300 ms, 900 ms, …
      RELAY_DELIVERY_RETRY_SCALE: '0.01',
      RELAY_WEBHOOK_RETRY_SCALE: '0.001',
      RELAY_WEBHOOK_ALLOW: `localhost:${receiver.port}`,
      NODE_EXTRA_CA_CERTS: ca.caFile,
      RELAY_INBOUND_SMTP_PORT: String(inboundPort),
    };
    cleanups.push(() => dropDatabases(mongoUrl, [liveDb, freshDb]));

    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'chaos@example.test', '--password', 'a long enough chaos password',
      '--domain', DOMAIN, '--environment', 'production', '--activate'], env);
    if (setup.code !== 0) throw new Error(`relay setup failed: ${setup.stderr}`);
    const tenant = JSON.parse(setup.stdout) as { apiKey: string; projectId: string; workspaceId: string; sessionCookie: string };
    const quota = await runRelay(['workspace', 'quota', tenant.workspaceId, '--recipients', String(options.emails * 2 + 1000)], env);
    if (quota.code !== 0) throw new Error(`relay workspace quota failed: ${quota.stderr}`);

    log(`chaos: seed ${options.seed}, ${options.emails} emails at ${options.ratePerSecond}/s, a kill every ~${options.killIntervalMs / 1000} s${options.senderKills ? '' : ' (senders spared)'}; starting the parts`);
    cluster = await startCluster(distributedParts(inboundPort), env);
    const api = cluster.urlOf('api');
    const endpoints = (options.endpoints ?? ['all', 'problems']).map((name) => ENDPOINTS[name]);
    for (const endpoint of endpoints) await createEndpoint(api, tenant, `https://localhost:${receiver.port}${endpoint.path}`, endpoint.events);
    const stores = await openStores(loadConfig(env, false));
    cleanups.push(() => stores.close());
    const mongo = new MongoClient(mongoUrl);
    await mongo.connect();
    cleanups.push(() => mongo.close());
    const emailViews = mongo.db(liveDb).collection<{ _id: string }>(COLLECTIONS.emails);

    // Sending and killing, side by side.
    const durationMs = (options.emails / options.ratePerSecond) * 1000;
    const targets = cluster.names().flatMap((name) => (name === 'sender' ? (options.senderKills ? [name, name] : []) : [name]));
    const schedule = killSchedule({ seed: options.seed, intervalMs: options.killIntervalMs, durationMs, targets });
    const kills: KillRecord[] = [];
    const started = Date.now();
    const killing = (async () => {
      for (const kill of schedule) {
        await pause(started + kill.atMs - Date.now());
        await cluster!.kill(kill.part);
        kills.push({ atMs: Date.now() - started, part: kill.part });
        log(`  ${seconds(Date.now() - started)} s: killed ${kill.part}`);
      }
    })();
    const sending: Array<Promise<SentEmail | null>> = [];
    for (let index = 0; index < options.emails; index++) {
      await pause(started + (index * 1000) / options.ratePerSecond - Date.now());
      const rcpt = `chaos${index}@example.org`;
      byRcpt.set(rcpt, index);
      sending.push(sendEmail(api, tenant.apiKey, `chaos-${run}-${index}`, { from: `app@${DOMAIN}`, to: rcpt, subject: `chaos ${index}`, text: `email ${index} of the chaos run` })
        .then((id) => ({ index, id, rcpt }), (error: Error) => (log(`  email ${index} not admitted: ${error.message}`), null)));
      if (index > 0 && index % 500 === 0) log(`  ${seconds(Date.now() - started)} s: ${index} emails sent`);
    }
    const sent = (await Promise.all(sending)).filter((e): e is SentEmail => e !== null);
    const sendSeconds = seconds(Date.now() - started);
    await killing;
    log(`chaos: ${sent.length} emails admitted in ${sendSeconds} s, ${kills.length} kills; draining`);

    // The drain: every part back, every event forwarded and handled, every email final, every
    // webhook delivery settled, every bounce report taken.
    const drainStarted = Date.now();
    const drainDeadline = drainStarted + options.drainTimeoutMs;
    let waitingFor = 'the parts to be ready';
    let completed = false;
    let [lastReported, reportedAt] = ['', 0];
    try {
      await cluster.allReady(options.drainTimeoutMs);
      for (;;) {
        waitingFor = await drainPending(api, emailViews, stores, env.RELAY_LOG_NAMESPACE, reports, sent.length);
        if (waitingFor === '') {
          completed = true;
          break;
        }
        if (Date.now() > drainDeadline) break;
        if (waitingFor !== lastReported || Date.now() - reportedAt > 15_000) {
          log(`  drain, ${seconds(Date.now() - drainStarted)} s: waiting for ${waitingFor}`);
          [lastReported, reportedAt] = [waitingFor, Date.now()];
        }
        await pause(500);
      }
    } catch (error) {
      waitingFor += ` (${(error as Error).message})`;
    }
    stopReports = true;
    await Promise.all(reports);
    const drain = { completed, seconds: seconds(Date.now() - drainStarted), waitingFor };
    log(`chaos: drain ${completed ? 'completed' : 'incomplete'} in ${drain.seconds} s; checking`);

    const notReady: string[] = [];
    for (const name of cluster.names()) {
      const ready = await fetch(`${cluster.urlOf(name)}/readyz`).then((r) => r.status === 200, () => false);
      if (!ready) notReady.push(name);
    }
    const readModels = await compareWithRebuild(env, mongo, liveDb, freshDb);
    const facts: Facts = {
      seed: options.seed,
      emailsAsked: options.emails,
      sent,
      listed: new Map((await emailViews.find({}).project<{ _id: string; status: Status; failureCode: string | null }>({ status: 1, failureCode: 1 }).toArray())
        .map((e) => [e._id, { status: e.status, failureCode: e.failureCode }])),
      sink,
      kills,
      bouncesFed,
      expectedWebhooks: await expectedWebhooks(stores, sent, endpoints),
      begunAtSenderKills: await begunAtSenderKills(stores, sent, sink, kills.filter((k) => k.part === 'sender').map((k) => started + k.atMs)),
      webhookRequests,
      readModels,
      parked: await stores.documents.collection(COLLECTIONS.parkedEvents).count(),
      drain,
      notReady,
      sendSeconds,
    };
    const checks = evaluate(facts);
    ok = checks.every((c) => c.ok);
    return { facts, checks, ok, summary: summary(facts, checks) };
  } finally {
    if (cluster && (!ok || options.keep)) {
      for (const [name, output] of cluster.logs()) writeFileSync(join(dir, `${name}.log`), output);
    }
    await cluster?.stop();
    for (const cleanup of cleanups.reverse()) await Promise.resolve().then(cleanup).catch(() => {});
    if (ok && !options.keep) rmSync(dir, { recursive: true, force: true });
    else log(`chaos: data directory and each part's output kept in ${dir}`);
  }
}

/** POST /v1/emails with an Idempotency-Key, again and again until a 202: through API kills, 429s and cut connections. */
async function sendEmail(api: string, key: string, idempotencyKey: string, body: Record<string, unknown>): Promise<string> {
  const deadline = Date.now() + 120_000;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`${api}/v1/emails`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
        body: JSON.stringify(body),
      });
      if (response.status === 202) return ((await response.json()) as { id: string }).id;
      last = `${response.status} ${await response.text()}`;
      if (response.status < 500 && response.status !== 429) break;
      await pause(response.status === 429 ? Number(response.headers.get('retry-after') ?? 1) * 1000 : 200);
    } catch (error) {
      last = (error as Error).message;
      await pause(200);
    }
  }
  throw new Error(`no 202: ${last}`);
}

/** A DSN saying the recipient does not exist, to the message's return path, as a remote MTA sends it; again until accepted (the inbound part may be down). */
async function feedBounce(port: number, returnPath: string, rcpt: string, stop: () => boolean): Promise<boolean> {
  const report = dsn({ recipient: rcpt, action: 'failed', status: '5.1.1', diagnostic: `550 5.1.1 <${rcpt}>: Recipient address rejected: User unknown` });
  for (;;) {
    try {
      await deliverReport(port, returnPath, report);
      return true;
    } catch {
      if (stop()) return false;
      await pause(300);
    }
  }
}

async function createEndpoint(api: string, tenant: { projectId: string; sessionCookie: string }, url: string, events: string[]): Promise<void> {
  const response = await fetch(`${api}/v1/projects/${tenant.projectId}/webhook-endpoints`, {
    method: 'POST',
    headers: { cookie: tenant.sessionCookie, 'content-type': 'application/json' },
    body: JSON.stringify({ url, events }),
  });
  if (response.status !== 201) throw new Error(`creating the webhook endpoint ${url}: ${response.status} ${await response.text()}`);
}

/** What the drain still waits for ('' once nothing): checked in the order work flows. */
async function drainPending(api: string, emailViews: Collection<{ _id: string }>, stores: Stores, namespace: string, reports: Array<Promise<void>>, sent: number): Promise<string> {
  const settled = await Promise.race([Promise.all(reports).then(() => true), pause(0).then(() => false)]);
  if (!settled) return 'bounce reports to be taken';
  const metrics = await (await fetch(`${api}/metrics`)).text();
  const forwarderLag = /^relay_forwarder_lag (\d+)/m.exec(metrics)?.[1];
  if (forwarderLag !== '0') return `the forwarder (lag ${forwarderLag ?? 'not reported'})`;
  const offsets = await stores.log.groupOffsets(eventsTopic(namespace), PROCESSORS.map((p) => groupOf(namespace, p.name)));
  const behind = offsets.filter((o) => BigInt(o.end) > BigInt(o.start) && (o.committed === null || BigInt(o.committed) < BigInt(o.end)));
  if (behind.length > 0) return `consumer groups (${[...new Set(behind.map((o) => o.group))].join(', ')})`;
  // The read model GET /v1/emails serves, counted directly: listing 5,000 emails through the
  // API costs minutes on FerretDB (each page sorts in FerretDB).
  const projected = await emailViews.countDocuments({});
  if (projected < sent) return `${sent - projected} emails to be projected`;
  const open = await emailViews.countDocuments({ status: { $nin: STATUSES.filter(isFinalDeliveryStatus) } });
  if (open > 0) return `${open} emails to reach a final state`;
  const pending = await stores.documents.collection(COLLECTIONS.webhookDeliveries).count({ status: 'pending' });
  if (pending > 0) return `${pending} webhook deliveries`;
  return '';
}

/** The webhook events each email's stream gives (domain/webhooks/events.ts), with the endpoints subscribed to each. */
async function expectedWebhooks(stores: Stores, sent: SentEmail[], endpoints: Array<{ path: string; events: string[] }>): Promise<Facts['expectedWebhooks']> {
  const expected: Facts['expectedWebhooks'] = [];
  for (const email of sent) {
    for (const stored of await stores.events.readStream(`email-${email.id}`)) {
      const event = upcastEmailEvent(stored);
      const { state } = await loadEmail(stores.events, email.id, { upTo: event.revision });
      for (const hook of webhookEventsOf(event, state, state.occurredAt ?? stored.recordedAt)) {
        expected.push({ eventId: hook.id, type: hook.type, paths: endpoints.filter((e) => e.events.includes(hook.type)).map((e) => e.path) });
      }
    }
  }
  return expected;
}

/**
 * Of the emails the sink never got, those whose transaction Relay had begun (its durable
 * DeliveryTransactionStarted, written just before MAIL FROM) before a sender kill and whose
 * next delivery event came only after that kill: the transactions the kills cut, counted from
 * the event store, including those cut between the mark and MAIL FROM, which the sink cannot see.
 */
async function begunAtSenderKills(stores: Stores, sent: SentEmail[], sink: Facts['sink'], killTimes: number[]): Promise<string[]> {
  const begun: string[] = [];
  for (const email of sent.filter((e) => !sink.recipients.has(e.rcpt))) {
    const events = await stores.events.readStream(`email-${email.id}`);
    const cut = events.some((event, i) => {
      if (event.type !== 'DeliveryTransactionStarted') return false;
      const startedAt = Date.parse(event.recordedAt);
      const next = events.slice(i + 1).find((e) => e.type.startsWith('Delivery'));
      const nextAt = next ? Date.parse(next.recordedAt) : Infinity;
      return killTimes.some((k) => startedAt <= k && k <= nextAt);
    });
    if (cut) begun.push(email.id);
  }
  return begun;
}

/** `relay projections rebuild` of every read model into a fresh database, compared with the live one document by document (`_v` aside). */
async function compareWithRebuild(env: Record<string, string>, client: MongoClient, liveDb: string, freshDb: string): Promise<ReadModelComparison[]> {
  const freshUrl = Object.assign(new URL(env.RELAY_MONGODB_URL), { pathname: `/${freshDb}` }).toString();
  const comparisons: ReadModelComparison[] = [];
  for (const [name, projection] of Object.entries(PROJECTIONS)) {
    const rebuilt = await runRelay(['projections', 'rebuild', name, '--json'], { ...env, RELAY_MONGODB_URL: freshUrl });
    if (rebuilt.code !== 0) throw new Error(`relay projections rebuild ${name}: ${rebuilt.stderr}`);
    const read = async (db: string) => new Map((await client.db(db).collection(projection.collection).find({}).toArray())
      .map(({ _v, ...doc }) => [String(doc._id), doc]));
    const [live, fresh] = [await read(liveDb), await read(freshDb)];
    const differing = [...new Set([...live.keys(), ...fresh.keys()])].filter((id) => !isDeepStrictEqual(live.get(id), fresh.get(id)));
    comparisons.push({ collection: projection.collection, live: live.size, rebuilt: fresh.size, differing: differing.slice(0, 10), differingCount: differing.length });
  }
  return comparisons;
}

async function dropDatabases(mongoUrl: string, names: string[]): Promise<void> {
  const client = new MongoClient(mongoUrl);
  try {
    await client.connect();
    for (const name of names) await client.db(name).dropDatabase();
  } finally {
    await client.close();
  }
}
