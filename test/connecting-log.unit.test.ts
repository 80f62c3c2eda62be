// The log a process that neither publishes nor consumes connects behind its start
// (infra/connecting-log.ts): until connected it cannot be read (groupOffsets rejects, ping says
// false), attempts are made again after a doubling wait, writes wait for the connection, and a
// close ends it all, closing a log an attempt still under way brings. With a real `relay api`
// and Kafka: test/api-start-kafka-down.int.test.ts.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ConnectingLog, LogNotConnectedError } from '../infra/connecting-log.ts';
import type { Log, OutgoingRecord } from '../infra/ports/log.ts';
import { deferred, waitUntil } from './support/eventually.ts';

const test = suite('a log connected in the background');

function fakeLog() {
  const published: OutgoingRecord[] = [];
  let closed = false;
  const log: Log = {
    ensureTopic: async () => {},
    publish: async (_topic, records) => void published.push(...records),
    consume: async () => ({ stop: async () => {} }),
    groupOffsets: async (_topic, groups) => groups.map((group) => ({ group, partition: 0, start: '0', end: '3', committed: '1' })),
    ping: async () => true,
    close: async () => void (closed = true),
  };
  return { log, published, closed: () => closed };
}

test('cannot be read until connected; attempts come again after a doubling wait; then it is the log', async () => {
  const attempts: number[] = [];
  const retries: Array<[number, number]> = [];
  const inner = fakeLog();
  const log = new ConnectingLog(async () => {
    attempts.push(performance.now());
    if (attempts.length < 3) throw new Error('no broker answers');
    return inner.log;
  }, { retryDelayMs: 30, onRetry: (_error, failures, delayMs) => retries.push([failures, delayMs]) });
  try {
    assert.is(await log.ping(), false);
    await log.groupOffsets('t', ['g']).then(() => assert.unreachable('read before connected'), (error: Error) => assert.instance(error, LogNotConnectedError));
    await waitUntil(() => log.connected, 'connected at the third attempt', 5_000);
    assert.equal(retries, [[1, 30], [2, 60]]);
    assert.ok(attempts[1] - attempts[0] >= 28 && attempts[2] - attempts[1] >= 58, `waits of ${attempts.slice(1).map((t, i) => Math.round(t - attempts[i]))} ms`);
    assert.is(await log.ping(), true);
    assert.is((await log.groupOffsets('t', ['g']))[0].end, '3');
  } finally {
    await log.close();
  }
  assert.ok(inner.closed());
});

test('a publish waits for the connection', async () => {
  const attempt = deferred<Log>();
  const inner = fakeLog();
  const log = new ConnectingLog(() => attempt.promise);
  try {
    let done = false;
    const publishing = log.publish('t', [{ key: 'k', value: 'v', headers: {} }]).then(() => (done = true));
    await new Promise((resolve) => setImmediate(resolve));
    assert.is(done, false);
    attempt.resolve(inner.log);
    await publishing;
    assert.is(inner.published.length, 1);
  } finally {
    await log.close();
  }
});

test('a close ends the waits, and closes the log an attempt under way brings afterwards', async () => {
  const attempt = deferred<Log>();
  const inner = fakeLog();
  const log = new ConnectingLog(() => attempt.promise);
  const publishing = log.publish('t', [{ key: 'k', value: 'v', headers: {} }]).then(() => 'published', (error: Error) => error.message);
  await log.close();
  assert.is(await publishing, 'the log is closed');
  attempt.resolve(inner.log);
  await waitUntil(() => inner.closed(), 'the late log to be closed', 2_000);
  assert.is(log.connected, false);
  assert.is(await log.ping(), false);
});

test.run();
