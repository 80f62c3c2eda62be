// The EventStoreDB event store: the shared contract plus what only a networked store has
// (paging $all in batches, positions that agree across read paths, resubscribing after the
// connection drops). It runs against RELAY_EVENTSTORE_URL when set, else against a container
// started with testcontainers; with neither, those tests are reported as skipped, with why.
// The last suite needs no server and always runs.
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer, connect } from 'node:net';
import type { AddressInfo, Server, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { EsdbEventStore } from '../infra/esdb/event-store.ts';
import type { EsdbEventStoreOptions } from '../infra/esdb/event-store.ts';
import { WrongExpectedRevisionError } from '../infra/ports/event-store.ts';
import type { EventStore, StoredEvent } from '../infra/ports/event-store.ts';
import { eventStoreContract } from './contracts/event-store.contract.ts';
import { settle, waitUntil } from './support/eventually.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const IMAGE = process.env.RELAY_EVENTSTORE_IMAGE?.trim() || 'eventstore/eventstore:24.10';
const NO_SERVER = 'no Docker daemon reachable and RELAY_EVENTSTORE_URL unset';

const event = (type: string, data: Record<string, unknown> = {}) => ({ id: randomUUID(), type, data });
const unique = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

/**
 * null when a container runtime answers, else why not. It asks in a child process with a time
 * limit: a DOCKER_HOST that never answers must not hang this file, and a killed child leaves no
 * half-open socket behind in this one.
 */
async function probeDocker(timeoutMs: number): Promise<string | null> {
  const script = `
    import { getContainerRuntimeClient } from 'testcontainers';
    try { await getContainerRuntimeClient(); process.exit(0); }
    catch (error) { console.error(error?.message ?? String(error)); process.exit(1); }`;
  try {
    await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: root, timeout: timeoutMs });
    return null;
  } catch (error) {
    const failure = error as { killed?: boolean; stderr?: string; message: string };
    if (failure.killed) return `no answer within ${timeoutMs} ms`;
    return failure.stderr?.trim() || failure.message;
  }
}

interface EventStoreServer {
  connectionString: string;
  stop(): Promise<void>;
}

async function startContainer(): Promise<EventStoreServer> {
  const { GenericContainer, Wait } = await import('testcontainers');
  const container = await new GenericContainer(IMAGE)
    .withEnvironment({
      EVENTSTORE_INSECURE: 'true',
      EVENTSTORE_RUN_PROJECTIONS: 'None',
      EVENTSTORE_MEM_DB: 'true',
      EVENTSTORE_CLUSTER_SIZE: '1',
    })
    .withExposedPorts(2113)
    // /health/live is what the image's own HEALTHCHECK asks; it answers 204 once the node runs.
    .withWaitStrategy(Wait.forHttp('/health/live', 2113).forStatusCodeMatching((status) => status >= 200 && status < 300))
    .withStartupTimeout(120_000)
    .start();
  return {
    connectionString: `esdb://${container.getHost()}:${container.getMappedPort(2113)}?tls=false`,
    stop: async () => {
      await container.stop();
    },
  };
}

let server: EventStoreServer | null = null;
let skip: string | undefined;
const url = process.env.RELAY_EVENTSTORE_URL?.trim();
if (url) {
  server = { connectionString: url, stop: async () => {} };
} else {
  const unavailable = await probeDocker(15_000);
  if (unavailable === null) {
    server = await startContainer();
  } else {
    skip = NO_SERVER;
    console.log(`  (container runtime: ${unavailable})`);
  }
}

let unreachable: Error | undefined;

/** A store on the server once it accepts writes: a fresh node takes a moment to elect itself leader. */
async function openStore(options: EsdbEventStoreOptions = {}, connectionString = server!.connectionString): Promise<EsdbEventStore> {
  if (unreachable) throw unreachable;
  const store = EsdbEventStore.connect(connectionString, options);
  let lastError: unknown;
  try {
    await waitUntil(
      async () => {
        try {
          await store.append(unique('readiness'), [event('ReadinessProbe')], { expectedRevision: 'any' });
          return true;
        } catch (error) {
          lastError = error;
          return false;
        }
      },
      `EventStoreDB at ${connectionString} accepts appends`,
      60_000,
    );
  } catch (error) {
    await store.close();
    unreachable = new Error(`${(error as Error).message} (last error: ${String(lastError)})`);
    // uvu reports a failing before() hook only as tests that did not pass; this says why.
    console.error(unreachable.message);
    throw unreachable;
  }
  return store;
}

