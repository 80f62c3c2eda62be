// The flow-control rule (mayAdmit) and the gate's reads, given a backlog the test sets. The same
// gate against the real log and API: test/admission-flow.int.test.ts.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { AdmissionFlow, mayAdmit } from '../apps/services/admission-flow.ts';
import { deferred } from './support/eventually.ts';

const test = suite('admission flow control: the rule and the gate');
const policy = { maxBacklog: 100, maxWaitMs: 1000 };

test('given flow control off, when the backlog is any size, then the send goes ahead', () => {
  assert.ok(mayAdmit({ ...policy, maxBacklog: 0 }, 1_000_000, 0));
});

test('given a backlog at or under the bound, then the send goes ahead without waiting', () => {
  assert.ok(mayAdmit(policy, 0, 0));
  assert.ok(mayAdmit(policy, 100, 0));
});

test('given a backlog over the bound, then the send waits until the longest wait is over', () => {
  assert.not.ok(mayAdmit(policy, 101, 0));
  assert.not.ok(mayAdmit(policy, 101, 999));
  assert.ok(mayAdmit(policy, 101, 1000));
});

test('sends that arrive together share one backlog read', async () => {
  let reads = 0;
  const read = deferred<number>();
  const flow = new AdmissionFlow({ ...policy, backlog: () => (reads++, read.promise) });
  const passes = Promise.all([flow.pass(), flow.pass(), flow.pass()]);
  read.resolve(5);
  assert.equal(await passes, ['admitted', 'admitted', 'admitted']);
  assert.is(reads, 1);
});

test('a send held over the bound goes ahead once a later read is under it, and says it waited', async () => {
  let backlog = 500;
  const waited: Array<[string, number]> = [];
  const flow = new AdmissionFlow({ ...policy, maxWaitMs: 30_000, refreshMs: 5, backlog: async () => backlog, onWaited: (outcome, ms) => waited.push([outcome, ms]) });
  const held = flow.pass();
  await new Promise((resolve) => setImmediate(resolve));
  assert.is(flow.waiting, 1);
  backlog = 50;
  assert.is(await held, 'caught_up');
  assert.is(flow.waiting, 0);
  assert.is(waited.length, 1);
  assert.is(waited[0][0], 'caught_up');
});

test('a backlog that cannot be read lets sends through and is reported', async () => {
  const errors: unknown[] = [];
  const flow = new AdmissionFlow({ ...policy, backlog: async () => { throw new Error('database is locked'); }, onReadError: (error) => errors.push(error) });
  assert.is(await flow.pass(), 'admitted');
  assert.is(errors.length, 1);
});

test.run();
