// Management fixtures for API tests: users made the way an operator makes them, signed in
// through the real POST /v1/session, and a small request helper that carries the cookie.
import type { LightMyRequestResponse } from 'fastify';
import { createUser } from '../../apps/services/management/users.ts';
import { membershipsOf } from '../../apps/services/management/workspaces.ts';
import type { TestApp } from './app.ts';

export const PASSWORD = 'correct horse battery staple';

export interface Caller {
  userId: string;
  email: string;
  /** "rr_session=…", for a Cookie header. */
  cookie: string;
}

export function sessionCookieFrom(response: LightMyRequestResponse, name = 'rr_session'): string {
  const header = response.headers['set-cookie'];
  const all = Array.isArray(header) ? header : header ? [header] : [];
  const line = all.find((c) => c.startsWith(`${name}=`));
  if (!line) throw new Error(`no ${name} cookie in ${JSON.stringify(all)}`);
  return line.split(';')[0];
}

export async function signIn(t: TestApp, email: string, password = PASSWORD): Promise<string> {
  const response = await t.app.inject({ method: 'POST', url: '/v1/session', payload: { email, password } });
  if (response.statusCode !== 200) throw new Error(`sign-in of ${email} failed: ${response.statusCode} ${response.body}`);
  return sessionCookieFrom(response);
}

export async function newCaller(t: TestApp, email: string): Promise<Caller> {
  const user = await createUser(t.ctx.documents, { email, password: PASSWORD }, t.ctx.now());
  return { userId: user._id, email: user.email, cookie: await signIn(t, email) };
}

export interface CallOptions { as?: Caller | string | null; body?: unknown; headers?: Record<string, string> }

export async function call(t: TestApp, method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, options: CallOptions = {}) {
  const cookie = typeof options.as === 'string' ? options.as : options.as?.cookie;
  return t.app.inject({
    method,
    url,
    headers: { ...(cookie ? { cookie } : {}), ...options.headers },
    ...(options.body === undefined ? {} : { payload: options.body as Record<string, unknown> }),
  });
}

/** Asserts the spec's error envelope and returns its code. */
export function errorCode(response: LightMyRequestResponse): string {
  const body = response.json() as { error?: { code?: unknown; message?: unknown } };
  if (typeof body.error?.code !== 'string' || typeof body.error.message !== 'string') {
    throw new Error(`not an error envelope: ${response.statusCode} ${response.body}`);
  }
  return body.error.code;
}

/** Owner-made workspace with one project, for tests that need somewhere to work. */
export async function workspaceWithProject(t: TestApp, owner: Caller, environment: 'development' | 'production' = 'development') {
  const ws = await call(t, 'POST', '/v1/workspaces', { as: owner, body: { name: `Workspace of ${owner.email}` } });
  if (ws.statusCode !== 201) throw new Error(`workspace: ${ws.statusCode} ${ws.body}`);
  const workspaceId = ws.json().id as string;
  const project = await call(t, 'POST', `/v1/workspaces/${workspaceId}/projects`, { as: owner, body: { name: 'Main', environment } });
  if (project.statusCode !== 201) throw new Error(`project: ${project.statusCode} ${project.body}`);
  return { workspaceId, projectId: project.json().id as string };
}

/** Membership by invitation: the owner (or an admin) invites the member's email, the member accepts. */
export async function addMember(t: TestApp, owner: Caller, workspaceId: string, member: Caller, role: string): Promise<void> {
  const invited = await call(t, 'POST', `/v1/workspaces/${workspaceId}/members`, { as: owner, body: { email: member.email, role } });
  if (invited.statusCode !== 201) throw new Error(`invite member: ${invited.statusCode} ${invited.body}`);
  const accepted = await call(t, 'POST', `/v1/invitations/${invited.json().id}/accept`, { as: member });
  if (accepted.statusCode !== 200) throw new Error(`accept invitation: ${accepted.statusCode} ${accepted.body}`);
}

/** A new caller made owner of a workspace a fixture created without a user (deliveryTenant): its membership written directly. */
export async function workspaceOwner(t: TestApp, workspaceId: string, email: string): Promise<Caller> {
  const owner = await newCaller(t, email);
  await membershipsOf(t.ctx.documents).insert({ _id: `${workspaceId}:${owner.userId}`, workspaceId, userId: owner.userId, role: 'owner', createdAt: new Date().toISOString() });
  return owner;
}