eventStoreContract(
  'eventstoredb',
  async () => {
    const store = await openStore();
    return { store, close: () => store.close() };
  },
  { skip, noReadFailures: 'this opener cannot make an EventStoreDB server\'s reads fail (the TCP relay below cuts connections instead)' },
);

/** A TCP relay in front of the server whose connections the test can cut, as a network failure would. */
interface Relay {
  port: number;
  /** Destroys every open connection; returns how many there were. */
  cut(): number;
  connections(): number;
  close(): Promise<void>;
}

function startRelay(host: string, port: number, onConnection: (client: Socket) => void = () => {}): Promise<Relay & { server: Server }> {
  const open = new Set<Socket>();
  let accepted = 0;
  const relay = createServer((client) => {
    accepted++;
    onConnection(client);
    if (client.destroyed) return;
    const upstream = connect(port, host);
    open.add(client);
    open.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream).pipe(client);
  });
  return new Promise((resolve) => {
    relay.listen(0, '127.0.0.1', () => {
      resolve({
        server: relay,
        port: (relay.address() as AddressInfo).port,
        cut: () => {
          const count = open.size;
          for (const socket of open) socket.destroy();
          open.clear();
          return count;
        },
        connections: () => accepted,
        close: () =>
          new Promise<void>((done) => {
            for (const socket of open) socket.destroy();
            relay.close(() => done());
          }),
      });
    });
  });
}

/** Host, port and the URL rewritten to another port, for an insecure single-node connection string. */
function relayable(connectionString: string): { host: string; port: number; via(port: number): string } | string {
  let parsed: URL;
  try {
    parsed = new URL(connectionString);
  } catch {
    return `"${connectionString}" is not a single-node connection string`;
  }
  if (!/^(esdb|kurrentdb|kurrent):$/.test(parsed.protocol)) return 'needs a single-node (not +discover) connection string';
  if (parsed.searchParams.get('tls')?.toLowerCase() !== 'false') return 'needs an insecure (tls=false) connection string';
  return {
    host: parsed.hostname.replace(/^\[|\]$/g, ''),
    port: Number(parsed.port || 2113),
    via: (port) => {
      const copy = new URL(parsed);
      copy.hostname = '127.0.0.1';
      copy.port = String(port);
      return copy.toString();
    },
  };
}

const esdb = skippableSuite<{ store: EventStore; stores: EsdbEventStore[] }>('eventstoredb adapter', skip);

esdb.before(async (context) => {
  context.stores = [];
  context.store = await openStore();
  context.stores.push(context.store as EsdbEventStore);
});

esdb.after(async (context) => {
  for (const store of context.stores ?? []) await store.close();
  await server?.stop();
});

esdb('positions agree between the append result, readStream, readAll and subscribeAll', async ({ store }) => {
  const tag = unique('positions');
  const single = await store.append(`${tag}-one`, [event('Single')], { expectedRevision: 'no_stream' });
  const batch = await store.append(`${tag}-many`, [event('First'), event('Second'), event('Third')], { expectedRevision: 'no_stream' });

  const streamRead = [...(await store.readStream(`${tag}-one`)), ...(await store.readStream(`${tag}-many`))];
  const allRead = await store.readAll({ filter: { streamPrefixes: [tag] } });
  assert.equal(allRead.map((e) => e.id), streamRead.map((e) => e.id));
  assert.equal(allRead.map((e) => e.position), streamRead.map((e) => e.position), 'readStream and readAll show the same positions');
  assert.is(single.position, allRead[0].position, 'a single-event append answers its event position');
  assert.is(batch.position, allRead[3].position, 'a batch answers the position of its last event');

  const seen: StoredEvent[] = [];
  const subscription = store.subscribeAll({ filter: { streamPrefixes: [tag] } }, async (e) => {
    seen.push(e);
  });
  try {
    await waitUntil(() => seen.length >= 4, 'the subscription delivers the four events');
    assert.equal(seen.map((e) => e.position), allRead.map((e) => e.position), 'subscriptions show the same positions');
  } finally {
    await subscription.stop();
  }
  // Each position, passed back as `after`, continues exactly after its event.
  for (let i = 0; i < allRead.length; i++) {
    const rest = await store.readAll({ after: allRead[i].position, filter: { streamPrefixes: [tag] } });
    assert.equal(rest.map((e) => e.id), allRead.slice(i + 1).map((e) => e.id));
  }
});

