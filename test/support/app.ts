// Boots the real API on a fresh embedded data directory for a test file (or on the stores the
// environment names), optionally with the forwarder and the email projector in-process.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { loadConfig, type RelayConfig } from '../../infra/config.ts';
import { openServices, openStores, type Stores } from '../../apps/runtime.ts';
import type { CommitHold } from '../../infra/sqlite/group-commit.ts';
import { buildApi } from '../../apps/api/server.ts';
import type { ApiContext } from '../../apps/api/context.ts';
import { prepareStores } from '../../apps/services/prepare-stores.ts';
import { startForwarder } from '../../apps/pipeline/forwarder.ts';
import { startProcessor } from '../../apps/processors/processor.ts';
import { PROCESSORS } from '../../apps/processors/registry.ts';
import { createRelayMetrics } from '../../apps/relay-metrics.ts';

/** The API's clock: real time plus an offset, or frozen; tests move it to cross windows and months. */
export interface TestClock {
  offsetMs: number;
  /** Set while frozen: the time now() returns until moved. */
  frozenAt: number | null;
  now(): Date;
  advance(ms: number): void;
  set(date: Date): void;
  /** Stops the clock (at `date`, or at the current time); advance/set then move the frozen time. */
  freeze(date?: Date): void;
}

export function createTestClock(): TestClock {
  return {
    offsetMs: 0,
    frozenAt: null,
    now() { return new Date(this.frozenAt ?? Date.now() + this.offsetMs); },
    advance(ms: number) {
      if (this.frozenAt !== null) this.frozenAt += ms;
      else this.offsetMs += ms;
    },
    set(date: Date) {
      if (this.frozenAt !== null) this.frozenAt = date.getTime();
      else this.offsetMs = date.getTime() - Date.now();
    },
    freeze(date?: Date) { this.frozenAt = (date ?? this.now()).getTime(); },
  };
}

export interface TestAppOptions {
  /**
   * Also run the forwarder and the processors in-process (list reads need the read model):
   * true for every processor, or the names of those to run.
   */
  processors?: boolean | string[];
  /** Told about processor failures that will be retried (default: ignored). */
  onProcessorError?: (error: Error) => void;
  /** Use this data directory (e.g. another instance's, to share its sqlite event store); it is then left in place on close. */
  dataDir?: string;
  /** Share a clock with other instances (the processes of one deployment agree on the time). */
  clock?: TestClock;
  /** Listen on a free port of 127.0.0.1 (or on `port`); `url` is then its address. */
  listen?: boolean;
  port?: number;
  /** Holds the embedded stores' commits (test/support/commit-hold.ts). */
  commitHold?: CommitHold;
}

export interface TestApp {
  app: FastifyInstance;
  ctx: ApiContext;
  stores: Stores;
  config: RelayConfig;
  /** The API's clock: real time plus an offset that tests move to cross windows and months. */
  clock: TestClock;
  /** Set when started with `listen`. */
  url: string | null;
  close(): Promise<void>;
}

export async function startTestApp(env: Record<string, string> = {}, options: TestAppOptions = {}): Promise<TestApp> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'relay-test-'));
  const config = loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent', ...env });
  const stores = await openStores(config, { commitHold: options.commitHold });
  // What every process does at start (apps/relay.ts): unique indexes are part of the behaviour.
  await prepareStores(stores.documents);
  const clock = options.clock ?? createTestClock();
  const services = await openServices(config, stores);
  const ctx: ApiContext = {
    config,
    events: stores.events,
    documents: stores.documents,
    services,
    now: () => clock.now(),
    readiness: async () => ({ checks: {}, parts: {} }),
    // As every process has (apps/relay.ts): /metrics shows the consumer groups and parked events.
    metrics: createRelayMetrics({ log: stores.log, documents: stores.documents, events: stores.events, namespace: config.logNamespace }),
  };
  const processors: Array<{ stop(): Promise<void> }> = [];
  if (options.processors) {
    const shared = { events: stores.events, log: stores.log, documents: stores.documents, namespace: config.logNamespace };
    processors.push(await startForwarder(shared));
    const wanted = options.processors === true ? null : new Set(options.processors);
    for (const definition of PROCESSORS.filter((p) => wanted === null || wanted.has(p.name))) {
      processors.push(await startProcessor(definition, {
        config, events: stores.events, documents: stores.documents, log: stores.log, services, now: () => clock.now(), metrics: ctx.metrics,
        onError: options.onProcessorError ?? (() => {}),
      }));
    }
  }
  const app = await buildApi(ctx, { logLevel: false });
  await app.ready();
  const url = options.listen ? await app.listen({ host: '127.0.0.1', port: options.port ?? 0 }) : null;
  return {
    app, ctx, stores, config, clock, url,
    async close() {
      await app.close();
      for (const processor of processors.reverse()) await processor.stop();
      await services.close();
      await stores.close();
      if (options.dataDir === undefined) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
