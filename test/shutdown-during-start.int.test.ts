// A SIGTERM that comes while a process is still starting is bound by RELAY_SHUTDOWN_TIMEOUT_MS
// as a stop after the start is (apps/relay.ts, stopOnSignals), counted from the signal. Real
// `relay` processes whose start waits on a peer that accepts connections and never answers:
// - waiting for the stores to open (a Kafka broker), the start is given up at once: exit 0,
//   well within a long deadline, in `relay forwarder` and in `relay start`, whose pipeline
//   thread is the one waiting (it gives its own start up, the main thread's API and feedback
//   SMTP server stop);
// - a part's start is let finish (it is stopped as a part is, so a delivery is never cut):
//   `relay retention`'s first pass, held by an EventStoreDB read that never answers, makes the
//   process exit 1 at the deadline, naming `retention`;
// - filling the field columns of a large table (the first start after an upgrade), the fill
//   stops between batches: exit 0, and the next start goes on from there. As one statement it
//   held the event loop, so the deadline's timer could not fire (33-46 s past a 25 s deadline).
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { workItems } from '../apps/services/delivery/work-items.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { FILL_BATCH_ROWS } from '../infra/sqlite/field-fills.ts';
import { waitUntil } from './support/eventually.ts';
import { exitWithin, spawnRelay, type RelayProcess } from './support/relay-process.ts';