esdb('an idempotent re-append answers the same revision and position as the first', async ({ store }) => {
  const stream = unique('idempotent-position');
  const one = [event('A')];
  const first = await store.append(stream, one, { expectedRevision: 'no_stream' });
  assert.equal(await store.append(stream, one, { expectedRevision: 'no_stream' }), first);
  const two = [event('B'), event('C')];
  const second = await store.append(stream, two, { expectedRevision: 0 });
  assert.equal(await store.append(stream, two, { expectedRevision: 0 }), second);
  assert.is((await store.readStream(stream)).length, 3);
});

esdb('readAll pages through $all in small batches without gaps or repeats', async ({ stores }) => {
  const store = await openStore({ readBatchSize: 3 });
  stores.push(store);
  const tag = unique('batches');
  const appended: string[] = [];
  for (let i = 0; i < 8; i++) {
    const e = event(i % 2 ? 'Odd' : 'Even', { i });
    await store.append(`${tag}-${i % 3}`, [e], { expectedRevision: 'any' });
    appended.push(e.id);
  }
  assert.equal((await store.readAll({ filter: { streamPrefixes: [tag] } })).map((e) => e.id), appended);
  assert.equal((await store.readAll({ maxCount: 5, filter: { streamPrefixes: [tag] } })).map((e) => e.id), appended.slice(0, 5));
  const odd = await store.readAll({ filter: { streamPrefixes: [tag], eventTypePrefixes: ['Odd'] } });
  assert.equal(odd.map((e) => e.data.i), [1, 3, 5, 7]);
});

esdb('an append conflict carries the actual revision from the server', async ({ store }) => {
  const stream = unique('conflict');
  await store.append(stream, [event('A'), event('B')], { expectedRevision: 'no_stream' });
  try {
    await store.append(stream, [event('C')], { expectedRevision: 5 });
    assert.unreachable('the append must conflict');
  } catch (error) {
    assert.instance(error, WrongExpectedRevisionError);
    assert.is((error as WrongExpectedRevisionError).actual, 1);
  }
});

const relayTarget = server ? relayable(server.connectionString) : NO_SERVER;
const relayTest = typeof relayTarget === 'string' ? esdb.skip : esdb;
if (typeof relayTarget === 'string' && server) console.log(`  resubscribe test skipped: ${relayTarget}`);

relayTest('a subscription resubscribes after its connection drops, without gaps or repeats', async ({ store, stores }) => {
  const target = relayTarget as Exclude<typeof relayTarget, string>;
  const relay = await startRelay(target.host, target.port);
  try {
    const viaRelay = await openStore({ retryDelayMs: 20, maxRetryDelayMs: 200 }, target.via(relay.port));
    stores.push(viaRelay);
    const stream = unique('drop');
    const written = [event('Before', { n: 0 }), event('Before', { n: 1 })];
    await store.append(stream, written, { expectedRevision: 'no_stream' });

    const seen: StoredEvent[] = [];
    const errors: Error[] = [];
    const subscription = viaRelay.subscribeAll({ filter: { streamPrefixes: [stream] }, onError: (e) => errors.push(e) }, async (e) => {
      seen.push(e);
    });
    try {
      await waitUntil(() => seen.length >= 2, 'the stored events arrive through the relay');
      for (let round = 0; round < 3; round++) {
        assert.ok(relay.cut() > 0, 'there was a connection to cut');
        const more = [event('After', { round, n: 0 }), event('After', { round, n: 1 })];
        await store.append(stream, more, { expectedRevision: written.length - 1 });
        written.push(...more);
        await waitUntil(() => seen.length >= written.length, `the events appended after cut ${round + 1} arrive`);
      }
      await settle(200);
      assert.equal(seen.map((e) => e.id), written.map((e) => e.id), 'every event once, in order');
      assert.equal(errors, [], 'a dropped connection is not the end of the subscription');
    } finally {
      await subscription.stop();
    }
  } finally {
    await relay.close();
  }
});

esdb.run();

// Behaviour that needs no EventStoreDB: argument checks come before any I/O, an unreachable
// server makes ping() false rather than hang, and subscriptions keep retrying until stopped.
const offline = suite('eventstoredb adapter without a server');

