// A store that two threads of one process write to on connections of their own
// (apps/liveness.ts withThreadWrites), as judgeStore and watchStoreWrites see it: not ready while
// either thread's writes fail, the other thread pinged only while it says they do, and one
// reason for a failure both threads see, that of the thread that saw it first.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { judgeStore, withThreadWrites, type JudgedStore } from '../apps/liveness.ts';

const test = suite('a store written by two threads');

function threads() {
  const state = { here: null as string | null, there: null as string | null, thereTakesWrites: false, otherPings: 0 };
  const local: JudgedStore = { ping: async () => state.here === null, writeFailure: () => state.here };
  const store = withThreadWrites(local, {
    thread: 'pipeline thread',
    failure: () => state.there,
    ping: async () => {
      state.otherPings++;
      if (state.thereTakesWrites) state.there = null;
      return state.there === null;
    },
  });
  return { state, store };
}

test('ready while neither thread\'s writes fail, without asking the other thread', async () => {
  const { state, store } = threads();
  assert.equal(await judgeStore(store), { ready: true, reason: null });
  assert.is(store.writeFailure!(), null);
  assert.is(state.otherPings, 0);
});

test('the other thread\'s failure alone makes it not ready, named; its own ping brings it back', async () => {
  const { state, store } = threads();
  state.there = 'writes to the database file fail (database or disk is full)';
  assert.equal(await judgeStore(store), { ready: false, reason: 'pipeline thread: writes to the database file fail (database or disk is full)' });
  assert.is(state.otherPings, 1);
  state.thereTakesWrites = true;
  assert.equal(await judgeStore(store), { ready: true, reason: null });
  assert.is(store.writeFailure!(), null);
});

test('while both threads\' writes fail the reason stays the first thread\'s, then goes to the one still failing', () => {
  const { state, store } = threads();
  state.there = 'lock held since 10:00';
  assert.is(store.writeFailure!(), 'pipeline thread: lock held since 10:00');
  state.here = 'lock held since 10:01';
  assert.is(store.writeFailure!(), 'pipeline thread: lock held since 10:00');
  state.there = null;
  assert.is(store.writeFailure!(), 'lock held since 10:01');
  state.there = 'lock held since 10:02';
  assert.is(store.writeFailure!(), 'lock held since 10:01');
  state.here = null;
  state.there = null;
  assert.is(store.writeFailure!(), null);
  state.here = 'disk full';
  assert.is(store.writeFailure!(), 'disk full');
});

test.run();
