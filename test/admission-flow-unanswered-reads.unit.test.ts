// Admission flow control when its backlog reads do not answer or fail (a broker that is down):
// a send never waits longer than maxWaitMs for a read, the sends after it do not wait for a
// read that is already late, and after a failed read the next one comes only after a wait that
// doubles, each send meanwhile going ahead at once. Against a real broker that is down:
// test/admission-flow-kafka-down.int.test.ts.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { AdmissionFlow } from '../apps/services/admission-flow.ts';
import { deferred } from './support/eventually.ts';

const test = suite('admission flow control: reads that do not answer or fail');

/** The pass's outcome and how long it took; a pass still pending after 5 s fails the test. */
const timed = async <T>(work: Promise<T>): Promise<[T, number]> => {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const value = await Promise.race([work, new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('the send is still waiting after 5 s')), 5_000);
  })]).finally(() => clearTimeout(timer));
  return [value, performance.now() - started];
};

test('a read that does not answer lets the send go ahead after maxWaitMs, and the next send at once without a second read', async () => {
  let reads = 0;
  const errors: string[] = [];
  const never = deferred<number>();
  const flow = new AdmissionFlow({ maxBacklog: 100, maxWaitMs: 300, backlog: () => (reads++, never.promise), onReadError: (error) => errors.push((error as Error).message) });
  const [first, firstMs] = await timed(flow.pass());
  assert.is(first, 'admitted');
  assert.ok(firstMs >= 290 && firstMs < 2_000, `the first send went ahead after ${Math.round(firstMs)} ms`);
  assert.is(errors.length, 1, 'the late read is reported once');
  assert.match(errors[0], /not answered/);
  const [second, secondMs] = await timed(flow.pass());
  assert.is(second, 'admitted');
  assert.ok(secondMs < 150, `the next send waited ${Math.round(secondMs)} ms for a read already late`);
  assert.is(reads, 1, 'one read at a time');
});

test('a held send whose next read does not answer goes ahead after maxWaitMs, as timed out', async () => {
  let reads = 0;
  const waited: string[] = [];
  const never = deferred<number>();
  const flow = new AdmissionFlow({
    maxBacklog: 100, maxWaitMs: 300, refreshMs: 5,
    backlog: async () => (reads++ === 0 ? 500 : never.promise),
    onWaited: (outcome) => waited.push(outcome),
  });
  const [outcome, ms] = await timed(flow.pass());
  assert.is(outcome, 'timed_out');
  assert.ok(ms < 2_000, `went ahead after ${Math.round(ms)} ms`);
  assert.equal(waited, ['timed_out']);
  assert.is(reads, 2);
});

test('after a failed read the next read waits retryAfterFailureMs, doubling, and sends go ahead at once meanwhile', async () => {
  const readAt: number[] = [];
  const flow = new AdmissionFlow({
    maxBacklog: 100, maxWaitMs: 1_000, retryAfterFailureMs: 200,
    backlog: async () => {
      readAt.push(performance.now());
      throw new Error('broker down');
    },
  });
  const started = performance.now();
  let slowest = 0;
  while (readAt.length < 3 && performance.now() - started < 5_000) {
    const [outcome, ms] = await timed(flow.pass());
    assert.is(outcome, 'admitted');
    slowest = Math.max(slowest, ms);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.is(readAt.length, 3, 'three reads within 5 s');
  assert.ok(readAt[1] - readAt[0] >= 195, `the second read came ${Math.round(readAt[1] - readAt[0])} ms after the first failed`);
  assert.ok(readAt[2] - readAt[1] >= 395, `the third read came ${Math.round(readAt[2] - readAt[1])} ms after the second failed (the wait doubles)`);
  assert.ok(slowest < 150, `a send waited ${Math.round(slowest)} ms while reads failed`);
});

test('once a read answers again its backlog holds sends again (the send that started it does not wait for it)', async () => {
  let fail = true;
  let reads = 0;
  const flow = new AdmissionFlow({
    maxBacklog: 100, maxWaitMs: 200, refreshMs: 5, retryAfterFailureMs: 20,
    backlog: async () => {
      reads++;
      if (fail) throw new Error('broker down');
      return 500;
    },
  });
  assert.is((await timed(flow.pass()))[0], 'admitted');
  fail = false;
  await new Promise((resolve) => setTimeout(resolve, 40));
  assert.is((await timed(flow.pass()))[0], 'admitted');
  assert.is(reads, 2);
  await new Promise((resolve) => setImmediate(resolve));
  assert.is((await timed(flow.pass()))[0], 'timed_out');
});

test.run();