/** A port that accepts connections and drops them at once, as a server going away does. */
async function droppingServer(): Promise<Relay & { server: Server }> {
  return startRelay('127.0.0.1', 9, (client) => client.destroy());
}

offline('bad arguments are refused with a TypeError before anything is sent', async () => {
  const dropping = await droppingServer();
  const store = EsdbEventStore.connect(`esdb://127.0.0.1:${dropping.port}?tls=false`);
  try {
    const attempts: Array<() => Promise<unknown>> = [
      () => store.append('s', [{ id: 'not-a-uuid', type: 'A', data: {} }], { expectedRevision: 'any' }),
      () => store.append('s', [{ id: randomUUID(), type: '', data: {} }], { expectedRevision: 'any' }),
      () => store.append('', [event('A')], { expectedRevision: 'any' }),
      () => store.append('s', [event('A')], { expectedRevision: -1 }),
      () => store.append('s', [event('A')], { expectedRevision: 1.5 }),
      () => store.readStream('s', { fromRevision: -1 }),
      () => store.readStream('s', { maxCount: 1.5 }),
      () => store.readAll({ after: 'abc' }),
      () => store.readAll({ after: '12' }),
      () => store.readAll({ filter: { streamPrefixes: [] } }),
      () => store.readAll({ maxCount: -1 }),
    ];
    for (const attempt of attempts) {
      try {
        await attempt();
        assert.unreachable(`${attempt.toString()} should be refused`);
      } catch (error) {
        assert.instance(error, TypeError, attempt.toString());
      }
    }
    for (const options of [{ after: 'x/y' }, { filter: { eventTypePrefixes: [] } }]) {
      try {
        store.subscribeAll(options, async () => {});
        assert.unreachable(`subscribeAll should refuse ${JSON.stringify(options)}`);
      } catch (error) {
        assert.instance(error, TypeError);
      }
    }
    assert.is(dropping.connections(), 0, 'nothing was sent');
  } finally {
    await store.close();
    await dropping.close();
  }
});

offline('ping() is false, not hanging, when the server is unreachable', async () => {
  const dropping = await droppingServer();
  const store = EsdbEventStore.connect(`esdb://127.0.0.1:${dropping.port}?tls=false`, { pingTimeoutMs: 3_000 });
  try {
    assert.is(await store.ping(), false);
    assert.ok(dropping.connections() > 0, 'ping tried the server');
  } finally {
    await store.close();
    await dropping.close();
  }
  assert.is(await store.ping(), false, 'a closed store does not answer');
  try {
    await store.readAll();
    assert.unreachable('a closed store refuses calls');
  } catch (error) {
    assert.match(String(error), /closed/);
  }

  // A server that accepts the connection and then says nothing: only the ping's own bound ends the wait.
  const held = new Set<Socket>();
  const silent = createServer((socket) => held.add(socket.on('error', () => {})));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const stuck = EsdbEventStore.connect(`esdb://127.0.0.1:${(silent.address() as AddressInfo).port}?tls=false`, { pingTimeoutMs: 500 });
  try {
    assert.is(await stuck.ping(), false);
    assert.ok(held.size > 0, 'ping reached the silent server');
  } finally {
    await stuck.close();
    for (const socket of held) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  }
});

offline('a subscription whose server drops every connection keeps resubscribing until stopped, without onError', async () => {
  const dropping = await droppingServer();
  const store = EsdbEventStore.connect(`esdb://127.0.0.1:${dropping.port}?tls=false`, { retryDelayMs: 20, maxRetryDelayMs: 100 });
  const errors: Error[] = [];
  let handled = 0;
  try {
    const subscription = store.subscribeAll({ onError: (e) => errors.push(e) }, async () => {
      handled++;
    });
    await waitUntil(() => dropping.connections() >= 3, 'the subscription tried the server again and again');
    await subscription.stop();
    assert.equal(errors, [], 'connection failures are retried, not reported as the end');
    assert.is(handled, 0);
  } finally {
    await store.close();
    await dropping.close();
  }
});

offline('kurrentdb:// connection strings are accepted', async () => {
  const dropping = await droppingServer();
  const store = EsdbEventStore.connect(`kurrentdb://127.0.0.1:${dropping.port}?tls=false`, { pingTimeoutMs: 3_000 });
  try {
    assert.is(await store.ping(), false);
    assert.ok(dropping.connections() > 0, 'the client went to the given host and port');
  } finally {
    await store.close();
    await dropping.close();
  }
});

offline.run();
