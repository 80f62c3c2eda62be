// The MongoDB-wire document store bounds how long an operation waits for the server's answer
// (infra/mongodb/document-store.ts, SOCKET_TIMEOUT_MS, or the URL's socketTimeoutMS). Without a
// bound, a connection that stops answering mid-operation (a stalled server, a half-open
// connection after a failover or a NAT dropping its state) left the operation pending for good,
// even once the server answered new connections again: /readyz said the store answered while a
// processor's handler, a compare-and-set lock of the adapter (every later CAS on the document
// queues behind it) or an admission waited forever. Now such an operation fails after the
// timeout (a read is retried once by the driver, on another connection), and the processors and
// the forwarder retry what failed. ping() is bounded on its own (2 s). Here a TCP proxy in
// front of FerretDB (or MongoDB) freezes the connections it has.
import net from 'node:net';
import { randomUUID } from 'node:crypto';
import * as assert from 'uvu/assert';
import { MongoDocumentStore, type MongoDocumentStoreOptions } from '../infra/mongodb/document-store.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const mongoUrl = process.env.RELAY_MONGODB_URL;
const test = skippableSuite('document store operations on a connection that stopped answering', mongoUrl ? undefined : 'RELAY_MONGODB_URL not set');

/** A TCP proxy to `target`; freeze() stops moving bytes on the connections it has (they stay open). */
async function freezingProxy(target: { host: string; port: number }) {
  const pairs: Array<[net.Socket, net.Socket]> = [];
  const frozen: Array<[net.Socket, net.Socket]> = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    pairs.push([client, upstream]);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    freeze() {
      for (const [client, upstream] of pairs.splice(0)) {
        frozen.push([client, upstream]);
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    close() {
      for (const [client, upstream] of [...pairs, ...frozen]) {
        client.destroy();
        upstream.destroy();
      }
      server.close();
    },
  };
}

/** A store through a fresh proxy, with one document `a` in `things`. */
async function storeBehindProxy(query: string, options: MongoDocumentStoreOptions) {
  const target = new URL(mongoUrl!.replace(/^mongodb:/, 'http:'));
  const proxy = await freezingProxy({ host: target.hostname, port: Number(target.port) });
  const store = await MongoDocumentStore.connect(`mongodb://127.0.0.1:${proxy.port}/optimeout_${randomUUID().slice(0, 8)}${query}`, options);
  const things = store.collection<{ _id: string; n: number }>('things');
  await things.insert({ _id: 'a', n: 1 });
  return {
    proxy, store, things,
    async close() {
      proxy.close();
      await store.close().catch(() => {});
    },
  };
}

/** How `work` settled and after how long, or 'pending' after `ms`. */
async function settlesWithin(work: Promise<unknown>, ms: number): Promise<{ outcome: string; ms: number }> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    work.then(() => 'resolved', (e: Error) => `rejected: ${e.name}: ${e.message}`),
    new Promise<string>((resolve) => (timer = setTimeout(() => resolve('pending'), ms))),
  ]).finally(() => clearTimeout(timer));
  return { outcome, ms: performance.now() - started };
}

test('a read on a connection that stopped answering settles after the timeout, while new connections work', async () => {
  const setup = await storeBehindProxy('', { socketTimeoutMs: 2_000 });
  try {
    setup.proxy.freeze();
    const read = settlesWithin(setup.things.get('a'), 8_000);
    // The server answers on new connections meanwhile: ping and a new read say so.
    let answering = false;
    for (let i = 0; i < 20 && !answering; i++) answering = await setup.store.ping();
    const fresh = await setup.things.get('a').then((d) => d?.n ?? null, () => null);
    const { outcome, ms } = await read;
    assert.ok(answering, 'the store answers pings again');
    assert.is(fresh, 1, 'a new read works');
    // Settled: the driver retries a read once, on another connection, after the timeout.
    assert.is.not(outcome, 'pending', `the read on the frozen connection is still pending after ${Math.round(ms)} ms, while the store answers`);
    assert.ok(ms >= 1_500, `${outcome} after ${Math.round(ms)} ms, before the timeout`);
  } finally {
    await setup.close();
  }
});

test('the URL\'s socketTimeoutMS is the timeout when given', async () => {
  const setup = await storeBehindProxy('?socketTimeoutMS=1000', {});
  try {
    setup.proxy.freeze();
    const { outcome, ms } = await settlesWithin(setup.things.get('a'), 8_000);
    assert.is.not(outcome, 'pending', `the read on the frozen connection is still pending after ${Math.round(ms)} ms`);
    assert.ok(ms >= 750 && ms < 1_900, `${outcome} after ${Math.round(ms)} ms`);
  } finally {
    await setup.close();
  }
});

test('ping on a connection that stopped answering says false within its own 2 s', async () => {
  // One connection, frozen: ping can only use it. The operation timeout is far off.
  const setup = await storeBehindProxy('', { maxPoolSize: 1, socketTimeoutMs: 60_000 });
  try {
    setup.proxy.freeze();
    const started = performance.now();
    const { outcome, ms } = await settlesWithin(setup.store.ping().then((ok) => assert.is(ok, false)), 8_000);
    assert.is(outcome, 'resolved', `ping on the frozen connection: ${outcome} after ${Math.round(performance.now() - started)} ms`);
    assert.ok(ms < 5_000);
  } finally {
    await setup.close();
  }
});

test.run();
