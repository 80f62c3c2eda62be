// Fixtures for the template suites: the app in either mode, a workspace with members of every
// role, a second project, a verified sending domain and an API key, and request helpers.
// Distributed mode = the document store from RELAY_MONGODB_URL (each app gets a database of
// its own, dropped on close), plus RELAY_EVENTSTORE_URL when that is set too.
import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { MongoClient } from 'mongodb';
import { connectDomain, createDomain, markDomainVerified } from '../../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './app.ts';
import { addMember, call, newCaller, workspaceWithProject, type Caller } from './management.ts';

export type Mode = 'embedded' | 'distributed';

export const DASHBOARD_ORIGIN = 'https://dashboard.relay.test';

/** Why the distributed suites cannot run here, or undefined when they can. */
export function distributedSkipReason(): string | undefined {
  return process.env.RELAY_MONGODB_URL?.trim()
    ? undefined
    : 'RELAY_MONGODB_URL is not set (eval "$(bash infra/engines/engines.sh up)" starts FerretDB)';
}

function withDatabase(url: string, database: string): string {
  const match = /^(mongodb(?:\+srv)?:\/\/[^/?#]*)(?:\/[^?#]*)?(.*)$/i.exec(url);
  if (!match) throw new Error(`RELAY_MONGODB_URL is not a mongodb URL: ${url}`);
  return `${match[1]}/${database}${match[2]}`;
}

/** The real API in the given mode; close() also drops a distributed run's database. */
export async function startAppIn(mode: Mode, env: Record<string, string> = {}): Promise<TestApp> {
  if (mode === 'embedded') return startTestApp({ RELAY_DASHBOARD_ORIGIN: DASHBOARD_ORIGIN, ...env });
  const baseUrl = process.env.RELAY_MONGODB_URL?.trim();
  if (!baseUrl) throw new Error('distributed mode needs RELAY_MONGODB_URL');
  const database = `relay_tpl_${randomBytes(6).toString('hex')}`;
  const eventStoreUrl = process.env.RELAY_EVENTSTORE_URL?.trim();
  const t = await startTestApp({
    RELAY_DASHBOARD_ORIGIN: DASHBOARD_ORIGIN,
    RELAY_MONGODB_URL: withDatabase(baseUrl, database),
    ...(eventStoreUrl ? { RELAY_EVENTSTORE_URL: eventStoreUrl } : {}),
    ...env,
  });
  const close = t.close.bind(t);
  t.close = async () => {
    await close();
    const admin = await MongoClient.connect(baseUrl);
    try {
      await admin.db(database).dropDatabase();
    } finally {
      await admin.close();
    }
  };
  return t;
}

export interface TemplateWorld {
  t: TestApp;
  owner: Caller;
  developer: Caller;
  viewer: Caller;
  outsider: Caller;
  workspaceId: string;
  projectId: string;
  /** Another project of the same workspace: the owner is a member of both. */
  otherProjectId: string;
  /** A project of the outsider's workspace. */
  foreignProjectId: string;
  /** Verified, connected to projectId: senders and (development) recipients live here. */
  domain: string;
  /** rr_test_ key of projectId with email:send and email:read. */
  apiKey: string;
  /** rr_test_ key of otherProjectId, same domain connected. */
  otherApiKey: string;
}

async function apiKeyFor(t: TestApp, owner: Caller, projectId: string): Promise<string> {
  const key = await call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: owner, body: { name: 'templates', permissions: ['email:send', 'email:read'] } });
  if (key.statusCode !== 201) throw new Error(`api key: ${key.statusCode} ${key.body}`);
  return key.json().secret as string;
}

export async function templateWorld(mode: Mode): Promise<TemplateWorld> {
  const t = await startAppIn(mode);
  try {
    return await populateTemplateWorld(t);
  } catch (error) {
    // A failed setup must not leave the app (and its connections) keeping the process alive.
    await t.close().catch(() => {});
    throw error;
  }
}

/** The template world's users, projects, domain and keys, made in a running app. */
export async function populateTemplateWorld(t: TestApp): Promise<TemplateWorld> {
  const tag = randomBytes(3).toString('hex');
  const owner = await newCaller(t, `owner-${tag}@acme.test`);
  const developer = await newCaller(t, `dev-${tag}@acme.test`);
  const viewer = await newCaller(t, `viewer-${tag}@acme.test`);
  const outsider = await newCaller(t, `outsider-${tag}@elsewhere.test`);
  const { workspaceId, projectId } = await workspaceWithProject(t, owner);
  const other = await call(t, 'POST', `/v1/workspaces/${workspaceId}/projects`, { as: owner, body: { name: 'Other', environment: 'development' } });
  if (other.statusCode !== 201) throw new Error(`project: ${other.statusCode} ${other.body}`);
  const otherProjectId = other.json().id as string;
  const { projectId: foreignProjectId } = await workspaceWithProject(t, outsider);
  await addMember(t, owner, workspaceId, developer, 'developer');
  await addMember(t, owner, workspaceId, viewer, 'viewer');
  const domain = 'acme.test';
  const created = await createDomain(t.ctx.documents, { workspaceId, name: domain }, t.ctx.now(), t.ctx.services.secrets);
  await markDomainVerified(t.ctx.documents, created._id, 'test fixture', t.ctx.now());
  await connectDomain(t.ctx.documents, created._id, projectId);
  await connectDomain(t.ctx.documents, created._id, otherProjectId);
  return {
    t, owner, developer, viewer, outsider, workspaceId, projectId, otherProjectId, foreignProjectId, domain,
    apiKey: await apiKeyFor(t, owner, projectId),
    otherApiKey: await apiKeyFor(t, owner, otherProjectId),
  };
}

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** A template endpoint call: `projectId` goes into the query unless the path already has one. */
export function templates(t: TestApp, method: Method, path: string, options: { as?: Caller | string | null; projectId?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const url = options.projectId === undefined ? path : `${path}${path.includes('?') ? '&' : '?'}projectId=${encodeURIComponent(options.projectId)}`;
  return call(t, method, url, { as: options.as ?? null, body: options.body, headers: options.headers });
}

export function sendEmail(t: TestApp, apiKey: string, body: unknown, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return t.app.inject({
    method: 'POST',
    url: '/v1/emails',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body),
  });
}

export interface TemplateContentInput {
  name?: string;
  slug: string;
  subject: string;
  html?: string | null;
  text?: string | null;
}

/** Creates a template as `as` (default: the owner) and returns the Template. */
export async function createTemplateAs(world: TemplateWorld, content: TemplateContentInput, as: Caller = world.owner, projectId = world.projectId) {
  const response = await templates(world.t, 'POST', '/v1/templates', { as, projectId, body: { name: content.name ?? content.slug, ...content } });
  if (response.statusCode !== 201) throw new Error(`create template: ${response.statusCode} ${response.body}`);
  return response.json() as TemplateJson;
}

export interface TemplateJson {
  id: string;
  projectId: string;
  name: string;
  slug: string;
  subject: string;
  html: string | null;
  text: string | null;
  revision: number;
  variables: string[];
  createdAt: string;
  updatedAt: string;
}
