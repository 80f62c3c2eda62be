// The sqlite log: the shared contract, plus what only the embedded log has to get right by
// itself (group membership across processes, crash take-over by lease, hand-over timing).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { LogRecord } from '../infra/ports/log.ts';
import { SqliteLog } from '../infra/sqlite/log.ts';
import { keysByPartition } from './support/log-keys.ts';
import { logContract } from './contracts/log.contract.ts';
import { deferred, settle, waitUntil } from './support/eventually.ts';
import { startFixture } from './support/fixture-process.ts';
import type { FixtureProcess } from './support/fixture-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'relay-log-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

logContract('sqlite', async () => {
  // Reads of the records fail while `failing` (the file locked past the busy timeout, say).
  let failing = false;
  const log = new SqliteLog(join(dir, 'contract.db'), {
    readFault: (sql) => (failing && sql.includes('log_records') ? Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR', errcode: 10 }) : null),
  });
  return { log, close: () => log.close(), failReads: (on) => void (failing = on) };
});

const consumerFixture = new URL('./fixtures/log-consumer.ts', import.meta.url);
const LEASE_MS = 800;

interface Printed {
  event: string;
  partition?: number;
  offset?: string;
  value?: string;
  count?: number;
}

function printed(child: FixtureProcess): Printed[] {
  return child.lines.map((l) => JSON.parse(l) as Printed);
}


const test = suite('sqlite log');

test('a consumer SIGKILLed mid-handler loses its partition when its lease runs out; the record is redelivered', async () => {
  const file = join(dir, 'killed.db');
  const log = new SqliteLog(file, { sessionTimeoutMs: LEASE_MS });
  const topic = `killed-${randomUUID()}`;
  const group = `g-${randomUUID()}`;
  await log.ensureTopic(topic, 1);
  const child = startFixture(consumerFixture, ['sqlite', file, topic, group, String(LEASE_MS)]);
  try {
    await child.waitForLine((l) => l.includes('"ready"'), 'the child consumer joined');
    // Published after the child joined: it finds them by polling, not by an in-process wake-up.
    await log.publish(topic, [
      { key: 'k', value: 'first' },
      { key: 'k', value: 'hang-second' },
      { key: 'k', value: 'third' },
    ]);
    await child.waitForLine((l) => l.includes('"handling"') && l.includes('hang-second'), 'the child is inside the handler');
    // Offsets are written while a round runs (every 100 ms), not once per record.
    await waitUntil(async () => (await log.groupOffsets(topic, [group]))[0].committed === '1', 'the child committed the record it handled');
    child.child.kill('SIGKILL');
    assert.equal((await child.exited).signal, 'SIGKILL');
    assert.equal(printed(child).filter((p) => p.event === 'handled').map((p) => p.value), ['first']);

    const seen: LogRecord[] = [];
    const consumer = await log.consume({ group, topic, handle: async (r) => void seen.push(r) });
    await waitUntil(() => seen.length >= 2, 'the dead member’s partition is taken over after its lease');
    await consumer.stop();
    assert.equal(seen.map((r) => r.value), ['hang-second', 'third'], 'the uncommitted record comes again, the committed one does not');
  } finally {
    child.child.kill('SIGKILL');
    await child.exited;
    await log.close();
  }
});

test('a typed consumer SIGKILLed mid-round: the next owner passes over again only what was passed over since the last commit, and skips no wanted record', async () => {
  const file = join(dir, 'killed-typed.db');
  const log = new SqliteLog(file, { sessionTimeoutMs: LEASE_MS });
  const topic = `killed-typed-${randomUUID()}`;
  const group = `g-${randomUUID()}`;
  await log.ensureTopic(topic, 2);
  const [ka, kb] = keysByPartition(2); // partitions 0 (A) and 1 (B)
  const wanted = (key: string, value: string) => ({ key, value, headers: { 'event-type': 'Wanted' } });
  const other = (key: string, value: string) => ({ key, value, headers: { 'event-type': 'Other' } });
  const child = startFixture(consumerFixture, ['sqlite', file, topic, group, String(LEASE_MS), 'Wanted']);
  const committedA = async () => (await log.groupOffsets(topic, [group])).find((o) => o.partition === 0)!.committed;
  try {
    await child.waitForLine((l) => l.includes('"ready"'), 'the child consumer joined');
    await log.publish(topic, [wanted(ka, 'a-first')]);
    await waitUntil(async () => (await committedA()) === '1', 'the child committed the record it handled');
    // One round: partition A holds only records passed over, partition B a handler that never returns.
    await log.publish(topic, [...Array.from({ length: 30 }, (_, i) => other(ka, `a-other-${i}`)), wanted(kb, 'hang-b')]);
    await child.waitForLine((l) => l.includes('"handling"') && l.includes('hang-b'), 'the child is inside the handler');
    const passedInChild = () => printed(child).filter((p) => p.event === 'passed').reduce((n, p) => n + p.count!, 0);
    await waitUntil(() => passedInChild() === 30, 'the child passed over the records of the type it does not want');
    child.child.kill('SIGKILL');
    assert.equal((await child.exited).signal, 'SIGKILL');
    // Usually still 1 (passed-over records are committed lazily), or 31 had their bound passed first.
    const committedAtCrash = Number(await committedA());
    assert.ok(committedAtCrash === 1 || committedAtCrash === 31, `committed ${committedAtCrash}`);

    await log.publish(topic, [wanted(ka, 'a-after')]);
    const seen: LogRecord[] = [];
    let passed = 0;
    const consumer = await log.consume({
      group, topic, types: ['Wanted'], handle: async (r) => void seen.push(r), onPassedOver: (n) => void (passed += n),
    });
    await waitUntil(() => seen.length >= 2, 'the dead member’s partitions are taken over after its lease');
    await waitUntil(async () => (await committedA()) === '32', 'the new owner committed past everything on A');
    await consumer.stop();
    assert.equal(seen.map((r) => r.value).sort(), ['a-after', 'hang-b'], 'the record in the killed handler comes again, no wanted record is skipped or repeated');
    assert.is(passed, 31 - committedAtCrash, 'passed over again: exactly the records after the last commit');
  } finally {
    child.child.kill('SIGKILL');
    await child.exited;
    await log.close();
  }
});

test('a member whose lease ran out mid-round cannot commit over the member that took its partition', async () => {
  const file = join(dir, 'stalled.db');
  const stalled = new SqliteLog(file, { sessionTimeoutMs: 60_000 });
  const taker = new SqliteLog(file, { sessionTimeoutMs: 60_000 });
  const topic = `stalled-${randomUUID()}`;
  const group = `g-${randomUUID()}`;
  await stalled.ensureTopic(topic, 1);
  const committed = async () => (await taker.groupOffsets(topic, [group]))[0].committed;
  const release = deferred();
  const first: string[] = [];
  const assignments: number[][] = [];
  const one = await stalled.consume({
    group, topic,
    handle: async (r) => {
      first.push(r.value);
      if (r.value === 'x') await release.promise;
    },
    onMembership: (m) => void (m.change === 'assigned' && assignments.push(m.partitions)),
  });
  await stalled.publish(topic, [{ key: 'k', value: 'x' }, { key: 'k', value: 'y' }]);
  await waitUntil(() => first.includes('x'), 'the first member is inside its handler');
  // Its lease runs out while it waits (as if its process had been stopped for longer than the lease).
  const db = new DatabaseSync(file);
  db.prepare('UPDATE log_group_members SET expires_at = 0 WHERE group_id = ?').run(group);
  db.close();
  const second: string[] = [];
  const two = await taker.consume({ group, topic, handle: async (r) => void second.push(r.value) });
  await waitUntil(async () => second.includes('y') && (await committed()) === '2', 'the other member took the partition over and committed');
  await taker.publish(topic, [{ key: 'k', value: 'z' }]);
  await waitUntil(async () => (await committed()) === '3', 'the other member committed the next record');
  release.resolve();
  await waitUntil(() => assignments.some((partitions) => partitions.length === 0), 'the first member learned, at its commit, that the partition is no longer its');
  assert.is(await committed(), '3', 'its offset (after y) was not written over the other member\'s');
  await Promise.all([one.stop(), two.stop()]);
  assert.is(await committed(), '3');
  assert.not.ok(first.includes('z'), 'the first member handled nothing past the round whose commit was refused');
  await Promise.all([stalled.close(), taker.close()]);
});

test('members in two processes share a group: partitions split, records handled once', async () => {
  const file = join(dir, 'shared.db');
  const log = new SqliteLog(file, { sessionTimeoutMs: LEASE_MS });
  const topic = `shared-${randomUUID()}`;
  const group = `g-${randomUUID()}`;
  await log.ensureTopic(topic, 2);
  const child = startFixture(consumerFixture, ['sqlite', file, topic, group, String(LEASE_MS)]);
  try {
    await child.waitForLine((l) => l.includes('"ready"'), 'the child consumer joined');
    const here: LogRecord[] = [];
    let owned: number[] = [];
    const consumer = await log.consume({
      group, topic, handle: async (r) => void here.push(r),
      onMembership: (m) => void (m.change === 'assigned' && (owned = m.partitions)),
    });
    // Published only once the split is made: before it, the member that joined first owns both.
    await waitUntil(() => owned.length === 1, 'this process owns one of the two partitions');
    const [k0, k1] = keysByPartition(2);
    const values = Array.from({ length: 20 }, (_, i) => `v${i}`);
    await log.publish(topic, values.map((value, i) => ({ key: i % 2 ? k1 : k0, value })));
    const there = () => printed(child).filter((p) => p.event === 'handled').map((p) => p.value!);
    await waitUntil(() => here.length + there().length >= 20, 'every record is handled by one of the members');
    await settle(300);
    assert.equal([...here.map((r) => r.value), ...there()].sort(), [...values].sort(), 'each record once');
    assert.is(new Set(here.map((r) => r.partition)).size, 1, 'this process owns one partition');
    assert.is(here.length, 10);
    assert.is(there().length, 10);

    // A clean stop in the child hands its partition over at once, without waiting for the lease.
    child.child.kill('SIGTERM');
    await child.exited;
    await log.publish(topic, [{ key: k0, value: 'after-0' }, { key: k1, value: 'after-1' }]);
    await waitUntil(() => here.some((r) => r.value === 'after-0') && here.some((r) => r.value === 'after-1'), 'this process takes both partitions');
    await consumer.stop();
  } finally {
    child.child.kill('SIGKILL');
    await child.exited;
    await log.close();
  }
});

test('a partition is handed to a joining member only after the owner’s in-flight handler finished and committed', async () => {
  const log = new SqliteLog(join(dir, 'handover.db'));
  const topic = `handover-${randomUUID()}`;
  const group = `g-${randomUUID()}`;
  await log.ensureTopic(topic, 2);
  const [k0, k1] = keysByPartition(2);
  const journal: string[] = [];
  const release = deferred();
  const one = await log.consume({
    group,
    topic,
    handle: async (r) => {
      journal.push(`one:${r.value}`);
      if (r.value === 'block') await release.promise;
    },
  });
  await log.publish(topic, [{ key: k0, value: 'block' }]);
  await waitUntil(() => journal.includes('one:block'), 'the first member is inside its handler');
  const two = await log.consume({ group, topic, handle: async (r) => void journal.push(`two:${r.value}`) });
  await log.publish(topic, [
    { key: k0, value: 'a1' },
    { key: k1, value: 'b1' },
    { key: k0, value: 'a2' },
    { key: k1, value: 'b2' },
  ]);
  await settle(400);
  assert.equal(journal, ['one:block'], 'nothing moves while the owner is busy');
  journal.push('released');
  release.resolve();
  await waitUntil(() => journal.length >= 6, 'every record is handled');
  await settle(200);
  await Promise.all([one.stop(), two.stop()]);
  await log.close();

  const handled = journal.filter((j) => j !== 'released').map((j) => j.split(':')[1]);
  assert.equal(handled.sort(), ['a1', 'a2', 'b1', 'b2', 'block'], `each record once: ${journal.join(' ')}`);
  assert.ok(journal.some((j) => j.startsWith('two:')), 'the joining member got a partition');
  assert.ok(journal.findIndex((j) => j.startsWith('two:')) > journal.indexOf('released'));
  for (const [a, b] of [['a1', 'a2'], ['b1', 'b2']]) {
    assert.ok(journal.findIndex((j) => j.endsWith(`:${a}`)) < journal.findIndex((j) => j.endsWith(`:${b}`)), `${a} before ${b}`);
  }
});

test("fromBeginning: false starts a new group at the end, and keeps that start across a restart", async () => {
  const log = new SqliteLog(join(dir, 'latest.db'));
  const topic = `latest-${randomUUID()}`;
  const group = `g-${randomUUID()}`;
  await log.ensureTopic(topic, 1);
  await log.publish(topic, [{ key: 'k', value: 'old' }]);
  const idle = await log.consume({ group, topic, fromBeginning: false, handle: async () => {} });
  await settle(100);
  await idle.stop();
  await log.publish(topic, [{ key: 'k', value: 'new' }]);
  const seen: string[] = [];
  const consumer = await log.consume({ group, topic, fromBeginning: false, handle: async (r) => void seen.push(r.value) });
  await waitUntil(() => seen.length >= 1, 'the record published after the group started arrives');
  await settle(200);
  await consumer.stop();
  await log.close();
  assert.equal(seen, ['new']);
});

test('records and committed offsets survive reopening the file', async () => {
  const file = join(dir, 'reopen.db');
  const topic = `reopen-${randomUUID()}`;
  const group = `g-${randomUUID()}`;
  const first = new SqliteLog(file);
  await first.ensureTopic(topic, 1);
  await first.publish(topic, [{ key: 'k', value: 'a' }, { key: 'k', value: 'b' }]);
  const seen: LogRecord[] = [];
  const consumer = await first.consume({ group, topic, handle: async (r) => void seen.push(r) });
  await waitUntil(() => seen.length >= 2, 'both records are handled');
  await consumer.stop();
  await first.close();

  const second = new SqliteLog(file);
  await second.publish(topic, [{ key: 'k', value: 'c' }]);
  const again: LogRecord[] = [];
  const resumed = await second.consume({ group, topic, handle: async (r) => void again.push(r) });
  await waitUntil(() => again.length >= 1, 'the new record arrives');
  await settle(200);
  await resumed.stop();
  await second.close();
  assert.equal(seen.map((r) => [r.value, r.offset]), [['a', '0'], ['b', '1']]);
  assert.equal(again.map((r) => [r.value, r.offset]), [['c', '2']]);
});

test('retention prunes old records but keeps offsets going and committed positions valid', async () => {
  const log = new SqliteLog(join(dir, 'retention.db'));
  const topic = `retention-${randomUUID()}`;
  await log.ensureTopic(topic, 1);
  await log.publish(topic, ['a', 'b', 'c'].map((value) => ({ key: 'k', value })));
  const group = `g-${randomUUID()}`;
  const seen: LogRecord[] = [];
  const early = await log.consume({ group, topic, handle: async (r) => void seen.push(r) });
  await waitUntil(() => seen.length === 3, 'the group read a, b, c');
  await early.stop();

  assert.is(await log.pruneBefore(new Date(Date.now() - 60_000)), 0, 'nothing is old yet');
  assert.is(await log.pruneBefore(new Date(Date.now() + 60_000)), 2, 'all but the partition\'s last record go');
  await log.publish(topic, [{ key: 'k', value: 'd' }]);

  const resumed: LogRecord[] = [];
  const again = await log.consume({ group, topic, handle: async (r) => void resumed.push(r) });
  const fresh: LogRecord[] = [];
  const newcomer = await log.consume({ group: `g-${randomUUID()}`, topic, handle: async (r) => void fresh.push(r) });
  await waitUntil(() => resumed.length === 1 && fresh.length === 2, 'both groups caught up');
  await settle(200);
  await again.stop();
  await newcomer.stop();
  await log.close();
  assert.equal(resumed.map((r) => [r.value, r.offset]), [['d', '3']], 'offsets continue after pruning; the group resumes where it was');
  assert.equal(fresh.map((r) => [r.value, r.offset]), [['c', '2'], ['d', '3']], 'a new group starts at the oldest kept record');
});

test('unknown topics and bad records are refused; close() stops consumers and ping then fails', async () => {
  const log = new SqliteLog(join(dir, 'errors.db'));
  const missing = `missing-${randomUUID()}`;
  for (const attempt of [
    () => log.publish(missing, [{ key: 'k', value: 'v' }]),
    () => log.consume({ group: 'g', topic: missing, handle: async () => {} }),
    () => log.ensureTopic(`bad-${randomUUID()}`, 0),
  ]) {
    try {
      await attempt();
      assert.unreachable('must be refused');
    } catch (error) {
      assert.not.match(String(error), /must be refused/);
    }
  }
  const topic = `errors-${randomUUID()}`;
  await log.ensureTopic(topic, 1);
  try {
    await log.publish(topic, [{ key: 'k', value: 1 as unknown as string }]);
    assert.unreachable('a non-string value must be refused');
  } catch (error) {
    assert.instance(error, TypeError);
  }

  await log.publish(topic, [{ key: 'k', value: 'slow' }]);
  const release = deferred();
  const handled: string[] = [];
  await log.consume({
    group: `g-${randomUUID()}`,
    topic,
    handle: async (r) => {
      await release.promise;
      handled.push(r.value);
    },
  });
  await settle(100);
  let closed = false;
  const closing = log.close().then(() => {
    closed = true;
  });
  await settle(100);
  assert.is(closed, false, 'close() waits for the running handler');
  release.resolve();
  await closing;
  assert.equal(handled, ['slow']);
  assert.is(await log.ping(), false);
});

test.run();
