// What the conformance suites run against: one or more API instances over one deployment's
// stores, a shared (frozen) clock, and fixtures made through the real management services.
// Requests go to the instances in turn, so with several instances every rule is exercised
// across processes' caches. The embedded harness is one instance on fresh sqlite stores; the
// distributed one is two instances on Kafka + FerretDB sharing one event store file.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LightMyRequestResponse } from 'fastify';
import * as assert from 'uvu/assert';
import { openStores, type Stores } from '../../apps/runtime.ts';
import { COLLECTIONS } from '../../apps/services/collections.ts';
import { createApiKey, revokeApiKey } from '../../apps/services/management/api-keys.ts';
import { connectDomain, createDomain, disconnectDomain, markDomainVerified } from '../../apps/services/management/domains.ts';
import { createProject } from '../../apps/services/management/projects.ts';
import { addSuppression, removeSuppression } from '../../apps/services/management/suppressions.ts';
import { createWorkspace, setWorkspaceActivation } from '../../apps/services/management/workspaces.ts';
import { emailIdFor } from '../../apps/services/admission.ts';
import { UsageLedger } from '../../apps/services/usage-ledger.ts';
import { readEmailStream } from '../../apps/services/email-stream.ts';
import type { Environment, Permission, Project, User } from '../../domain/management.ts';
import { loadConfig } from '../../infra/config.ts';
import type { EmailView } from '../../projections/email-view.ts';
import { createTestClock, startTestApp, type TestApp, type TestClock } from '../support/app.ts';
import { waitUntil } from '../support/eventually.ts';
import { secretsOf } from '../support/secrets.ts';
import { DEFAULT_ALLOWANCES } from '../../domain/usage/quota.ts';

export type Response = LightMyRequestResponse;

export interface RequestOptions {
  /** Bearer key; null sends no Authorization header. */
  key: string | null;
  body?: unknown;
  /** Raw body text instead of `body` (sent as application/json). */
  payload?: string;
  headers?: Record<string, string>;
  idempotencyKey?: string;
  /** Which instance answers; by default they take turns. */
  via?: number;
}

export interface Key {
  id: string;
  secret: string;
}

export interface Tenant {
  workspaceId: string;
  project: Project;
  environment: Environment;
  /** A verified domain connected to the project. */
  domain: string;
  /** email:send + email:read. */
  key: Key;
  /** A sender address on the verified domain. */
  from: string;
  /** A recipient every key of this tenant may send to (on the verified domain). */
  to(local?: string): string;
  newKey(permissions?: Permission[]): Promise<Key>;
  revoke(key: Key): Promise<void>;
  /** Adds a domain of the workspace: verified and connected unless told otherwise. */
  addDomain(name: string, options?: { verified?: boolean; connected?: boolean }): Promise<{ id: string }>;
  disconnect(domainId: string): Promise<void>;
  /** Another project in the same workspace (of the same environment unless told), with its own verified domain and key. */
  sibling(environment?: Environment): Promise<Tenant>;
  activate(activated?: boolean): Promise<void>;
  suppress(address: string): Promise<void>;
  unsuppress(address: string): Promise<void>;
  /** Charges recipients straight to the usage stream, as admissions do (to reach a quota's edge fast). */
  charge(recipients: number, options?: { key?: Key }): Promise<void>;
  /** The workspace's usage this month (by the harness clock), read from the stream. */
  usage(): Promise<{ workspace: number; byKey: Record<string, number> }>;
}

export interface Harness {
  name: string;
  instances: TestApp[];
  clock: TestClock;
  /** The harness's own connections to the deployment's stores (fixtures, assertions). */
  stores: Stores;
  request(method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, options: RequestOptions): Promise<Response>;
  /** POST /v1/emails. */
  send(key: Key | string | null, body: unknown, options?: Omit<RequestOptions, 'key' | 'body'>): Promise<Response>;
  tenant(options?: { environment?: Environment; activated?: boolean }): Promise<Tenant>;
  /** Waits until every id is in the email read model. */
  projected(ids: string[]): Promise<void>;
  /** Event types of an email's stream. */
  streamTypes(emailId: string): Promise<string[]>;
  emailIdFor(projectId: string, idempotencyKey: string): string;
  close(): Promise<void>;
}