interface Silent {
  server: Server;
  port: number;
  /** Connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

/** A TCP server that accepts every connection and never answers. */
async function silentPeer(): Promise<Silent> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    socket.on('error', () => {});
    sockets.push(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    port: (server.address() as { port: number }).port,
    connections: () => sockets.length,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

interface Context {
  dataDir: string;
  peer: Silent;
  relay: RelayProcess | null;
}

const test = suite<Context>('a stop while the start runs');

test.before.each(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-stop-starting-'));
  ctx.peer = await silentPeer();
  ctx.relay = null;
});

test.after.each(async (ctx) => {
  await ctx.relay?.kill();
  await ctx.peer.close();
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

const logLines = (relay: RelayProcess) => relay.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, any>);
const logged = (relay: RelayProcess, message: string) => logLines(relay).filter((line) => line.msg === message);

const start = (ctx: Context, args: string[], env: Record<string, string>) =>
  (ctx.relay = spawnRelay(args, { RELAY_DATA_DIR: ctx.dataDir, PORT: '0', RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json', ...env }));

/** Sends SIGTERM; the exit code within `ms` ('running' past it) and how long it took. */
async function terminate(relay: RelayProcess, ms: number): Promise<{ code: number | null | 'running'; tookMs: number }> {
  const sent = Date.now();
  relay.child.kill('SIGTERM');
  const code = await exitWithin(relay, ms);
  return { code, tookMs: Date.now() - sent };
}

/** Exit 0 with "stopped before the start finished", naming the step given up; no deadline line. */
function assertGivenUp(relay: RelayProcess, step: string): void {
  const [shutting] = logged(relay, 'shutting down');
  assert.ok(shutting, relay.output());
  assert.is(shutting.starting, step);
  const [stopped] = logged(relay, 'stopped before the start finished');
  assert.ok(stopped, relay.output());
  assert.is(stopped.abandoned, step);
  assert.is(logged(relay, 'shutdown did not finish in time; exiting').length, 0, relay.output());
}

test('relay forwarder waiting for a Kafka broker that never answers: given up at once, exit 0', async (ctx) => {
  const relay = start(ctx, ['forwarder'], { RELAY_KAFKA_BROKERS: `127.0.0.1:${ctx.peer.port}`, RELAY_SHUTDOWN_TIMEOUT_MS: '20000' });
  await waitUntil(() => ctx.peer.connections() > 0 || relay.child.exitCode !== null, 'the forwarder connects to the broker');
  const { code, tookMs } = await terminate(relay, 20_000 + 10_000);
  assert.is(code, 0, relay.output());
  assert.ok(tookMs < 5_000, `exited after ${tookMs} ms: the start was waited for`);
  assertGivenUp(relay, 'stores');
});

test('relay start whose pipeline thread waits for a Kafka broker that never answers: the thread gives its start up, exit 0', async (ctx) => {
  const relay = start(ctx, ['start'], { RELAY_KAFKA_BROKERS: `127.0.0.1:${ctx.peer.port}`, RELAY_SHUTDOWN_TIMEOUT_MS: '20000', RELAY_PIPELINE_THREAD: 'on' });
  // The main thread connects in the background (its API runs without the log) before it
  // listens; the pipeline thread, started after, waits for its own connection.
  await waitUntil(() => logged(relay, 'listening').length > 0 && ctx.peer.connections() >= 2, 'the pipeline thread connects to the broker', 60_000);
  const { code, tookMs } = await terminate(relay, 20_000 + 10_000);
  assert.is(code, 0, relay.output());
  assert.ok(tookMs < 5_000, `exited after ${tookMs} ms: the start was waited for`);
  assertGivenUp(relay, 'pipeline thread');
});

test('relay retention whose first pass waits for an EventStoreDB that never answers: exit 1 at the deadline, naming retention', async (ctx) => {
  // A delivery work item left overdue: the pass settles it from its email's stream, which it
  // reads from the event store.
  const documents = new SqliteDocumentStore(join(ctx.dataDir, 'relay.db'));
  await workItems(documents).insert({
    _id: 'em_0000000000000000000000000', step: 'attempt', attempt: 1, dueAt: new Date(Date.now() - 3 * 86_400_000).toISOString(), streamRevision: 0,
    origin: { correlationId: 'test', causationId: 'test' }, domain: 'example.org',
  });
  await documents.close();
  const relay = start(ctx, ['retention'], { RELAY_EVENTSTORE_URL: `esdb://127.0.0.1:${ctx.peer.port}?tls=false`, RELAY_SHUTDOWN_TIMEOUT_MS: '1500' });
  // Listening comes last before the retention part starts; the read is what holds it.
  await waitUntil(() => (logged(relay, 'listening').length > 0 && ctx.peer.connections() > 0) || relay.child.exitCode !== null, 'the first pass reads from the event store', 60_000);
  const { code, tookMs } = await terminate(relay, 1_500 + 10_000);
  assert.is(code, 1, relay.output());
  assert.ok(tookMs >= 1_500, `exited after ${tookMs} ms, before the deadline`);
  const [shutting] = logged(relay, 'shutting down');
  assert.is(shutting?.starting, 'retention', relay.output());
  const [line] = logged(relay, 'shutdown did not finish in time; exiting');
  assert.ok(line, relay.output());
  assert.is(line.level, 50); // error
  assert.is(line.waitingFor, 'retention');
  assert.is(line.duringStart, true);
  assert.is(line.timeoutMs, 1500);
});

test('relay api filling the field columns of a large table: the fill stops between batches, exit 0; the next start goes on from there', async (ctx) => {
  // Webhook deliveries written before their collection was indexed, as a directory from before
  // the field columns has them: the start adds the columns and fills them.
  const rows = FILL_BATCH_ROWS * 50;
  const documents = new SqliteDocumentStore(join(ctx.dataDir, 'relay.db'));
  await documents.collection(COLLECTIONS.webhookDeliveries).insertMany!(Array.from({ length: rows }, (_, i) => ({
    _id: `whd_${String(i).padStart(8, '0')}`, status: 'pending', endpointId: 'ep_1', emailId: `em_${i}`, nextAttemptAt: '2026-01-01T00:00:00.000Z', createdAt: '2026-01-01T00:00:00.000Z',
  })));
  await documents.close();
  const env = { RELAY_SHUTDOWN_TIMEOUT_MS: '20000', RELAY_LOG_LEVEL: 'debug' };
  const first = start(ctx, ['api'], env);
  const filling = (relay: RelayProcess) => logLines(relay).filter((line) => line.table === 'doc_webhook_deliveries');
  await waitUntil(() => filling(first).some((line) => line.batch === 1) || first.child.exitCode !== null, 'the first batch is filled', 30_000);
  const { code } = await terminate(first, 20_000 + 10_000);
  assert.is(code, 0, first.output());
  assertGivenUp(first, 'stores');
  const [started] = logged(first, `filling field columns of doc_webhook_deliveries from its documents (${rows} rows)`);
  assert.ok(started, first.output());
  assert.is(started.rows, rows);
  const [stopped] = filling(first).filter((line) => line.msg.startsWith('stopped filling'));
  assert.ok(stopped, first.output());
  assert.ok(stopped.scanned < rows, JSON.stringify(stopped));

  // The next start fills what is left, then listens.
  const next = start(ctx, ['api'], env);
  await waitUntil(() => logged(next, 'listening').length > 0 || next.child.exitCode !== null, 'the next start listens', 60_000);
  const [done] = filling(next).filter((line) => line.msg === 'filled field columns of doc_webhook_deliveries');
  assert.ok(done, next.output());
  assert.is(done.scanned, rows);
  assert.is(done.updated, rows - stopped.scanned);
});

test.run();
