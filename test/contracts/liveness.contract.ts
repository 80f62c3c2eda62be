// What Relay promises through an outage of one of its stores (issue 23, Liveness), for any
// outage: `relay start`'s parts in one process, emails sent before, during (when the outage
// leaves admissions possible) and after it. Each time
//   - every email is delivered exactly once (one outbox transaction each) and its timeline is
//     queued, processing, sent: no step twice;
//   - every event of the event store reaches the log, and one reaches it twice only if it comes
//     after the position the forwarder had saved when the outage began (the checkpoint's
//     promise: what it saved is never forwarded again); where the log serves the events topic
//     from the event store (Log.followsEventStore), each is there exactly once;
//   - /readyz answers 503 while the outage lasts, naming what is not ready, and 200 after it,
//     with every part running again; /metrics says the same (relay_part_work_waiting 1 and no
//     progress for the threshold: what the RelayPartStuck alert watches; relay_part_up 1 after).
// The parts are judged with a short stuck threshold (STUCK_AFTER_MS) so that an outage of a
// few seconds shows; the rule is the same one as in production (apps/liveness.ts).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { eventsTopic } from '../../apps/pipeline/topics.ts';
import { ALL_PARTS, startRelay, type RelayOptions, type RunningRelay } from '../../apps/relay.ts';
import { loadConfig } from '../../infra/config.ts';
import { readOutbox } from '../../infra/mail/outbox-transport.ts';
import type { LogRecord } from '../../infra/ports/log.ts';
import { waitUntil } from '../support/eventually.ts';
import { samplesOf, scrape } from '../support/metrics.ts';
import { postEmail, runRelay } from '../support/relay-process.ts';
import { skippableSuite } from '../support/skippable-suite.ts';

export interface Outage {
  /** What goes away, for the suite's name. */
  name: string;
  /** Starts what the outage needs (in Relay's data directory, if it must); gives the stores' configuration and Relay's start options. */
  setUp(dataDir: string): Promise<{ env: Record<string, string>; options?: RelayOptions }>;
  begin(): Promise<void>;
  end(): Promise<void>;
  tearDown(): Promise<void>;
  /** Whether POST /v1/emails can admit emails while the outage lasts. */
  admitsDuring: boolean;
  /** The /readyz checks that must turn false while the outage lasts (a store, a part). */
  notReadyDuring: string[];
}

/** The stuck threshold of the parts under test: a part recovering, or idle with work, this long is not ready. */
export const STUCK_AFTER_MS = 2_000;
const WAIT_MS = 180_000;

interface Readyz {
  status: string;
  checks: Record<string, boolean>;
  parts: Record<string, { state: string; ready: boolean; reason: string | null; error: string | null }>;
}

async function readyz(url: string): Promise<{ code: number; body: Readyz } | null> {
  try {
    const response = await fetch(`${url}/readyz`);
    return { code: response.status, body: await response.json() as Readyz };
  } catch {
    return null;
  }
}

/** Every record of the events topic, read by a consumer group of its own from the start. */
async function readTopic(relay: RunningRelay, topic: string, expected: number): Promise<LogRecord[]> {
  const records: LogRecord[] = [];
  const ids = new Set<string>();
  const consumer = await relay.stores.log.consume({
    group: `liveness-check-${randomUUID().slice(0, 8)}`, topic, fromBeginning: true,
    handle: async (record) => {
      records.push(record);
      ids.add(record.headers['event-id']);
    },
  });
  try {
    await waitUntil(() => ids.size >= expected, `the ${expected} events to be read back from ${topic}`, WAIT_MS);
  } finally {
    await consumer.stop();
  }
  return records;
}

