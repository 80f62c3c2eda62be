// The retention part after a failed pass (apps/pipeline/retention.ts): it retries with a capped,
// doubling back-off (reset by a pass that succeeds, after which the 10-minute interval resumes),
// one pass at a time, so a transient store failure leaves `retention` `recovering` for seconds,
// not until the next regular pass; and /readyz, which answers 503 for the whole process once a
// part has been recovering past the stuck threshold, answers 200 again once the store does.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startRetention } from '../apps/pipeline/retention.ts';
import { ALL_PARTS, startRelay, type RunningRelay } from '../apps/relay.ts';
import { openStores, type Stores } from '../apps/runtime.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import { DELIVERY_POLICY } from '../domain/email/delivery.ts';
import { loadConfig } from '../infra/config.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import { deferred, waitUntil } from './support/eventually.ts';

const test = suite('retention: recovery after a failed pass');
const STUCK_AFTER_MS = 500;

interface Readyz { checks: Record<string, boolean>; parts: Record<string, { state: string; reason: string | null }> }

test('a retention pass that fails while the store does is retried: /readyz answers 200 again within seconds of the store answering', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-retention-recovery-'));
  let failing = true;
  let relay: RunningRelay | null = null;
  try {
    relay = await startRelay(loadConfig({ RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', RELAY_LOG_LEVEL: 'silent' }), ALL_PARTS, {
      processorPolicy: { stuckAfterMs: STUCK_AFTER_MS },
      // The retention pass's first read (expired content keys) fails as sqlite does on an I/O error.
      readFault: (sql) => (failing && sql.includes('content_keys') ? Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR', errcode: 10 }) : null),
    });
    const url = relay.url!;
    const readyz = async () => {
      const response = await fetch(`${url}/readyz`);
      return { code: response.status, body: await response.json() as Readyz };
    };
    // The start's pass has failed (startRelay waits for it); its retries fail as long as the read does.
    assert.is((await readyz()).body.parts.retention.state, 'recovering', 'the first pass failed');
    // Past the stuck threshold: the whole process is out of rotation for retention's sake.
    let during: Readyz | null = null;
    await waitUntil(async () => {
      const answer = await readyz();
      if (answer.code === 503) during = answer.body;
      return during !== null;
    }, '/readyz to answer 503 for retention', 5_000);
    assert.is(during!.checks.retention, false);
    assert.is(during!.parts.retention.state, 'recovering');

    // The read works again: a retry (1 s, doubling) succeeds without waiting for the next regular pass in 10 minutes.
    failing = false;
    await waitUntil(async () => {
      const answer = await readyz();
      return answer.code === 200 && answer.body.parts.retention.state === 'running';
    }, '/readyz to answer 200 again once the store answers (retention retried)', 8_000);
  } finally {
    await relay?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

// startRetention itself, with its content-keys read made to fail, be slow, or wait on demand.

interface Scripted {
  documents: DocumentStore;
  /** When each pass started (its `now()`), in ms. */
  starts: number[];
  /** Passes ended (swept or failed). */
  ended: number;
  inFlight: number;
  maxInFlight: number;
  now: () => Date;
  onSwept: () => void;
  onError: () => void;
}

/** The stores' documents, with pass `i`'s read of content keys going through `read(i)` first (it may throw or wait). */
function scripted(documents: DocumentStore, read: (pass: number) => Promise<void>): Scripted {
  const bind = <T extends object>(target: T, prop: string | symbol) => {
    const value = Reflect.get(target, prop) as unknown;
    return typeof value === 'function' ? value.bind(target) : value;
  };
  const s: Scripted = {
    documents: new Proxy(documents, {
      get(target, prop) {
        if (prop !== 'collection') return bind(target, prop);
        return (name: string) => {
          const collection = target.collection(name);
          if (name !== COLLECTIONS.contentKeys) return collection;
          return new Proxy(collection, {
            get(c, p) {
              if (p !== 'find') return bind(c, p);
              const pass = s.starts.length - 1;
              return async (...args: unknown[]) => {
                await read(pass);
                return (c.find as (...a: unknown[]) => unknown)(...args);
              };
            },
          });
        };
      },
    }),
    starts: [], ended: 0, inFlight: 0, maxInFlight: 0,
    now: () => {
      s.starts.push(performance.now());
      s.inFlight++;
      s.maxInFlight = Math.max(s.maxInFlight, s.inFlight);
      return new Date();
    },
    onSwept: () => { s.inFlight--; s.ended++; },
    onError: () => { s.inFlight--; s.ended++; },
  };
  return s;
}

const storesTest = suite<{ dir: string; stores: Stores }>('retention: its schedule');

storesTest.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-retention-schedule-'));
  ctx.stores = await openStores(loadConfig({ RELAY_DATA_DIR: ctx.dir, RELAY_LOG_LEVEL: 'silent' }));
  await prepareStores(ctx.stores.documents);
});

storesTest.after(async (ctx) => {
  await ctx.stores.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

const diskError = () => Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR', errcode: 10 });

storesTest('a failed pass is retried after a back-off doubling up to its cap; a pass that succeeds resets it and the interval resumes', async (ctx) => {
  // Passes 0-5 fail, 6 succeeds, 7 fails, the rest succeed.
  const fails = new Set([0, 1, 2, 3, 4, 5, 7]);
  const s = scripted(ctx.stores.documents, async (pass) => {
    if (fails.has(pass)) throw diskError();
  });
  const everyMs = 1_000;
  const retention = await startRetention({
    documents: s.documents, events: ctx.stores.events, deliveryPolicy: DELIVERY_POLICY, now: s.now, everyMs,
    retry: { initialDelayMs: 20, maxDelayMs: 320 }, onSwept: s.onSwept, onError: s.onError,
  });
  try {
    await waitUntil(() => s.starts.length >= 9, 'nine passes started', 10_000);
  } finally {
    await retention.stop();
  }
  const gaps = s.starts.slice(1).map((at, i) => at - s.starts[i]!);
  const atLeast = (gap: number, ms: number, what: string) => assert.ok(gap >= ms - 2, `${what}: ${Math.round(gap)} ms, expected at least ${ms}`);
  // After the failures of passes 0-5: 20, 40, 80, 160, 320 ms, and 320 again (the cap).
  [20, 40, 80, 160, 320, 320].forEach((ms, i) => atLeast(gaps[i]!, ms, `the retry after failure ${i + 1}`));
  assert.ok(gaps[5]! < 640, `the back-off is capped: ${Math.round(gaps[5]!)} ms`);
  // Pass 6 succeeded: the next comes after the interval, not after a back-off.
  atLeast(gaps[6]!, everyMs, 'the pass after one that succeeded');
  // Pass 7 failed: its retry starts again from the first delay (reset by pass 6), not from the cap.
  atLeast(gaps[7]!, 20, 'the retry after a failure that follows a success');
  assert.ok(gaps[7]! < 320, `the back-off was reset by the pass that succeeded: ${Math.round(gaps[7]!)} ms`);
});

storesTest('passes never overlap, however short the interval and the back-off and however long a pass takes', async (ctx) => {
  const s = scripted(ctx.stores.documents, async (pass) => {
    await new Promise((resolve) => setTimeout(resolve, 30));
    if (pass % 2 === 1) throw diskError();
  });
  const retention = await startRetention({
    documents: s.documents, events: ctx.stores.events, deliveryPolicy: DELIVERY_POLICY, now: s.now, everyMs: 1,
    retry: { initialDelayMs: 1, maxDelayMs: 1 }, onSwept: s.onSwept, onError: s.onError,
  });
  try {
    await waitUntil(() => s.ended >= 8, 'eight passes ended, failed and succeeded alike', 10_000);
  } finally {
    await retention.stop();
  }
  assert.is(s.maxInFlight, 1, 'one pass at a time');
});

storesTest('stop() waits for the pass under way and does not wait out a back-off', async (ctx) => {
  const gate = deferred();
  const s = scripted(ctx.stores.documents, async (pass) => {
    if (pass === 0) throw diskError();
    if (pass === 1) await gate.promise;
  });
  const retention = await startRetention({
    documents: s.documents, events: ctx.stores.events, deliveryPolicy: DELIVERY_POLICY, now: s.now, everyMs: 3_600_000,
    retry: { initialDelayMs: 20, maxDelayMs: 20 }, onSwept: s.onSwept, onError: s.onError,
  });
  // Pass 1 (the retry) is held: stop() resolves only once it has ended.
  await waitUntil(() => s.starts.length === 2, 'the retry started');
  let endedWhenStopped = -1;
  const stopped = retention.stop().then(() => (endedWhenStopped = s.ended));
  gate.resolve();
  await stopped;
  assert.is(endedWhenStopped, 2, 'the retry had ended when stop() resolved');

  // Stopped during a back-off of an hour: it resolves at once.
  const t = scripted(ctx.stores.documents, async () => {
    throw diskError();
  });
  const failing = await startRetention({
    documents: t.documents, events: ctx.stores.events, deliveryPolicy: DELIVERY_POLICY, now: t.now, everyMs: 3_600_000,
    retry: { initialDelayMs: 3_600_000, maxDelayMs: 3_600_000 }, onSwept: t.onSwept, onError: t.onError,
  });
  const before = performance.now();
  await failing.stop();
  assert.ok(performance.now() - before < 1_000, 'stop() did not wait for the retry');
  assert.is(t.starts.length, 1);
});

test.run();
storesTest.run();
