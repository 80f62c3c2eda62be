// Boots the real API on a fresh embedded data directory for a test file.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { loadConfig, type RelayConfig } from '../../infra/config.ts';
import { openStores, type Stores } from '../../apps/runtime.ts';
import { buildApi } from '../../apps/api/server.ts';
import type { ApiContext } from '../../apps/api/context.ts';
import { prepareStores } from '../../apps/services/prepare-stores.ts';

export interface TestApp {
  app: FastifyInstance;
  ctx: ApiContext;
  stores: Stores;
  config: RelayConfig;
  /** The API's clock: real time plus an offset that tests move to cross windows and months. */
  clock: { offsetMs: number; advance(ms: number): void; set(date: Date): void };
  close(): Promise<void>;
}

export async function startTestApp(env: Record<string, string> = {}): Promise<TestApp> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-test-'));
  const config = loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent', ...env });
  const stores = await openStores(config);
  // What every process does at start (apps/relay.ts): unique indexes are part of the behaviour.
  await prepareStores(stores.documents);
  const clock = {
    offsetMs: 0,
    advance(ms: number) { this.offsetMs += ms; },
    set(date: Date) { this.offsetMs = date.getTime() - Date.now(); },
  };
  const ctx: ApiContext = {
    config,
    events: stores.events,
    documents: stores.documents,
    now: () => new Date(Date.now() + clock.offsetMs),
    readiness: async () => ({}),
  };
  const app = await buildApi(ctx, { logLevel: false });
  await app.ready();
  return {
    app, ctx, stores, config, clock,
    async close() {
      await app.close();
      await stores.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
