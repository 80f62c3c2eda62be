// The pipeline thread of `relay start` (RELAY_PIPELINE_THREAD=on): the forwarder, the processors and retention run on a
// worker thread (./pipeline-thread-entry.ts) with store connections of their own, as a process
// of their own would in distributed mode; the API and inbound SMTP keep the main thread. The
// two threads talk only to report: the parts' liveness for /readyz, the thread's metrics for
// /metrics (its appended events among them), its stores' write failures for /readyz,
// relay_store_ready and the log (apps/liveness.ts withThreadWrites), and stop. Work reaches the
// pipeline through the stores alone, and the embedded stores' wake-ups cross threads
// (infra/sqlite/change-signal.ts: wakeOtherThreads).
//
// A write failure (a lock held past the busy timeout, a full disk, a failed sync) is a state of
// the connection that saw it, so the thread's own are told as they change (it looks every
// STORE_WATCH_MS, apps/liveness.ts followStoreWrites) rather than asked for: the main thread's
// log line comes when the failure does, not at the next /readyz or scrape. The thread pings its
// store (its write of its own) only when the main thread judges a store whose writes it said fail.
//
// The thread is a part itself (`pipeline-thread`, infra/liveness.ts): each answer it gives is
// progress; one not given within ANSWER_TIMEOUT_MS makes it `recovering` (its event loop is
// blocked) and its parts are shown as last reported; once it ended, it and its parts are
// `stopped`.
//
// A stop while the thread still starts (hooks.abandon: the process got a signal meanwhile) asks
// the thread to give its own start up as a process does (apps/relay.ts, StartingRelay.abandon);
// it says `stopped` once what it started has stopped, and startPipelineThread then rejects with
// the abandonment. One that finished starting anyway answers `ready` and is stopped as usual.
import { Worker } from 'node:worker_threads';
import type { RelayConfig } from '../../infra/config.ts';
import { Liveness, type PartStatus } from '../../infra/liveness.ts';
import type { RegistrySnapshot } from '../../infra/metrics/registry.ts';
import type { ProcessorPolicy } from '../processors/processor.ts';
import type { Part } from '../relay.ts';

export interface PipelineThread {
  /** The liveness of the thread's parts, as it reports them. */
  partsStatus(): Promise<Record<string, PartStatus>>;
  /** The thread's own liveness (the part `pipeline-thread`). */
  liveness: Liveness;
  /** The thread's metrics (its parts' counters and gauges); null when it did not answer in time. */
  metrics(): Promise<RegistrySnapshot | null>;
  /** Why the thread's writes to the store fail, as it said last (it looks every second); null when they do not. */
  writeFailure(store: ThreadStore): string | null;
  /** The thread's ping of the store (a write of its own while its writes fail); false when it did not answer in time. */
  pingStore(store: ThreadStore): Promise<boolean>;
  /** Asks the thread's parts to start no new work (RunningRelay.stopClaiming), ahead of stop(). */
  stopClaiming(): void;
  /** Stops the parts (consumer positions committed, stores closed) and ends the thread. */
  stop(): Promise<void>;
}

export interface PipelineHooks {
  /** The thread ended without being asked to (it failed, or its parts could not run). */
  onExit(error: Error): void;
  /** Aborted when the start is given up: the thread stops, and a start still under way rejects with the signal's reason. */
  abandon?: AbortSignal;
}

/** The stores whose writes the thread reports (on the embedded file the log writes on the event store's connection). */
export type ThreadStore = 'event_store' | 'document_store';

/** Messages from the thread. */
export type FromPipeline =
  | { kind: 'ready' }
  | { kind: 'failed'; message: string; stack?: string }
  | { kind: 'parts-status'; id: number; parts: Record<string, PartStatus> }
  | { kind: 'metrics'; id: number; snapshot: RegistrySnapshot }
  /** Its writes to the store fail for this reason from now on, or (null) take writes again. */
  | { kind: 'store-writes'; store: ThreadStore; failure: string | null }
  | { kind: 'store-ping'; id: number; ready: boolean }
  | { kind: 'stopped' };

/** Messages to the thread. */
export type ToPipeline =
  | { kind: 'parts-status'; id: number }
  | { kind: 'metrics'; id: number }
  | { kind: 'store-ping'; id: number; store: ThreadStore }
  | { kind: 'stop-claiming' }
  | { kind: 'stop' };

export interface PipelineThreadData {
  config: RelayConfig;
  parts: Part[];
  processorPolicy?: Partial<ProcessorPolicy>;
}

const ENTRY = new URL('./pipeline-thread-entry.ts', import.meta.url);
/**
 * How long /readyz and /metrics wait for the thread's answer, within the 2 s /readyz gives
 * itself (its parts' probes take up to PROBE_TIMEOUT_MS, apps/liveness.ts).
 */
const ANSWER_TIMEOUT_MS = 1_500;
/** How long a thread that said it stopped may take to end before it is terminated. */
const STOPPED_GRACE_MS = 1000;

