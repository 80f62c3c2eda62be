// The deferred-durability scope with a barrier the test controls: who waits for what.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { afterDurable, currentDurabilityScope, deferDurability, DurabilityScope, writeOnBehalfOf, type DurabilityBarrier } from '../infra/ports/durability.ts';

const test = suite('durability scope');

/** A store whose writes become durable when the test says so. */
function heldStore(): DurabilityBarrier & { write(): Promise<void>; release(): void } {
  let release!: () => void;
  const durable = new Promise<void>((resolve) => (release = resolve));
  const store = {
    barrier: () => durable,
    release: () => release(),
    // As an adapter does: a write inside a scope takes effect now and is recorded there.
    write: async () => currentDurabilityScope()?.wrote(store),
  };
  return store;
}

const flags = (promise: Promise<unknown>) => {
  const state = { done: false };
  void promise.finally(() => (state.done = true));
  return state;
};
/** One turn of the event loop: every promise that can settle without the store has settled. */
const turn = () => new Promise((resolve) => setImmediate(resolve));

test('a write made for two scopes holds both of them, and neither before it is durable', async () => {
  const store = heldStore();
  const a = new DurabilityScope();
  const b = new DurabilityScope();
  await writeOnBehalfOf([a, b], () => store.write());
  const settledA = flags(a.settle());
  const settledB = flags(b.settle());
  await turn();
  assert.not.ok(settledA.done || settledB.done);
  store.release();
  await turn();
  assert.ok(settledA.done && settledB.done);
});

test('with a caller outside any scope, the write itself waits until durable', async () => {
  const store = heldStore();
  const scoped = new DurabilityScope();
  const written = flags(writeOnBehalfOf([scoped, undefined], () => store.write()));
  await turn();
  assert.not.ok(written.done);
  store.release();
  await turn();
  assert.ok(written.done);
});

test('the write is not charged to the scope whose context started it', async () => {
  const store = heldStore();
  const caller = new DurabilityScope();
  // The outer command plays the admission whose context happened to start the ledger's drain.
  const outer = flags(deferDurability(() => writeOnBehalfOf([caller], () => store.write())));
  await turn();
  assert.ok(outer.done, 'the starting context does not wait for a write it made for others');
  const callerSettled = flags(caller.settle());
  await turn();
  assert.not.ok(callerSettled.done, 'the caller waits for it');
  store.release();
  await turn();
  assert.ok(callerSettled.done);
});

test('a settle that starts while another waits for the same writes waits for them too', async () => {
  const store = heldStore();
  const scope = new DurabilityScope();
  scope.wrote(store);
  const first = flags(scope.settle());
  // Nothing is left to ask a barrier for: the first settle took it.
  const second = flags(scope.settle());
  await turn();
  assert.not.ok(first.done || second.done, 'the second settle does not answer before the writes are durable');
  store.release();
  await turn();
  assert.ok(first.done && second.done);
});

test('once a barrier failed, every later settle of the scope fails', async () => {
  const scope = new DurabilityScope();
  const failing: DurabilityBarrier = { barrier: () => Promise.reject(new Error('sync failed')) };
  scope.wrote(failing);
  const first = await scope.settle().then(() => 'ok', (error: Error) => error.message);
  const later = await scope.settle().then(() => 'ok', (error: Error) => error.message);
  assert.is(first, 'sync failed');
  assert.is(later, 'sync failed', 'writes lost to the first settle stay lost');
});

test('a timer started inside a command writes outside its scope once the command has answered', async () => {
  const seen: Array<DurabilityScope | undefined> = [];
  let fire!: () => void;
  const fired = new Promise<void>((resolve) => (fire = resolve));
  await deferDurability(async (scope) => {
    seen.push(currentDurabilityScope());
    assert.is(seen[0], scope);
    setTimeout(() => {
      seen.push(currentDurabilityScope());
      fire();
    }, 1);
  });
  await fired;
  assert.is(seen[1], undefined, 'a write then waits for its own durability');
});

test('afterDurable wakes a reader once the scope\'s writes so far are durable, without holding the writer', async () => {
  const store = heldStore();
  let woken = false;
  let wrote = false;
  const command = flags(deferDurability(async () => {
    await store.write();
    afterDurable(() => (woken = true));
    wrote = true;
  }));
  await turn();
  assert.ok(wrote, 'the command went on at once');
  assert.not.ok(woken || command.done, 'neither the wake-up nor the answer before the write is durable');
  store.release();
  await turn();
  assert.ok(woken && command.done);
  let outside = false;
  afterDurable(() => (outside = true));
  assert.ok(outside, 'outside a scope, at once');
});

test.run();
