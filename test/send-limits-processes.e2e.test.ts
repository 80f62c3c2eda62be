// Quotas, rate limits and idempotency across real API processes: two `relay api` processes
// on one deployment's stores, requests split between them. Runs on the embedded stores
// (sqlite files shared by the processes) and, when configured, on Kafka + FerretDB.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores, type Stores } from '../apps/runtime.ts';
import { secretsOf } from './support/secrets.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import { createApiKey } from '../apps/services/management/api-keys.ts';
import { connectDomain, createDomain, markDomainVerified } from '../apps/services/management/domains.ts';
import { createProject } from '../apps/services/management/projects.ts';
import { createWorkspace, setWorkspaceActivation } from '../apps/services/management/workspaces.ts';
import { UsageLedger } from '../apps/services/usage-ledger.ts';
import { readEmailStream } from '../apps/services/email-stream.ts';
import type { Environment } from '../domain/management.ts';
import { loadConfig } from '../infra/config.ts';
import { freePort, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { DEFAULT_ALLOWANCES } from '../domain/usage/quota.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS;
const mongoUrl = process.env.RELAY_MONGODB_URL;

function register(mode: 'embedded' | 'distributed', extraEnv: () => Record<string, string>) {
  const test = suite(`send limits across two API processes [${mode}]`);
  const dataDir = mkdtempSync(join(tmpdir(), `relay-procs-${mode}-`));
  let env: Record<string, string>;
  let stores: Stores;
  let ledger: UsageLedger;
  const apis: Array<{ process: RelayProcess; url: string }> = [];

  test.before(async () => {
    env = { RELAY_DATA_DIR: dataDir, ...extraEnv() };
    stores = await openStores(loadConfig({ ...env, RELAY_LOG_LEVEL: 'silent' }));
    await prepareStores(stores.documents);
    ledger = new UsageLedger(stores.events);
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const child = spawnRelay(['api'], { ...env, PORT: String(port) });
      apis.push({ process: child, url });
      await waitForReady(url, child, 60_000);
    }
  });

  test.after(async () => {
    for (const api of apis) await api.process.stop();
    await stores?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  let n = 0;
  async function tenant(environment: Environment) {
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
    return { workspaceId: workspace._id, projectId: project._id, keyId: key._id, secret, domain: domain.name };
  }

  const send = (i: number, secret: string, body: unknown, idempotencyKey?: string) =>
    fetch(`${apis[i % apis.length].url}/v1/emails`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
      body: JSON.stringify(body),
    });

  test('workspace quota edge: 4,990 used, 20 parallel sends over both processes admit exactly 10', async () => {
    const t = await tenant('production');
    await ledger.charge({ workspaceId: t.workspaceId, emailId: 'em_fixture', fingerprint: 'f', apiKeyId: t.keyId, developmentKey: false, recipients: 4_990, allowances: DEFAULT_ALLOWANCES, at: new Date(), origin: { correlationId: 'test-fixture', causationId: 'test-fixture' } });
    const responses = await Promise.all(Array.from({ length: 20 }, (_, i) => send(i, t.secret, { from: `a@${t.domain}`, to: `u${i}@example.com`, subject: 's', text: 't' })));
    const statuses = responses.map((r) => r.status);
    assert.is(statuses.filter((s) => s === 202).length, 10, JSON.stringify(statuses));
    for (const r of responses.filter((r) => r.status !== 202)) assert.is(((await r.json()) as { error: { code: string } }).error.code, 'quota_exceeded');
    assert.is((await ledger.usage(t.workspaceId, new Date())).workspaceRecipients, 5_000);
  });

  test('one Idempotency-Key, 50 parallel requests over both processes: one email, one id', async () => {
    const t = await tenant('production');
    const body = { from: `a@${t.domain}`, to: 'u@example.com', subject: 's', text: 't' };
    const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => send(i, t.secret, body, 'same-key')));
    const results = await Promise.all(responses.map(async (r) => ({ status: r.status, body: (await r.json()) as { id: string } })));
    assert.ok(results.every((r) => r.status === 202), JSON.stringify(results.filter((r) => r.status !== 202).slice(0, 2)));
    const ids = new Set(results.map((r) => r.body.id));
    assert.is(ids.size, 1);
    assert.equal((await readEmailStream(stores.events, [...ids][0])).map((e) => e.type), ['EmailAccepted']);
    assert.is((await ledger.usage(t.workspaceId, new Date())).workspaceRecipients, 1);
  });

  test('development key rate: 40 parallel requests over both processes admit exactly 15', async () => {
    const t = await tenant('development');
    const responses = await Promise.all(Array.from({ length: 40 }, (_, i) => send(i, t.secret, { from: `a@${t.domain}`, to: `u${i}@${t.domain}`, subject: 's', text: 't' })));
    const statuses = responses.map((r) => r.status);
    assert.is(statuses.filter((s) => s === 202).length, 15, JSON.stringify(statuses));
    assert.ok(statuses.every((s) => s === 202 || s === 429));
  });

  test.run();
}

register('embedded', () => ({}));
if (brokers && mongoUrl) {
  register('distributed', () => {
    const run = randomBytes(4).toString('hex');
    const database = new URL(mongoUrl);
    database.pathname = `/relay_procs_${run}`;
    return { RELAY_KAFKA_BROKERS: brokers, RELAY_MONGODB_URL: database.toString(), RELAY_LOG_NAMESPACE: `procs_${run}` };
  });
} else {
  const skipped = suite('send limits across two API processes [distributed]');
  console.log('send limits across two API processes [distributed] skipped: RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set');
  for (const name of ['workspace quota edge', 'one Idempotency-Key over both processes', 'development key rate over both processes']) skipped.skip(name, () => {});
  skipped.run();
}