export async function startPipelineThread(data: PipelineThreadData, hooks: PipelineHooks, entry: URL = ENTRY): Promise<PipelineThread> {
  const { parts } = data;
  const worker = new Worker(entry, { workerData: data, stdout: false, stderr: false, name: 'relay-pipeline' });
  let stopping = false;
  let nextId = 0;
  const asked = new Map<number, (answer: unknown) => void>();
  const liveness = new Liveness();
  // What the thread said last; each part as just started until it first answers.
  let known: Record<string, PartStatus> = Object.fromEntries(parts.map((p) => [p, liveness.snapshot()]));
  // Why the thread's writes to each store fail, as it said last; none once it has ended.
  const writeFailures = new Map<ThreadStore, string>();
  // Every listener is added now: a thread that ends can have its last messages and its exit
  // emitted in one go, before a listener added after an await would exist.
  let starting: { resolve(): void; reject(error: Error): void } | null = null;
  const started = new Promise<void>((resolve, reject) => (starting = { resolve, reject }));
  let failure: Error | null = null;
  // A start that failed is not reported again by onExit when the thread then ends.
  const failStart = (error: Error) => {
    if (!starting) return;
    starting.reject(error);
    starting = null;
    stopping = true;
  };
  worker.on('message', (message: FromPipeline) => {
    if (message.kind === 'ready') {
      starting?.resolve();
      starting = null;
    } else if (message.kind === 'failed') {
      failStart(Object.assign(new Error(message.message), { stack: message.stack }));
    } else if (message.kind === 'parts-status' || message.kind === 'metrics' || message.kind === 'store-ping') {
      asked.get(message.id)?.(message.kind === 'metrics' ? message.snapshot : message.kind === 'store-ping' ? message.ready : message.parts);
      asked.delete(message.id);
    } else if (message.kind === 'store-writes') {
      if (message.failure === null) writeFailures.delete(message.store);
      else writeFailures.set(message.store, message.failure);
    } else if (message.kind === 'stopped') {
      // Its start given up: what it started is stopped, its stores closed (a store still
      // opening is let go with the thread).
      if (starting) failStart(hooks.abandon?.reason ?? new Error('the pipeline thread stopped while starting'));
      // Its parts are stopped and its stores closed: whatever still keeps the thread alive
      // (a handle nobody closed) must not hold up the process's exit.
      setTimeout(() => void worker.terminate(), STOPPED_GRACE_MS).unref();
    }
  });
  hooks.abandon?.addEventListener('abort', () => {
    if (stopping) return;
    stopping = true;
    worker.postMessage({ kind: 'stop' } satisfies ToPipeline);
  }, { once: true });
  worker.on('error', (error) => {
    failure = error;
    failStart(error);
  });
  const ended = new Promise<void>((resolve) => worker.once('exit', (code) => {
    const error = failure ?? new Error(`the pipeline thread ended (exit code ${code})`);
    liveness.stopped(stopping ? undefined : error);
    const gone = liveness.snapshot();
    known = Object.fromEntries(parts.map((p) => [p, { ...gone, error: stopping ? null : `the pipeline thread ended: ${error.message}` }]));
    writeFailures.clear();
    for (const answer of asked.values()) answer(undefined);
    asked.clear();
    failStart(new Error(`the pipeline thread ended while starting (exit code ${code})`));
    if (!stopping) hooks.onExit(error);
    resolve();
  }));
  try {
    await started;
  } catch (error) {
    await worker.terminate();
    throw error;
  }

  /**
   * Asks the thread; undefined when it is stopping, has ended or does not answer within the
   * timeout. Each answer is the thread's progress; no answer in time, a failure.
   */
  function ask<T>(question: { kind: 'parts-status' } | { kind: 'metrics' } | { kind: 'store-ping'; store: ThreadStore }): Promise<T | undefined> {
    if (stopping) return Promise.resolve(undefined);
    const id = nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        asked.delete(id);
        liveness.failed(new Error(`the pipeline thread did not answer within ${ANSWER_TIMEOUT_MS} ms (its event loop is blocked)`), 'answer');
        resolve(undefined);
      }, ANSWER_TIMEOUT_MS);
      asked.set(id, (answer) => {
        clearTimeout(timer);
        if (answer !== undefined) liveness.progress('answer');
        resolve(answer as T | undefined);
      });
      worker.postMessage({ ...question, id } satisfies ToPipeline);
    });
  }

  return {
    liveness,
    partsStatus: async () => (known = await ask<Record<string, PartStatus>>({ kind: 'parts-status' }) ?? known),
    metrics: async () => await ask<RegistrySnapshot>({ kind: 'metrics' }) ?? null,
    writeFailure: (store) => writeFailures.get(store) ?? null,
    // No answer (a thread that is blocked, stopping or gone) does not say its writes go through.
    pingStore: async (store) => await ask<boolean>({ kind: 'store-ping', store }) ?? false,
    stopClaiming() {
      if (!stopping) worker.postMessage({ kind: 'stop-claiming' } satisfies ToPipeline);
    },
    async stop() {
      if (!stopping) {
        stopping = true;
        worker.postMessage({ kind: 'stop' } satisfies ToPipeline);
      }
      await ended;
      liveness.stopped();
    },
  };
}
