// The dispatcher of due work (apps/pipeline/dispatcher.ts) with an in-memory schedule: bounds
// overall and per key (a function read at every start), one run per item, looks again when
// kicked or when an item ends, sleeps until the next due time (not on one already past), tells
// the source which keys are full, runs an item whose run failed again only after a back-off,
// reports its states, holds back an item whose run ended well but left it due at the same time
// (and only such an item), and stops only once its items in flight have ended. The schedule answers
// without I/O, as node:sqlite does: a loop that never sleeps would starve every timer. "Nothing
// more started" is checked after the dispatcher has looked again (status().lastLookAt moved),
// never after a fixed wait alone.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startDispatcher, type Dispatcher, type DueSource } from '../apps/pipeline/dispatcher.ts';
import { deferred, waitUntil, type Deferred } from './support/eventually.ts';

interface Item {
  id: string;
  key: string;
  dueAt: number;
}

class Schedule implements DueSource<Item> {
  items = new Map<string, Item>();
  started: string[] = [];
  running = new Map<string, Deferred<void>>();
  maxRunning = 0;
  failDue: Error | null = null;
  withNextDue = false;
  /** Whether reads leave out the keys the dispatcher says are full (as the webhooks' do). */
  leavesOutFull = false;
  /** Calls of nextDueAt: one per look. */
  looks = 0;
  /** The keys the dispatcher said were full, at each read. */
  fullSeen: string[][] = [];

  add(id: string, key = 'k', dueAt = 0): void {
    this.items.set(id, { id, key, dueAt });
  }
  async due(now: Date, limit: number, full?: ReadonlySet<string>): Promise<Item[]> {
    this.fullSeen.push([...(full ?? [])]);
    if (this.failDue) throw this.failDue;
    return [...this.items.values()]
      .filter((i) => i.dueAt <= now.getTime() && !(this.leavesOutFull && full?.has(i.key)))
      .sort((a, b) => a.dueAt - b.dueAt)
      .slice(0, limit);
  }
  get nextDueAt(): DueSource<Item>['nextDueAt'] {
    if (!this.withNextDue) return undefined;
    // The earliest of all, even one already due: the dispatcher must not take that for news.
    return async () => {
      this.looks++;
      const next = Math.min(...[...this.items.values()].map((i) => i.dueAt));
      return Number.isFinite(next) ? new Date(next).toISOString() : null;
    };
  }
  id = (item: Item) => item.id;
  dueAt = (item: Item) => item.dueAt;
  key = (item: Item) => item.key;
  run = async (item: Item): Promise<void> => {
    this.started.push(item.id);
    const done = deferred();
    this.running.set(item.id, done);
    this.maxRunning = Math.max(this.maxRunning, this.running.size);
    try {
      await done.promise;
      this.items.delete(item.id);
    } finally {
      this.running.delete(item.id);
    }
  };
  finish(id: string): void {
    this.running.get(id)!.resolve();
  }
}

const test = suite('dispatcher');

function start(schedule: Schedule, options: Partial<Parameters<typeof startDispatcher>[1]> = {}): { dispatcher: Dispatcher; errors: Error[] } {
  const errors: Error[] = [];
  const dispatcher = startDispatcher(schedule, { concurrency: 3, perKey: () => 10, pollMs: 50, now: () => new Date(), onError: (e) => errors.push(e), ...options });
  return { dispatcher, errors };
}

/** Waits until the dispatcher has looked at the schedule again after now. */
async function lookedAgain(dispatcher: Dispatcher): Promise<void> {
  const before = Date.now();
  dispatcher.kick();
  await waitUntil(() => Date.parse(dispatcher.status().lastLookAt ?? '') >= before, 'the dispatcher looked again');
  // The look that started before the kick may have ended after it: one more makes sure.
  const second = dispatcher.status().lastLookAt;
  dispatcher.kick();
  await waitUntil(() => dispatcher.status().lastLookAt !== second, 'the dispatcher looked once more');
}

