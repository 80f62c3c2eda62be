// Distributed mode on real engines: API, forwarder and projectors as separate processes over
// the embedded event store + real Kafka + FerretDB (MongoDB wire protocol), with the fault
// tests ops care about: kills, redelivery, two instances of one consumer group.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../infra/config.ts';
import { openStores, type Stores } from '../apps/runtime.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { encodeEvent, eventsTopic } from '../apps/pipeline/topics.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort, postEmail, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';

const test = suite('distributed mode: separate processes on Kafka + FerretDB');
const brokers = process.env.RELAY_KAFKA_BROKERS;
const mongoUrl = process.env.RELAY_MONGODB_URL;

if (!brokers || !mongoUrl) {
  console.log('skipped: RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set (start them with: eval "$(bash infra/engines/engines.sh up)")');
  for (const name of ['walking skeleton across processes', 'two projector instances share partitions', 'projector SIGKILL mid-stream', 'forwarder SIGKILL and restart', 'duplicate delivery changes nothing']) test.skip(name, () => {});
  test.run();
} else {
  const run = randomBytes(4).toString('hex');
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-dist-'));
  const database = new URL(mongoUrl);
  database.pathname = `/relay_e2e_${run}`;
  const env = { RELAY_DATA_DIR: dataDir, RELAY_KAFKA_BROKERS: brokers, RELAY_MONGODB_URL: database.toString(), RELAY_LOG_NAMESPACE: `e2e_${run}` };
  const processes: RelayProcess[] = [];
  let apiUrl = '';
  let apiKey = '';
  let stores: Stores;
  const sent: string[] = [];

  const headers = () => ({ authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' });

  async function start(args: string[], extra: Record<string, string> = {}): Promise<{ process: RelayProcess; url: string }> {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const child = spawnRelay(args, { ...env, PORT: String(port), ...extra });
    processes.push(child);
    await waitForReady(url, child, 60_000);
    return { process: child, url };
  }

  async function send(n = 1): Promise<void> {
    for (let i = 0; i < n; i++) {
      sent.push((await postEmail(apiUrl, apiKey, { from: 'app@example.test', to: `u${sent.length}@example.test`, subject: `n${sent.length}`, text: 'hi' })).id);
    }
  }

  async function projectedCount(): Promise<number> {
    return stores.documents.collection(COLLECTIONS.emails).count({ projectId: { ne: null } });
  }

  async function waitAllProjected(what: string): Promise<void> {
    await waitUntil(async () => (await projectedCount()) === sent.length, `${what}: all ${sent.length} emails are in the read model`, 90_000);
  }

  /** The live read model equals a rebuild from the event store, document by document. */
  async function assertEqualsRebuild(): Promise<void> {
    const into = `emails_check_${randomBytes(3).toString('hex')}`;
    const rebuilt = await runRelay(['projections', 'rebuild', 'emails', '--into', into, '--json'], env);
    assert.is(rebuilt.code, 0, rebuilt.stderr);
    const strip = (docs: Array<{ _id: string; _v: number }>) => new Map(docs.map(({ _v, ...d }) => [d._id, d]));
    const live = strip(await stores.documents.collection<{ _id: string }>(COLLECTIONS.emails).find({ orderBy: [['_id', 'asc']], limit: 100_000 }));
    const fresh = strip(await stores.documents.collection<{ _id: string }>(into).find({ orderBy: [['_id', 'asc']], limit: 100_000 }));
    assert.is(fresh.size, sent.length);
    assert.is(live.size, fresh.size);
    for (const [id, doc] of fresh) assert.equal(live.get(id), doc, `email ${id} equals its rebuild`);
  }

  const projectedPartitions = (p: RelayProcess) =>
    new Set(p.output().split('\n').filter((l) => l.includes('"projected"')).map((l) => JSON.parse(l).partition as number));

  let forwarder: RelayProcess;
  let projector1: RelayProcess;

  test.before(async () => {
    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'dist@example.test', '--password', 'a long enough password', '--domain', 'example.test', '--environment', 'production', '--activate'], env);
    assert.is(setup.code, 0, setup.stderr);
    apiKey = JSON.parse(setup.stdout).apiKey;
    stores = await openStores(loadConfig(env));
    apiUrl = (await start(['api'])).url;
    forwarder = (await start(['forwarder'])).process;
    projector1 = (await start(['processor', 'projector'], { RELAY_LOG_LEVEL: 'debug', RELAY_INSTANCE_ID: 'projector-1' })).process;
  });

  test.after(async () => {
    await Promise.all(processes.map((p) => p.stop()));
    await stores?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  test('walking skeleton across processes: send through the API process, read the projection built by the projector process', async () => {
    await send(1);
    await waitAllProjected('one email');
    const detail = (await (await fetch(`${apiUrl}/v1/emails/${sent[0]}`, { headers: headers() })).json()) as { status: string; to: string[] };
    assert.is(detail.status, 'queued');
    assert.equal(detail.to, ['u0@example.test']);
  });

  test('two projector instances in one consumer group both receive partitions, and the read model is right', async () => {
    // Instances of one part on one host need names of their own (they would share the host name).
    const projector2 = (await start(['processor', 'projector'], { RELAY_LOG_LEVEL: 'debug', RELAY_INSTANCE_ID: 'projector-2' })).process;
    await waitUntil(async () => {
      await send(8);
      return projectedPartitions(projector2).size > 0 && projectedPartitions(projector1).size > 0 && (await projectedCount()) > sent.length - 8;
    }, 'both instances project events', 90_000);
    await waitAllProjected('two instances');
    const p1 = projectedPartitions(projector1);
    const p2 = projectedPartitions(projector2);
    assert.ok(p1.size > 0 && p2.size > 0, `both received partitions (${[...p1]} / ${[...p2]})`);
    await assertEqualsRebuild();
    await projector2.stop();
  });

  test('a projector SIGKILLed in the middle of a stream and restarted ends equal to a rebuild from scratch', async () => {
    const burst = send(60);
    await waitUntil(async () => (await projectedCount()) > sent.length - 50, 'the projector is mid-stream', 60_000);
    const exit = await projector1.kill();
    assert.is(exit.signal, 'SIGKILL');
    await burst;
    projector1 = (await start(['processor', 'projector'], { RELAY_LOG_LEVEL: 'debug', RELAY_INSTANCE_ID: 'projector-1' })).process;
    await waitAllProjected('after the restart');
    await assertEqualsRebuild();
  });

  test('a forwarder SIGKILLed and restarted loses no event', async () => {
    const before = sent.length;
    const burst = send(40);
    // Killed mid-burst: once some of it has been forwarded (and projected).
    await waitUntil(async () => (await projectedCount()) > before, 'the forwarder is mid-burst', 60_000);
    const exit = await forwarder.kill();
    assert.is(exit.signal, 'SIGKILL');
    await burst;
    await send(5); // appended while no forwarder runs
    forwarder = (await start(['forwarder'])).process;
    await waitAllProjected('after the forwarder restart');
    await assertEqualsRebuild();
  });

  test('the same event delivered twice changes nothing', async () => {
    const id = sent[0];
    const before = await stores.documents.collection<{ _id: string; _v: number }>(COLLECTIONS.emails).get(id);
    const [event] = await stores.events.readStream(`email-${id}`);
    const projectedLines = () => projector1.output().split('\n').filter((l) => l.includes('"projected"') && l.includes(`email-${id}`)).length;
    const seen = projectedLines();
    await stores.log.publish(eventsTopic(env.RELAY_LOG_NAMESPACE), [{ key: event.streamId, value: encodeEvent(event) }, { key: event.streamId, value: encodeEvent(event) }]);
    await waitUntil(() => projectedLines() >= seen + 2, 'the projector handled both duplicates', 60_000);
    const after = await stores.documents.collection<{ _id: string; _v: number }>(COLLECTIONS.emails).get(id);
    assert.equal(after, before, 'document and version unchanged');
  });

  test.run();
}