/** Asserts the spec's error envelope — exactly {error: {code, message}}, no stack — with this status and code. */
export function expectError(response: Response, status: number, code: string | string[], field?: string): string {
  let body: { error?: { code?: unknown; message?: unknown } };
  try {
    body = response.json();
  } catch {
    throw new Error(`not JSON: ${response.statusCode} ${response.body.slice(0, 300)}`);
  }
  assert.is(response.statusCode, status, `status ${response.statusCode} (want ${status}): ${response.body.slice(0, 300)}`);
  assert.equal(Object.keys(body), ['error'], `envelope: ${response.body.slice(0, 300)}`);
  assert.equal(Object.keys(body.error!).sort(), ['code', 'message']);
  const codes = Array.isArray(code) ? code : [code];
  assert.ok(codes.includes(String(body.error!.code)), `code ${String(body.error!.code)} (want ${codes.join(' or ')}): ${String(body.error!.message)}`);
  const message = String(body.error!.message);
  assert.type(body.error!.message, 'string');
  assert.ok(message.length > 0);
  assert.not.match(message, /\n\s+at /, 'no stack trace');
  if (field) assert.ok(message.includes(field), `message "${message}" names ${field}`);
  return message;
}

export function expectAccepted(response: Response, status: 'queued' | 'suppressed' = 'queued'): { id: string; status: string; test_mode: boolean; reason?: string } {
  assert.is(response.statusCode, 202, `status ${response.statusCode}: ${response.body.slice(0, 300)}`);
  const body = response.json();
  assert.is(body.status, status, response.body);
  return body;
}

interface HarnessSetup {
  name: string;
  env: Record<string, string>;
  instances: number;
  /** Cleanup of what the env points at, after the instances closed. */
  cleanup?: () => Promise<void>;
}

let tenants = 0;