test('given more due items than its bound, then it runs at most `concurrency` at once and the rest as slots free', async () => {
  const schedule = new Schedule();
  for (let i = 0; i < 7; i++) schedule.add(`i${i}`, `k${i}`);
  const { dispatcher } = start(schedule);
  await waitUntil(() => schedule.started.length === 3, 'three started');
  await lookedAgain(dispatcher);
  assert.is(schedule.started.length, 3, 'no fourth while three run');
  schedule.finish('i0');
  await waitUntil(() => schedule.started.length === 4, 'a freed slot is taken at once');
  for (const id of ['i1', 'i2', 'i3']) schedule.finish(id);
  await waitUntil(() => schedule.started.length === 7, 'every item ran');
  for (const id of ['i4', 'i5', 'i6']) schedule.finish(id);
  await dispatcher.stop();
  assert.is(schedule.maxRunning, 3);
  assert.is(new Set(schedule.started).size, 7, 'each item once');
});

test('given items of one key, then the per-key bound holds while other keys go on; the bound is read at every start', async () => {
  const schedule = new Schedule();
  for (let i = 0; i < 4; i++) schedule.add(`a${i}`, 'a');
  schedule.add('b0', 'b');
  let bound = 1;
  const { dispatcher } = start(schedule, { concurrency: 10, perKey: (key) => (key === 'a' ? bound : 10) });
  await waitUntil(() => schedule.started.includes('b0') && schedule.started.includes('a0'), 'a0 and b0 started');
  await lookedAgain(dispatcher);
  assert.equal(schedule.started.filter((id) => id.startsWith('a')), ['a0'], 'one of key a at a time');
  bound = 3;
  await waitUntil(() => schedule.started.filter((id) => id.startsWith('a')).length === 3, 'the raised bound applies at the next look');
  await lookedAgain(dispatcher);
  assert.is(schedule.started.filter((id) => id.startsWith('a')).length, 3);
  for (const id of [...schedule.running.keys()]) schedule.finish(id);
  await waitUntil(() => schedule.started.length === 5, 'the last one starts');
  for (const id of [...schedule.running.keys()]) schedule.finish(id);
  await dispatcher.stop();
});

test('given an item running, when it is read as due again, then it is not started twice', async () => {
  const schedule = new Schedule();
  schedule.add('only');
  const { dispatcher } = start(schedule);
  await waitUntil(() => schedule.started.length === 1, 'started');
  await lookedAgain(dispatcher);
  await lookedAgain(dispatcher);
  assert.equal(schedule.started, ['only']);
  schedule.finish('only');
  await dispatcher.stop();
});

test('given nothing due, when an item is added and the dispatcher kicked, then it starts without waiting for the poll', async () => {
  const schedule = new Schedule();
  const { dispatcher } = start(schedule, { pollMs: 60_000 });
  await waitUntil(() => dispatcher.status().lastLookAt !== null, 'the first look');
  schedule.add('new');
  dispatcher.kick();
  await waitUntil(() => schedule.started.length === 1, 'started on the kick', 2_000);
  schedule.finish('new');
  await dispatcher.stop();
});

test('given a source that says when the next item is due, then the dispatcher wakes for it without a kick', async () => {
  const schedule = new Schedule();
  schedule.withNextDue = true;
  schedule.add('later', 'k', Date.now() + 300);
  const { dispatcher } = start(schedule, { pollMs: 60_000 });
  await waitUntil(() => schedule.started.length === 1, 'started at its due time', 5_000);
  schedule.finish('later');
  await dispatcher.stop();
});