export function livenessContract(outage: Outage, skipReason?: string): void {
  const test = skippableSuite(`liveness through an outage: ${outage.name}`, skipReason);

  test(`${outage.name}: every email once, every event forwarded (twice only past the checkpoint), /readyz 503 during and 200 after`, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'relay-liveness-'));
    const namespace = `liveness_${randomUUID().slice(0, 8)}`;
    let relay: RunningRelay | null = null;
    try {
      const { env, options } = await outage.setUp(dataDir);
      const base = { RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', RELAY_LOG_LEVEL: 'warn', RELAY_LOG_NAMESPACE: namespace, ...env };
      const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], base);
      assert.is(setup.code, 0, setup.stderr);
      const apiKey = JSON.parse(setup.stdout).apiKey as string;
      relay = await startRelay(loadConfig(base), ALL_PARTS, { ...options, processorPolicy: { stuckAfterMs: STUCK_AFTER_MS } });
      const url = relay.url!;
      const { stores } = relay;
      await waitUntil(async () => (await readyz(url))?.code === 200, '/readyz to answer 200 at start', WAIT_MS);

      const ids: string[] = [];
      const send = async (label: string) => ids.push((await postEmail(url, apiKey, { from: 'hello@example.test', to: 'you@example.test', subject: label, text: label })).id);
      const statusOf = async (id: string) => {
        const response = await fetch(`${url}/v1/emails/${id}`, { headers: { authorization: `Bearer ${apiKey}` } }).catch(() => null);
        return response?.status === 200 ? (await response.json() as { status: string; events: Array<{ type: string }> }) : null;
      };
      const allSent = () => waitUntil(async () => {
        for (const id of ids) if ((await statusOf(id))?.status !== 'sent') return false;
        return true;
      }, `all ${ids.length} emails to be sent`, WAIT_MS);

      for (let i = 0; i < 4; i++) await send(`before ${i}`);
      await allSent();
      // The checkpoint's promise: what the forwarder saved is never forwarded again.
      const view = stores.log.followsEventStore?.(eventsTopic(namespace)) ?? false;
      const checkpoints = stores.documents.collection<{ _id: string; position: string | null }>('checkpoints');
      const head = async () => (await stores.events.readAll()).at(-1)!.position;
      if (!view) await waitUntil(async () => (await checkpoints.get(`forwarder:${eventsTopic(namespace)}`))?.position === await head(), 'the forwarder to save its position at the head', WAIT_MS);
      const promised = view ? null : BigInt((await checkpoints.get(`forwarder:${eventsTopic(namespace)}`))!.position!);

      await outage.begin();
      if (outage.admitsDuring) for (let i = 0; i < 4; i++) await send(`during ${i}`);
      let during: Readyz | null = null;
      await waitUntil(async () => {
        const answer = await readyz(url);
        if (answer?.code !== 503 || !outage.notReadyDuring.every((check) => answer.body.checks[check] === false)) return false;
        during = answer.body;
        return true;
      }, `/readyz to answer 503 with ${outage.notReadyDuring.join(', ')} not ready`, WAIT_MS);
      assert.is(during!.status, 'not_ready');
      const stuckParts = outage.notReadyDuring.filter((check) => during!.parts[check]);
      for (const part of stuckParts) assert.ok(during!.parts[part].reason, `/readyz says why ${part} is not ready`);
      // What the RelayPartStuck alert reads: work waiting, and no progress for the threshold.
      await waitUntil(async () => {
        const samples = await scrape(url);
        const value = (name: string, part: string) => samplesOf(samples, name, { part })[0]?.value;
        return stuckParts.every((part) => value('relay_part_work_waiting', part) === 1
          && Date.now() / 1000 - value('relay_part_last_progress_seconds', part) >= STUCK_AFTER_MS / 1000);
      }, `/metrics to show ${stuckParts.join(', ')} with work waiting and no progress`, WAIT_MS);

      await outage.end();
      await waitUntil(async () => (await readyz(url))?.code === 200, '/readyz to answer 200 after the outage', WAIT_MS);
      for (let i = 0; i < 3; i++) await send(`after ${i}`);
      await allSent();

      // A dispatcher that failed late in the outage comes back on its own back-off (capped at
      // 10 s), which may be after the sends above went through.
      await waitUntil(async () => {
        const answer = await readyz(url);
        return answer?.code === 200 && Object.values(answer.body.parts).every((report) => report.state === 'running');
      }, 'every part to run again', WAIT_MS);
      const after = (await readyz(url))!;
      assert.is(after.code, 200);
      for (const [part, report] of Object.entries(after.body.parts)) assert.is(report.state, 'running', `${part} runs again`);
      const up = samplesOf(await scrape(url), 'relay_part_up');
      assert.equal(up.map((s) => s.labels.part).sort(), Object.keys(after.body.parts).sort(), 'every part on /metrics');
      for (const sample of up) assert.is(sample.value, 1, `relay_part_up{part="${sample.labels.part}"}`);

      // Each email once: one outbox transaction, and a timeline with each step once.
      for (const id of ids) {
        const written = await readOutbox(relay.services.outboxDir, id);
        assert.is(written?.envelopes.length, 1, `email ${id} was written once`);
        assert.equal((await statusOf(id))!.events.map((e) => e.type), ['email.queued', 'email.processing', 'email.sent']);
      }

      // Every event forwarded; twice only past the checkpoint's promise.
      const events = await stores.events.readAll();
      const records = await readTopic(relay, eventsTopic(namespace), events.length);
      const forwarded = new Map<string, number>();
      for (const record of records) forwarded.set(record.headers['event-id'], (forwarded.get(record.headers['event-id']) ?? 0) + 1);
      for (const event of events) {
        const times = forwarded.get(event.id) ?? 0;
        assert.ok(times >= 1, `${event.type} ${event.streamId}@${event.revision} was forwarded`);
        if (promised === null) assert.is(times, 1, `${event.type} at ${event.position} is a record of the view once`);
        else if (times > 1) assert.ok(BigInt(event.position) > promised, `${event.type} at ${event.position} was forwarded ${times} times although the checkpoint said ${promised}`);
      }
    } finally {
      await relay?.stop().catch((error) => console.error('stopping relay failed', error));
      await outage.tearDown();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  test.run();
}