async function startHarness(setup: HarnessSetup): Promise<Harness> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-conformance-'));
  const clock = createTestClock();
  // Frozen at a whole second: every suite moves time on purpose, never by accident.
  clock.freeze(new Date(Math.floor(Date.now() / 1000) * 1000));
  const instances: TestApp[] = [];
  let stores: Stores | null = null;
  try {
    for (let i = 0; i < setup.instances; i++) {
      // The projector only: the contract covers admission and reads, where an email stays
      // queued; delivery has its own suites (test/delivery-*.test.ts).
      instances.push(await startTestApp(setup.env, { dataDir, clock, processors: i === 0 ? ['projector'] : false, listen: true }));
    }
    stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent', ...setup.env }));
  } catch (error) {
    for (const instance of instances) await instance.close().catch(() => {});
    rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
  const own = stores;
  const ledger = new UsageLedger(own.events);
  const secrets = await secretsOf(dataDir);
  let turn = 0;

  const request: Harness['request'] = async (method, url, options) => {
    const instance = instances[options.via ?? turn++ % instances.length];
    const headers: Record<string, string> = { ...options.headers };
    if (options.key !== null) headers.authorization = `Bearer ${options.key}`;
    if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey;
    const hasBody = options.body !== undefined || options.payload !== undefined;
    if (hasBody) headers['content-type'] ??= 'application/json';
    return instance.app.inject({
      method,
      url,
      headers,
      ...(hasBody ? { payload: options.payload ?? JSON.stringify(options.body) } : {}),
    });
  };

  const makeTenant = async (options: { environment?: Environment; activated?: boolean; workspaceId?: string } = {}): Promise<Tenant> => {
    const n = ++tenants;
    const environment = options.environment ?? 'production';
    const now = clock.now();
    let workspaceId = options.workspaceId;
    if (!workspaceId) {
      // Keys, domains and sends need a workspace, not a signed-in user: the owner is only named.
      const owner: User = { _id: `usr_conformance_${n}`, email: `owner${n}@conformance.test`, passwordHash: 'x', createdAt: now.toISOString() };
      workspaceId = (await createWorkspace(own.documents, owner, `Conformance ${n}`, now)).workspace._id;
      if (options.activated ?? environment === 'production') await setWorkspaceActivation(own.documents, workspaceId, true, now);
    }
    const project = await createProject(own.documents, { workspaceId, name: `project-${n}`, environment }, now);
    const domainName = `t${n}-${randomBytes(3).toString('hex')}.example.test`;
    const addDomain: Tenant['addDomain'] = async (name, domainOptions = {}) => {
      const domain = await createDomain(own.documents, { workspaceId, name }, clock.now(), secrets);
      if (domainOptions.verified ?? true) await markDomainVerified(own.documents, domain._id, 'conformance fixture', clock.now());
      if ((domainOptions.verified ?? true) && (domainOptions.connected ?? true)) await connectDomain(own.documents, domain._id, project._id);
      return { id: domain._id };
    };
    await addDomain(domainName);
    const newKey: Tenant['newKey'] = async (permissions = ['email:send', 'email:read']) => {
      const { key, secret } = await createApiKey(own.documents, { project, name: `key ${randomBytes(3).toString('hex')}`, permissions }, clock.now());
      return { id: key._id, secret };
    };
    const tenant: Tenant = {
      workspaceId,
      project,
      environment,
      domain: domainName,
      key: await newKey(),
      from: `sender@${domainName}`,
      to: (local = 'ann') => `${local}@${domainName}`,
      newKey,
      revoke: async (key) => void (await revokeApiKey(own.documents, key.id, clock.now())),
      addDomain,
      disconnect: async (domainId) => void (await disconnectDomain(own.documents, domainId, project._id)),
      sibling: (siblingEnvironment = environment) => makeTenant({ environment: siblingEnvironment, workspaceId }),
      activate: async (activated = true) => void (await setWorkspaceActivation(own.documents, workspaceId, activated, clock.now())),
      suppress: async (address) => void (await addSuppression(own, workspaceId, address, clock.now(), { kind: 'user', userId: 'usr_conformance' })),
      unsuppress: async (address) => void (await removeSuppression(own, workspaceId, address, clock.now(), { kind: 'user', userId: 'usr_conformance' })),
      charge: (recipients, chargeOptions = {}) => {
        const key = chargeOptions.key ?? tenant.key;
        return ledger.charge({
          workspaceId,
          emailId: `em_fixture_${randomBytes(6).toString('hex')}`,
          fingerprint: 'fixture',
          apiKeyId: key.id,
          developmentKey: environment === 'development',
          recipients,
          allowances: DEFAULT_ALLOWANCES,
          at: clock.now(),
          origin: { correlationId: 'test-fixture', causationId: 'test-fixture' },
        });
      },
      usage: async () => {
        const state = await ledger.usage(workspaceId, clock.now());
        return { workspace: state.workspaceRecipients, byKey: state.byKey };
      },
    };
    return tenant;
  };

  return {
    name: setup.name,
    instances,
    clock,
    stores: own,
    request,
    send: (key, body, options = {}) => request('POST', '/v1/emails', { ...options, key: typeof key === 'string' || key === null ? key : key.secret, body }),
    tenant: (options) => makeTenant(options),
    projected: (ids) => waitUntil(async () => {
      const views = own.documents.collection<EmailView>(COLLECTIONS.emails);
      for (const id of ids) if (!(await views.get(id))) return false;
      return true;
    }, `emails ${ids.slice(0, 3).join(', ')}${ids.length > 3 ? ', …' : ''} are projected`, 60_000),
    streamTypes: async (emailId) => (await readEmailStream(own.events, emailId)).map((e) => e.type),
    emailIdFor,
    async close() {
      for (const instance of instances) await instance.close().catch(() => {});
      await own.close().catch(() => {});
      await setup.cleanup?.();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export const startEmbeddedHarness = () => startHarness({ name: 'embedded', env: {}, instances: 1 });

/** Two API instances (the first also runs forwarder and projector) on Kafka + MongoDB-compatible store, isolated per run. */
export function startDistributedHarness(brokers: string, mongoUrl: string): Promise<Harness> {
  const run = randomBytes(4).toString('hex');
  const database = new URL(mongoUrl);
  database.pathname = `/relay_conformance_${run}`;
  return startHarness({
    name: 'distributed',
    env: { RELAY_KAFKA_BROKERS: brokers, RELAY_MONGODB_URL: database.toString(), RELAY_LOG_NAMESPACE: `conformance_${run}` },
    instances: 2,
  });
}

/** A harness started on first use and shared by every suite of a test file. */
export interface HarnessRef {
  get(): Promise<Harness>;
  close(): Promise<void>;
}

export function harnessRef(start: () => Promise<Harness>): HarnessRef {
  let started: Promise<Harness> | null = null;
  return {
    get: () => (started ??= start()),
    close: async () => {
      if (started) await (await started).close();
    },
  };
}

/** A body every tenant may send (production or development). */
export function basicSend(t: Tenant, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { from: t.from, to: t.to(), subject: 'Hello', text: 'Hi there', ...overrides };
}

/** Sends `n` direct emails, 10 ms apart on the harness clock (never more than 100 in one second). */
export async function sendMany(h: Harness, t: Tenant, n: number, body: (i: number) => Record<string, unknown> = () => ({}), key: Key = t.key): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    h.clock.advance(10);
    ids.push(expectAccepted(await h.send(key, basicSend(t, { subject: `Message ${i}`, ...body(i) }))).id);
  }
  return ids;
}