test('states: running; recovering while looks fail (each reported); running again; stopping waits for the item in flight; stopped', async () => {
  const schedule = new Schedule();
  schedule.add('slow');
  const { dispatcher, errors } = start(schedule);
  assert.is(dispatcher.status().state, 'running');
  await waitUntil(() => schedule.started.length === 1, 'started');
  assert.is(dispatcher.status().inFlight, 1);
  schedule.failDue = new Error('store down');
  dispatcher.kick();
  await waitUntil(() => dispatcher.status().state === 'recovering', 'recovering');
  assert.is(dispatcher.status().lastError, 'store down');
  assert.ok(errors.some((e) => e.message === 'store down'));
  schedule.failDue = null;
  dispatcher.kick();
  await waitUntil(() => dispatcher.status().state === 'running', 'running again');
  assert.is(dispatcher.status().lastError, null);
  assert.is(dispatcher.status().lastProgressAt, null, 'nothing finished yet');
  let stopped = false;
  const stopping = dispatcher.stop().then(() => (stopped = true));
  assert.is(dispatcher.status().state, 'stopping');
  // The loop has ended once a kick no longer makes a look; the item is still in flight.
  const lastLook = dispatcher.status().lastLookAt;
  dispatcher.kick();
  await new Promise((resolve) => setImmediate(resolve));
  assert.is(dispatcher.status().lastLookAt, lastLook, 'no look after stop');
  assert.is(stopped, false, 'stop waits for the item in flight');
  schedule.finish('slow');
  await stopping;
  assert.is(dispatcher.status().state, 'stopped');
  assert.ok(dispatcher.status().lastProgressAt !== null, 'the item that ended is progress');
});

test('given a run that throws, then the error is reported and the dispatcher goes on with other items', async () => {
  const schedule = new Schedule();
  schedule.add('bad');
  schedule.add('good');
  const run = schedule.run;
  schedule.run = async (item) => {
    if (item.id === 'bad') {
      schedule.items.delete('bad');
      throw new Error('bad item');
    }
    return run(item);
  };
  const { dispatcher, errors } = start(schedule);
  await waitUntil(() => errors.some((e) => e.message === 'bad item') && schedule.started.includes('good'), 'the error reported, the other item started');
  assert.is(dispatcher.status().state, 'running', 'an item failing is not the loop failing');
  schedule.finish('good');
  await dispatcher.stop();
});

test('given a key whose backlog is larger than the window, then its items are left out once it is full and another key\'s item behind them starts', async () => {
  const schedule = new Schedule();
  schedule.leavesOutFull = true;
  // The window is 2 × concurrency = 8 items: the backlog alone would fill every read.
  for (let i = 0; i < 30; i++) schedule.add(`slow${i}`, 'slow', i);
  schedule.add('fast', 'fast', 100);
  const { dispatcher } = start(schedule, { concurrency: 4, perKey: () => 2, pollMs: 60_000 });
  await waitUntil(() => schedule.started.includes('fast'), 'the other key\'s item started', 3_000);
  assert.equal(schedule.started.filter((id) => id.startsWith('slow')), ['slow0', 'slow1'], 'the full key keeps to its bound');
  assert.ok(schedule.fullSeen.some((keys) => keys.includes('slow')), 'the source was told the key is full');
  for (const id of [...schedule.running.keys()]) schedule.finish(id);
  await dispatcher.stop();
});

test('given every due item held back (its key at its bound, or no slot free), then the dispatcher looks again only when a run ends or at the poll, not every few milliseconds', async () => {
  for (const [name, options] of [['key at its bound', { concurrency: 4, perKey: () => 1 }], ['no slot free', { concurrency: 1, perKey: () => 10 }]] as const) {
    const schedule = new Schedule();
    schedule.withNextDue = true;
    schedule.add('first', 'a', 0);
    schedule.add('second', 'a', 1);
    const { dispatcher } = start(schedule, { ...options, pollMs: 200 });
    await waitUntil(() => schedule.started.length === 1, `${name}: the first item started`);
    await lookedAgain(dispatcher);
    const before = schedule.looks;
    const since = Date.now();
    await waitUntil(() => Date.now() - since >= 600 && schedule.looks > before, `${name}: 600 ms passed and the dispatcher looked again`);
    // A look per poll (the loop is alive), where a loop that takes a due time already past for
    // news looks every 5 ms (over 100 in 600 ms).
    const elapsed = Date.now() - since;
    assert.ok(schedule.looks - before <= Math.ceil(elapsed / 200) + 2, `${name}: ${schedule.looks - before} looks in ${elapsed} ms`);
    assert.equal(schedule.started, ['first'], `${name}: the second is still held back`);
    schedule.finish('first');
    await waitUntil(() => schedule.started.length === 2, `${name}: the end of the first run starts the second`);
    schedule.finish('second');
    await dispatcher.stop();
  }
});

