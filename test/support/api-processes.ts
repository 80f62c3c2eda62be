// Real `relay` processes (two API processes, other parts) on one embedded data directory, as a
// deployment without Kafka runs them, with tenants made through the stores.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStores, type Stores } from '../../apps/runtime.ts';
import { prepareStores } from '../../apps/services/prepare-stores.ts';
import { createApiKey } from '../../apps/services/management/api-keys.ts';
import { connectDomain, createDomain, markDomainVerified } from '../../apps/services/management/domains.ts';
import { createProject } from '../../apps/services/management/projects.ts';
import { createWorkspace, setWorkspaceActivation } from '../../apps/services/management/workspaces.ts';
import type { Environment } from '../../domain/management.ts';
import { loadConfig } from '../../infra/config.ts';
import { secretsOf } from './secrets.ts';
import { freePort, spawnRelay, waitForReady, type RelayProcess } from './relay-process.ts';

export interface Part { process: RelayProcess; url: string }
export interface Deployment {
  dataDir: string;
  env: Record<string, string>;
  stores: Stores;
  parts: Part[];
  start(args: string[], extra?: Record<string, string>): Promise<Part>;
  tenant(environment: Environment): Promise<{ workspaceId: string; projectId: string; keyId: string; secret: string; domain: string; ownerId: string }>;
  close(): Promise<void>;
}

export async function deployment(extraEnv: Record<string, string> = {}): Promise<Deployment> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-processes-'));
  const env = { RELAY_DATA_DIR: dataDir, ...extraEnv };
  const stores = await openStores(loadConfig({ ...env, RELAY_LOG_LEVEL: 'silent' }));
  await prepareStores(stores.documents);
  const parts: Part[] = [];
  let n = 0;
  return {
    dataDir, env, stores, parts,
    async start(args, extra = {}) {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const process = spawnRelay(args, { ...env, PORT: String(port), ...extra });
      const part = { process, url };
      parts.push(part);
      await waitForReady(url, process, 60_000);
      return part;
    },
    async tenant(environment) {
      const now = new Date();
      const id = `${++n}-${randomBytes(3).toString('hex')}`;
      const owner = { _id: `usr_${id}`, email: `o${id}@procs.test`, passwordHash: 'x', createdAt: now.toISOString() };
      const { workspace } = await createWorkspace(stores.documents, owner, `Procs ${id}`, now);
      await setWorkspaceActivation(stores.documents, workspace._id, true, now);
      const project = await createProject(stores.documents, { workspaceId: workspace._id, name: 'p', environment }, now);
      const domain = await createDomain(stores.documents, { workspaceId: workspace._id, name: `d${id}.procs.test` }, now, await secretsOf(dataDir));
      await markDomainVerified(stores.documents, domain._id, 'fixture', now);
      await connectDomain(stores.documents, domain._id, project._id);
      const { key, secret } = await createApiKey(stores.documents, { project, name: 'k', permissions: ['email:send', 'email:read'] }, now);
      return { workspaceId: workspace._id, projectId: project._id, keyId: key._id, secret, domain: domain.name, ownerId: owner._id };
    },
    async close() {
      for (const p of parts) await p.process.kill();
      await stores.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export const post = (url: string, secret: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${url}/v1/emails`, { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