/** A run that fails `failures` times (then succeeds and ends the item), as a store that answers without I/O would. */
function failingRuns(schedule: Schedule, id: string, failures: number): number[] {
  const runs: number[] = [];
  const run = schedule.run;
  schedule.run = async (item) => {
    if (item.id !== id) return run(item);
    runs.push(Date.now());
    if (runs.length <= failures) throw new Error(`run ${runs.length} of ${id} failed`);
    schedule.items.delete(id);
  };
  return runs;
}

test('given a run that keeps failing, then the item runs again only after a back-off that doubles, each failure is reported once, and timers still fire', async () => {
  const schedule = new Schedule();
  schedule.add('bad');
  // Failures that end only so that, without a back-off, the test ends (after a frozen thread).
  const runs = failingRuns(schedule, 'bad', 5_000);
  let runsWhenTimerFired: number | null = null;
  setTimeout(() => (runsWhenTimerFired = runs.length), 10);
  const { dispatcher, errors } = start(schedule, { pollMs: 40 });
  await waitUntil(() => runs.length >= 4, 'the item ran four times');
  assert.ok(runsWhenTimerFired !== null && runsWhenTimerFired <= 1, `a 10 ms timer fired after ${runsWhenTimerFired} runs`);
  const gaps = runs.slice(1, 4).map((at, i) => at - runs[i]);
  // 40, 80, 160 ms (a timer may fire a millisecond early by the wall clock).
  gaps.forEach((gap, i) => assert.ok(gap >= 40 * 2 ** i - 2, `gap ${i + 1}: ${gap} ms, back-offs ${gaps.join(', ')} ms`));
  await dispatcher.stop();
  assert.is(errors.length, runs.length, 'one report per failed run');
  assert.ok(errors.every((e) => /^run \d+ of bad failed$/.test(e.message)));
});

test('given an item backing off after a failed run, then other items start at once and a kick does not run it again early', async () => {
  const schedule = new Schedule();
  schedule.add('bad', 'shared');
  const runs = failingRuns(schedule, 'bad', 1_000);
  const { dispatcher, errors } = start(schedule, { pollMs: 60_000 });
  await waitUntil(() => errors.length >= 1, 'the first run failed');
  schedule.add('good', 'shared');
  dispatcher.kick();
  await waitUntil(() => schedule.started.includes('good'), 'another item of the same key started at once', 2_000);
  await lookedAgain(dispatcher);
  assert.is(runs.length, 1, 'the failed item waits for its back-off, kicks or not');
  schedule.finish('good');
  await dispatcher.stop();
});

/**
 * A run of `id` that ends well and does `change` to the item (nothing, by default), for `runs`
 * runs at most (then it removes the item, so that without a guard the test ends, after a frozen
 * thread). Returns when each run began.
 */
function runsThatEndWell(schedule: Schedule, id: string, runs: number, change: (item: Item) => void = () => {}): number[] {
  const at: number[] = [];
  const run = schedule.run;
  schedule.run = async (item) => {
    if (item.id !== id) return run(item);
    at.push(Date.now());
    if (at.length >= runs) schedule.items.delete(id);
    else change(schedule.items.get(id)!);
  };
  return at;
}

test('given a run that ends well but leaves its item due at the same time, then the item is held back (a back-off that doubles), told as a stuck run, and timers and other items still run', async () => {
  const schedule = new Schedule();
  schedule.add('stuck', 'shared');
  const runs = runsThatEndWell(schedule, 'stuck', 5_000);
  const stuck: Error[] = [];
  // Positive marker: another item, added by a timer, runs; a spinning loop starves timers until its runs end.
  let runsWhenTimerFired: number | null = null;
  setTimeout(() => {
    runsWhenTimerFired = runs.length;
    schedule.add('other', 'shared');
  }, 10);
  const { dispatcher, errors } = start(schedule, { pollMs: 40, onStuckRun: (error) => stuck.push(error) });
  try {
    await waitUntil(() => schedule.started.includes('other'), 'the other item, added later, started');
    assert.ok(runsWhenTimerFired !== null && runsWhenTimerFired <= 2, `a 10 ms timer fired after ${runsWhenTimerFired} runs of the stuck item`);
    assert.ok(runs.length <= 3, `the stuck item ran ${runs.length} times by the time the other started`);
    schedule.finish('other');
    await waitUntil(() => runs.length >= 4, 'the stuck item ran four times');
    const gaps = runs.slice(1, 4).map((at, i) => at - runs[i]);
    // 40, 80, 160 ms (a timer may fire a millisecond early by the wall clock).
    gaps.forEach((gap, i) => assert.ok(gap >= 40 * 2 ** i - 2, `gap ${i + 1}: ${gap} ms, back-offs ${gaps.join(', ')} ms`));
  } finally {
    schedule.items.delete('stuck');
    schedule.running.get('other')?.resolve();
    await dispatcher.stop();
  }
  assert.ok(stuck.length >= 3 && stuck.every((error) => /the run of stuck ended without error but left it due at the same time/.test(error.message)), stuck.map((e) => e.message).join('\n'));
  assert.equal(errors, stuck, 'each stuck run reported once, and nothing else');
});

test('given an item held back after a run that left it due, when it is rescheduled (by another instance, say), then it runs at its new due time without waiting out the hold', async () => {
  const schedule = new Schedule();
  schedule.add('held', 'k', Date.now() - 1_000);
  const runs = runsThatEndWell(schedule, 'held', 2);
  const stuck: Error[] = [];
  // The hold would last 60 s.
  const { dispatcher } = start(schedule, { pollMs: 60_000, onStuckRun: (error) => stuck.push(error) });
  try {
    await waitUntil(() => stuck.length === 1, 'the item was held back');
    assert.is(runs.length, 1);
    schedule.items.get('held')!.dueAt += 1;
    dispatcher.kick();
    await waitUntil(() => runs.length === 2, 'the rescheduled item ran at once', 2_000);
  } finally {
    await dispatcher.stop();
  }
});

test('given a run that ends well and moves its item\'s due time, even by a millisecond or to a few milliseconds ahead, then the item runs at its new due time, not held back', async () => {
  for (const [name, move] of [
    // Still in the past: due again at once, at another time.
    ['one millisecond later, still past', (item: Item) => { item.dueAt += 1; }],
    // As the sender's site pacing does.
    ['a few milliseconds ahead', (item: Item) => { item.dueAt = Date.now() + 3; }],
  ] as const) {
    const schedule = new Schedule();
    schedule.withNextDue = true;
    schedule.add('paced', 'k', Date.now() - 1_000);
    const runs = runsThatEndWell(schedule, 'paced', 20, move);
    // Any back-off would be at least 2 s.
    const { dispatcher, errors } = start(schedule, { pollMs: 2_000 });
    try {
      await waitUntil(() => runs.length === 20, `${name}: the item ran at each new due time`, 1_500);
    } finally {
      await dispatcher.stop();
    }
    assert.equal(errors, [], `${name}: no stuck run`);
  }
});

test.run();
