// Hostile input against every route of the API: whatever a client sends, the answer is never a
// 5xx, every failure is the spec's envelope with a code the registry knows (and that code's
// status), and no body shows a stack frame or a path of the server's files.
// The routes come from the running fastify app itself, so a route added later without a
// row in ROUTES fails the coverage test below instead of escaping these checks.
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { LightMyRequestResponse } from 'fastify';
import { httpStatusOf } from '../apps/api/error-registry.ts';
import { PAGE_PATHS } from '../apps/dashboard/dashboard.ts';
import { createSession } from '../apps/services/management/sessions.ts';
import { markDomainVerified } from '../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { call, newCaller, PASSWORD, type Caller } from './support/management.ts';
import { servedRoutes } from './support/served-routes.ts';

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');
const KNOWN_CODES = new Set(Object.keys(httpStatusOf));

type Method = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
type Auth = 'none' | 'session' | 'bearer';

interface Fixture {
  t: TestApp;
  dns: TestDnsServer;
  owner: Caller;
  member: Caller;
  workspaceId: string;
  projectId: string;
  sideProjectId: string;
  domainId: string;
  apiKey: string;
  keyToRevoke: string;
  templateId: string;
  templateToDelete: string;
  emailId: string;
  endpointId: string;
  endpointToDelete: string;
  /** Invitations of the owner to the member's workspaces. */
  invitationToAccept: string;
  invitationToDecline: string;
  /** A workspace of the member's that the owner joined (and may leave). */
  memberWorkspaceId: string;
}

interface RouteCase {
  method: Method;
  /** fastify's path, ":name" for parameters. */
  path: string;
  auth: Auth;
  /** A valid value for every path parameter. */
  params: (f: Fixture) => Record<string, string>;
  /** A valid query (the route's required parameters). */
  query?: (f: Fixture) => Record<string, string>;
  /** A valid body: hostile variants replace one field at a time. */
  body?: (f: Fixture) => Record<string, unknown>;
}

const none = () => ({});
const ROUTES: RouteCase[] = [
  { method: 'GET', path: '/healthz', auth: 'none', params: none },
  { method: 'GET', path: '/readyz', auth: 'none', params: none },
  { method: 'GET', path: '/metrics', auth: 'none', params: none },
  { method: 'GET', path: '/v1/openapi.json', auth: 'none', params: none },
  { method: 'GET', path: '/v1/asyncapi.json', auth: 'none', params: none },
  {
    method: 'POST', path: '/v1/emails', auth: 'bearer', params: none,
    body: (f) => ({
      from: 'App <app@bad-input.test>', to: ['owner@bad-input.test'], cc: 'cc@bad-input.test', bcc: ['bcc@bad-input.test'],
      reply_to: 'reply@bad-input.test', subject: 'Hello', text: 'Hi', html: '<p>Hi</p>',
      headers: { 'X-Campaign': 'spring' }, tags: { kind: 'welcome' }, metadata: { order: 42, f: f.projectId },
    }),
  },
  { method: 'GET', path: '/v1/emails', auth: 'bearer', params: none, query: () => ({ limit: '10', status: 'queued' }) },
  { method: 'GET', path: '/v1/emails/:id', auth: 'bearer', params: (f) => ({ id: f.emailId }) },
  { method: 'GET', path: '/v1/projects/:projectId/emails', auth: 'session', params: (f) => ({ projectId: f.projectId }), query: () => ({ limit: '10', status: 'queued' }) },
  { method: 'GET', path: '/v1/projects/:projectId/emails/:emailId', auth: 'session', params: (f) => ({ projectId: f.projectId, emailId: f.emailId }) },
  { method: 'GET', path: '/v1/projects/:projectId/emails/:emailId/message', auth: 'session', params: (f) => ({ projectId: f.projectId, emailId: f.emailId }) },
  {
    method: 'GET', path: '/v1/projects/:projectId/emails/:emailId/message.html', auth: 'session',
    params: (f) => ({ projectId: f.projectId, emailId: f.emailId }), query: () => ({ remote_images: 'on' }),
  },
  // The dashboard (apps/dashboard/): its browser modules, and the page shell at every page address.
  { method: 'GET', path: '/assets/:file', auth: 'none', params: () => ({ file: 'main.ts' }) },
  { method: 'GET', path: '/assets/pages/:file', auth: 'none', params: () => ({ file: 'emails.ts' }) },
  ...PAGE_PATHS.map((path): RouteCase => ({
    method: 'GET', path, auth: 'none',
    params: (f) => Object.fromEntries([...path.matchAll(/:(\w+)/g)].map(([, name]) => [name, name === 'workspaceId' ? f.workspaceId : f.projectId])),
  })),
  { method: 'POST', path: '/v1/session', auth: 'none', params: none, body: (f) => ({ email: f.owner.email, password: PASSWORD }) },
  { method: 'GET', path: '/v1/session', auth: 'session', params: none },
  { method: 'DELETE', path: '/v1/session', auth: 'session', params: none },
  { method: 'POST', path: '/v1/workspaces', auth: 'session', params: none, body: () => ({ name: 'Hostile Inc' }) },
  { method: 'GET', path: '/v1/workspaces', auth: 'session', params: none },
  { method: 'GET', path: '/v1/workspaces/:id', auth: 'session', params: (f) => ({ id: f.workspaceId }) },
  {
    method: 'POST', path: '/v1/workspaces/:id/members', auth: 'session', params: (f) => ({ id: f.workspaceId }),
    body: (f) => ({ email: f.member.email, role: 'viewer' }),
  },
  {
    method: 'PATCH', path: '/v1/workspaces/:id/members/:userId', auth: 'session', params: (f) => ({ id: f.workspaceId, userId: f.owner.userId }),
    body: () => ({ role: 'owner' }),
  },
  // The member leaves (the owner removing themselves would be refused: a workspace keeps an owner).
  { method: 'DELETE', path: '/v1/workspaces/:id/members/:userId', auth: 'session', params: (f) => ({ id: f.memberWorkspaceId, userId: f.owner.userId }) },
  { method: 'GET', path: '/v1/workspaces/:workspaceId/usage', auth: 'session', params: (f) => ({ workspaceId: f.workspaceId }) },
  { method: 'GET', path: '/v1/invitations', auth: 'session', params: none },
  { method: 'POST', path: '/v1/invitations/:id/accept', auth: 'session', params: (f) => ({ id: f.invitationToAccept }) },
  { method: 'DELETE', path: '/v1/invitations/:id', auth: 'session', params: (f) => ({ id: f.invitationToDecline }) },
  {
    method: 'POST', path: '/v1/workspaces/:workspaceId/projects', auth: 'session', params: (f) => ({ workspaceId: f.workspaceId }),
    body: () => ({ name: 'Another', environment: 'development' }),
  },
  { method: 'GET', path: '/v1/workspaces/:workspaceId/projects', auth: 'session', params: (f) => ({ workspaceId: f.workspaceId }) },
  { method: 'GET', path: '/v1/projects/:id', auth: 'session', params: (f) => ({ id: f.projectId }) },
  {
    method: 'POST', path: '/v1/projects/:projectId/webhook-endpoints', auth: 'session', params: (f) => ({ projectId: f.projectId }),
    body: () => ({ url: 'https://hooks.bad-input.test/relay', events: ['email.sent', 'email.bounced'], description: 'hostile input' }),
  },
  { method: 'GET', path: '/v1/projects/:projectId/webhook-endpoints', auth: 'session', params: (f) => ({ projectId: f.projectId }) },
  { method: 'GET', path: '/v1/webhook-endpoints/:id', auth: 'session', params: (f) => ({ id: f.endpointId }) },
  { method: 'GET', path: '/v1/webhook-endpoints/:id/deliveries', auth: 'session', params: (f) => ({ id: f.endpointId }), query: () => ({ limit: '10' }) },
  { method: 'PATCH', path: '/v1/webhook-endpoints/:id', auth: 'session', params: (f) => ({ id: f.endpointId }), body: () => ({ enabled: true, events: ['email.sent'] }) },
  { method: 'POST', path: '/v1/webhook-endpoints/:id/rotate-secret', auth: 'session', params: (f) => ({ id: f.endpointId }) },
  { method: 'DELETE', path: '/v1/webhook-endpoints/:id', auth: 'session', params: (f) => ({ id: f.endpointToDelete }) },
  {
    method: 'GET', path: '/v1/projects/:projectId/stats', auth: 'session', params: (f) => ({ projectId: f.projectId }),
    query: () => ({ from: '2026-11-01T00:00:00Z', to: '2026-11-02T00:00:00Z', granularity: 'hour', groupBy: 'recipient_domain' }),
  },
  {
    method: 'GET', path: '/v1/projects/:projectId/stats/chart.svg', auth: 'session', params: (f) => ({ projectId: f.projectId }),
    query: () => ({ from: '2026-11-01T00:00:00Z', to: '2026-11-08T00:00:00Z', granularity: 'day' }),
  },
  { method: 'GET', path: '/v1/projects/:projectId/outbox', auth: 'session', params: (f) => ({ projectId: f.projectId }), query: () => ({ limit: '10' }) },
  { method: 'GET', path: '/v1/projects/:projectId/outbox/:emailId', auth: 'session', params: (f) => ({ projectId: f.projectId, emailId: f.emailId }) },
  {
    method: 'POST', path: '/v1/workspaces/:workspaceId/domains', auth: 'session', params: (f) => ({ workspaceId: f.workspaceId }),
    body: () => ({ name: 'second.bad-input.test' }),
  },
  { method: 'GET', path: '/v1/workspaces/:workspaceId/domains', auth: 'session', params: (f) => ({ workspaceId: f.workspaceId }) },
  { method: 'GET', path: '/v1/domains/:id', auth: 'session', params: (f) => ({ id: f.domainId }) },
  { method: 'POST', path: '/v1/domains/:id/verify', auth: 'session', params: (f) => ({ id: f.domainId }) },
  // Started, then cancelled: the cancel finds the rotation the start made.
  { method: 'POST', path: '/v1/domains/:id/dkim-rotation', auth: 'session', params: (f) => ({ id: f.domainId }), body: () => ({ selector: 'rotated2027' }) },
  { method: 'DELETE', path: '/v1/domains/:id/dkim-rotation', auth: 'session', params: (f) => ({ id: f.domainId }) },
  { method: 'POST', path: '/v1/domains/:id/projects/:projectId', auth: 'session', params: (f) => ({ id: f.domainId, projectId: f.sideProjectId }) },
  { method: 'DELETE', path: '/v1/domains/:id/projects/:projectId', auth: 'session', params: (f) => ({ id: f.domainId, projectId: f.sideProjectId }) },
  {
    method: 'POST', path: '/v1/projects/:projectId/api-keys', auth: 'session', params: (f) => ({ projectId: f.projectId }),
    body: () => ({ name: 'ci', permissions: ['email:send', 'email:read'] }),
  },
  { method: 'GET', path: '/v1/projects/:projectId/api-keys', auth: 'session', params: (f) => ({ projectId: f.projectId }) },
  { method: 'DELETE', path: '/v1/api-keys/:id', auth: 'session', params: (f) => ({ id: f.keyToRevoke }) },
  {
    method: 'GET', path: '/v1/workspaces/:workspaceId/suppressions', auth: 'session', params: (f) => ({ workspaceId: f.workspaceId }),
    query: () => ({ limit: '10', cursor: 'a@bad-input.test', prefix: 'gone' }),
  },
  {
    method: 'POST', path: '/v1/workspaces/:workspaceId/suppressions', auth: 'session', params: (f) => ({ workspaceId: f.workspaceId }),
    body: () => ({ address: 'blocked@bad-input.test' }),
  },
  { method: 'GET', path: '/v1/workspaces/:workspaceId/suppressions/export', auth: 'session', params: (f) => ({ workspaceId: f.workspaceId }) },
  {
    method: 'DELETE', path: '/v1/workspaces/:workspaceId/suppressions/:address', auth: 'session',
    params: (f) => ({ workspaceId: f.workspaceId, address: 'gone@bad-input.test' }),
  },
  { method: 'GET', path: '/v1/templates', auth: 'session', params: none, query: (f) => ({ projectId: f.projectId, limit: '10' }) },
  {
    method: 'POST', path: '/v1/templates', auth: 'session', params: none, query: (f) => ({ projectId: f.projectId }),
    body: () => ({ name: 'Receipt', slug: 'receipt', subject: 'Your receipt {{number}}', html: '<p>{{number}}</p>', text: 'n {{number}}' }),
  },
  {
    method: 'POST', path: '/v1/templates/preview', auth: 'session', params: none, query: (f) => ({ projectId: f.projectId }),
    body: () => ({ subject: 'Hi {{name}}', html: '<p>{{name}}</p>', text: 'Hi {{name}}', variables: { name: 'Ada' } }),
  },
  { method: 'GET', path: '/v1/templates/:id', auth: 'session', params: (f) => ({ id: f.templateId }), query: (f) => ({ projectId: f.projectId }) },
  {
    method: 'PATCH', path: '/v1/templates/:id', auth: 'session', params: (f) => ({ id: f.templateId }), query: (f) => ({ projectId: f.projectId }),
    body: () => ({ name: 'Welcome', slug: 'welcome', subject: 'Welcome {{name}}', html: '<p>{{name}}</p>', text: 'Hi {{name}}', revision: 1 }),
  },
  {
    method: 'POST', path: '/v1/templates/:id/test', auth: 'session', params: (f) => ({ id: f.templateId }), query: (f) => ({ projectId: f.projectId }),
    body: () => ({ from: 'Relay test <test@bad-input.test>', to: 'qa@bad-input.test', variables: { name: 'Ada' } }),
  },
  { method: 'DELETE', path: '/v1/templates/:id', auth: 'session', params: (f) => ({ id: f.templateToDelete }), query: (f) => ({ projectId: f.projectId }) },
];

/** The template-send shape of POST /v1/emails: a second body for the same route. */
const templateSendBody = () => ({ from: 'app@bad-input.test', to: 'owner@bad-input.test', template: 'welcome', variables: { name: 'Ada', n: 1 } });

// ---------------------------------------------------------------------------------------
// Hostile material

const LONG = 'x'.repeat(100_000);
/** JSON values that each field gets in turn instead of its valid one. */
const HOSTILE_VALUES: Array<[string, unknown]> = [
  ['null', null], ['true', true], ['zero', 0], ['negative', -1], ['fraction', 1.5], ['huge number', 1e308],
  ['unsafe integer', 2 ** 53 + 1], ['empty array', []], ['array of string', ['x']], ['array of nulls', [null, null]],
  ['empty object', {}], ['object', { a: 1 }], ['mongo operator', { $gt: '' }], ['nested __proto__', JSON.parse('{"__proto__":{"polluted":true}}')],
  ['empty string', ''], ['blank string', '   '], ['100k string', LONG], ['NUL', 'a\u0000b'], ['CR LF', 'a\r\nBcc: evil@evil.test'],
  ['LF only', '\n'], ['non-BMP', '\u{1F4A9}\u{1F600}@\u{1D49C}.test'], ['lone surrogate', 'a\uD800b'], ['RTL override', '\u202Eevil'],
  ['markup', '<script>alert(1)</script>'], ['handlebars', '{{#each this}}{{@key}}{{/each}}{{constructor.constructor}}'],
  ['sql', "' OR 1=1 --"], ['percent junk', '%ZZ%00%'], ['address-ish', 'a@b@c'], ['unicode address', 'üser@bücher.example'],
];

/** Whole bodies, as raw bytes and with the content type they are sent with. */
const HOSTILE_BODIES: Array<[string, string | Buffer, string | undefined]> = [
  ['malformed JSON', '{"a":', 'application/json'],
  ['trailing garbage', '{"a":1} x', 'application/json'],
  ['single quotes', "{'a':1}", 'application/json'],
  ['empty body with JSON type', '', 'application/json'],
  ['whitespace body', '   ', 'application/json'],
  ['JSON null', 'null', 'application/json'],
  ['JSON array', '[1,2]', 'application/json'],
  ['JSON string', '"text"', 'application/json'],
  ['JSON number', '12', 'application/json'],
  ['JSON true', 'true', 'application/json'],
  ['__proto__ key', '{"__proto__":{"admin":true}}', 'application/json'],
  ['constructor.prototype key', '{"constructor":{"prototype":{"admin":true}}}', 'application/json'],
  ['duplicate keys', '{"name":"a","name":7}', 'application/json'],
  ['huge number literal', '{"limit":1e999,"revision":123456789012345678901234567890}', 'application/json'],
  ['deeply nested', `${'['.repeat(50_000)}${']'.repeat(50_000)}`, 'application/json'],
  ['deeply nested objects', `${'{"a":'.repeat(5_000)}1${'}'.repeat(5_000)}`, 'application/json'],
  ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 'application/json'],
  ['BOM', '\uFEFF{"a":1}', 'application/json'],
  ['UTF-16 charset', '{"a":1}', 'application/json; charset=utf-16'],
  ['bogus parameters', '{"a":1}', 'application/json;;;charset=="x'],
  ['upper-case type', '{"a":1}', 'APPLICATION/JSON'],
  ['text/plain', 'hello', 'text/plain'],
  ['form', 'name=x&email=y', 'application/x-www-form-urlencoded'],
  ['multipart', '--b\r\nContent-Disposition: form-data; name="a"\r\n\r\n1\r\n--b--\r\n', 'multipart/form-data; boundary=b'],
  ['xml', '<a>1</a>', 'application/xml'],
  ['json-ish suffix', '{"a":1}', 'application/json-patch+json'],
  ['garbage type', '{"a":1}', '\u00ff/\u00fe'],
  ['no content type', '{"a":1}', undefined],
];

/** Raw URL segments for path parameters (already as they appear on the wire). */
const HOSTILE_SEGMENTS: Array<[string, string]> = [
  ['65 characters', 'a'.repeat(65)], ['5000 characters', 'a'.repeat(5000)], ['dot', 'a.b'], ['dot-dot', '..'],
  ['encoded dot-dot', '%2e%2e'], ['encoded slash', 'a%2Fb'], ['space', 'a%20b'], ['NUL', 'a%00b'], ['bad escape', '%ZZ'],
  ['lone percent', '%'], ['truncated UTF-8', '%E0%A4%A'], ['invalid UTF-8', '%FF%FE'], ['emoji', '%F0%9F%92%A9'],
  ['quote', "a'b"], ['markup', '%3Cscript%3E'], ['colon', 'ws_a:usr_b'], ['__proto__', '__proto__'], ['constructor', 'constructor'],
  ['encoded CR LF', 'a%0D%0Ab'], ['plus', 'a+b'],
];

/** Query strings appended to the route's valid one. */
const HOSTILE_QUERIES: string[] = [
  'limit=1&limit=2', 'limit=abc', 'limit=-1', 'limit=0', 'limit=1e3', 'limit=1.5', 'limit=99999999999999999999999',
  'limit=', 'limit', 'limit[]=1', 'limit[a]=1', 'cursor=%00', `cursor=${'c'.repeat(5000)}`, 'cursor=a&cursor=b',
  'projectId=a&projectId=b', 'projectId[]=x', 'unknown=1', '__proto__=x', '__proto__[admin]=1', 'constructor=x',
  'hasOwnProperty=1', '%ZZ=1', 'a=%ZZ', '=', '&&&', 'limit=%E0%A4%A', 'status=bogus', 'status=sent&status=queued',
  'after=2026-02-30T00:00:00Z', 'before=yesterday', `sender=${'s'.repeat(5000)}`, 'recipient=%00',
];

const VALID_TOKEN_SHAPE = 'A'.repeat(43);
const HOSTILE_COOKIES: string[] = [
  'rr_session=', 'rr_session', '=', ';;;', `rr_session=${VALID_TOKEN_SHAPE}`, 'rr_session=%ZZ', 'rr_session="unterminated',
  `rr_session=${'x'.repeat(100_000)}`, 'rr_session=a; rr_session=b', '__proto__=x', 'constructor=x; toString=y',
  'rr_session=%00', `rr_session=${'%41'.repeat(43)}`, 'a=b; rr_session', 'rr_session==x=y',
];

const HOSTILE_AUTHORIZATIONS: string[] = [
  'Bearer', 'Bearer ', 'bearer', 'Basic dXNlcjpwYXNz', 'Token abc', `Bearer ${'x'.repeat(100_000)}`, 'Bearer rr_test_',
  `Bearer rr_live_${VALID_TOKEN_SHAPE}`, `Bearer rr_test_${VALID_TOKEN_SHAPE}`, 'Bearer a b', ',', 'Bearer\trr_test_x', '   ',
  `Bearer rr_test_${'%'.repeat(43)}`, `Bearer rr_test_${VALID_TOKEN_SHAPE} extra`,
];

// ---------------------------------------------------------------------------------------
// The checks

interface Request {
  method: Method;
  url: string;
  headers?: Record<string, string>;
  payload?: string | Buffer;
}


/** "at fn (/path/file.ts:1:2)", "at /path/file.ts:1:2", "at file:///…", or any "\n    at " line. */
const STACK_FRAME = /\n\s+at \S|\bat (?:async )?(?:\S+ \()?(?:file:|node:|\/)[^\s)]*:\d+:\d+/;

interface Failure { what: string; status: number; body: string }

function problemsOf(request: Request, response: LightMyRequestResponse): string | null {
  const status = response.statusCode;
  const body = response.body;
  if (status >= 500) return `status ${status}`;
  if (STACK_FRAME.test(body) || body.includes(REPO_ROOT) || /file:\/\/|node:internal|node_modules|\.ts:\d+/.test(body)) {
    return 'stack frame or server path in the body';
  }
  if (status < 400 || request.method === 'HEAD') return null;
  let parsed: { error?: { code?: unknown; message?: unknown } };
  try {
    parsed = JSON.parse(body);
  } catch {
    return 'error body is not JSON';
  }
  const keys = Object.keys(parsed ?? {});
  if (keys.length !== 1 || keys[0] !== 'error') return 'error body is not {error: …}';
  const { code, message } = parsed.error ?? {};
  if (typeof code !== 'string' || !KNOWN_CODES.has(code)) return `unknown error code ${JSON.stringify(code)}`;
  if (typeof message !== 'string' || message.length === 0) return 'error message is not a non-empty string';
  if (httpStatusOf[code as keyof typeof httpStatusOf] !== status) return `code ${code} sent with status ${status}`;
  if (!String(response.headers['content-type'] ?? '').startsWith('application/json')) return 'error body is not served as JSON';
  return null;
}

async function probe(t: TestApp, request: Request, what: string, failures: Failure[]): Promise<LightMyRequestResponse> {
  // Each send a minute apart: the per-key rate limit would otherwise answer most of them
  // with 429 before admission sees the input.
  if (request.method === 'POST' && (request.url.startsWith('/v1/emails') || /^\/v1\/templates\/[^/?]+\/test/.test(request.url))) t.clock.advance(61_000);
  const response = await t.app.inject({ method: request.method, url: request.url, headers: request.headers, payload: request.payload });
  const problem = problemsOf(request, response);
  if (problem) failures.push({ what: `${request.method} ${request.url.slice(0, 120)} ${what}: ${problem}`, status: response.statusCode, body: response.body.slice(0, 300) });
  return response;
}

function report(failures: Failure[]): void {
  if (failures.length === 0) return;
  const lines = failures.slice(0, 25).map((f) => `  ${f.what}\n    → ${f.status} ${f.body}`);
  assert.unreachable(`${failures.length} hostile request(s) were mishandled:\n${lines.join('\n')}${failures.length > 25 ? '\n  …' : ''}`);
}

function urlOf(route: RouteCase, params: Record<string, string>, query: string): string {
  const path = route.path.replace(/:(\w+)/g, (_, name: string) => params[name]);
  return query ? `${path}?${query}` : path;
}

const queryOf = (values: Record<string, string>) => new URLSearchParams(values).toString();

/** Headers a caller with valid credentials sends for this route (a fresh session for sign-out, so it cannot end the shared one). */
async function credentials(f: Fixture, route: Pick<RouteCase, 'auth' | 'method' | 'path'>): Promise<Record<string, string>> {
  if (route.auth === 'bearer') return { authorization: `Bearer ${f.apiKey}` };
  if (route.auth === 'session') {
    if (route.method === 'DELETE' && route.path.startsWith('/v1/session')) {
      const { token } = await createSession(f.t.ctx.documents, f.owner.userId, f.t.ctx.now());
      return { cookie: `rr_session=${token}` };
    }
    return { cookie: f.owner.cookie };
  }
  return {};
}

/** Every leaf of a sample body up to two levels deep, as key paths. */
function leavesOf(body: Record<string, unknown>): string[][] {
  const out: string[][] = [];
  for (const [key, value] of Object.entries(body)) {
    out.push([key]);
    if (value !== null && typeof value === 'object') for (const inner of Object.keys(value)) out.push([key, inner]);
  }
  return out;
}

function withValue(body: Record<string, unknown>, path: string[], value: unknown): Record<string, unknown> {
  const copy = structuredClone(body) as Record<string, any>;
  let target = copy;
  for (const key of path.slice(0, -1)) target = target[key];
  Object.defineProperty(target, path[path.length - 1], { value, enumerable: true, writable: true, configurable: true });
  return copy;
}

const shapeOf = (route: Pick<RouteCase, 'method' | 'path'>) => `${route.method} ${route.path.replace(/:\w+/g, ':')}`;

// ---------------------------------------------------------------------------------------

const bad = suite<Fixture>('hostile input on every route');

bad.before(async (f) => {
  f.dns = await startDnsServer([{ name: 'hooks.bad-input.test', type: 'A', data: '8.8.8.8' }]);
  // With the processors: the outbox routes read what the sender wrote.
  f.t = await startTestApp({ RELAY_DNS_SERVERS: f.dns.address }, { listen: true, processors: true });
  const t = f.t;
  f.owner = await newCaller(t, 'owner@bad-input.test');
  f.member = await newCaller(t, 'member@bad-input.test');
  const must = async (response: Promise<LightMyRequestResponse>, status: number) => {
    const r = await response;
    if (r.statusCode !== status) throw new Error(`fixture: ${r.statusCode} ${r.body}`);
    return r.json();
  };
  f.workspaceId = (await must(call(t, 'POST', '/v1/workspaces', { as: f.owner, body: { name: 'Bad Input' } }), 201)).id;
  f.projectId = (await must(call(t, 'POST', `/v1/workspaces/${f.workspaceId}/projects`, { as: f.owner, body: { name: 'Main', environment: 'development' } }), 201)).id;
  f.sideProjectId = (await must(call(t, 'POST', `/v1/workspaces/${f.workspaceId}/projects`, { as: f.owner, body: { name: 'Side', environment: 'development' } }), 201)).id;
  f.domainId = (await must(call(t, 'POST', `/v1/workspaces/${f.workspaceId}/domains`, { as: f.owner, body: { name: 'bad-input.test' } }), 201)).id;
  await markDomainVerified(t.ctx.documents, f.domainId, 'test domain', t.ctx.now());
  await must(call(t, 'POST', `/v1/domains/${f.domainId}/projects/${f.projectId}`, { as: f.owner }), 200);
  const keyBody = { name: 'main', permissions: ['email:send', 'email:read'] };
  f.apiKey = (await must(call(t, 'POST', `/v1/projects/${f.projectId}/api-keys`, { as: f.owner, body: keyBody }), 201)).secret;
  f.keyToRevoke = (await must(call(t, 'POST', `/v1/projects/${f.projectId}/api-keys`, { as: f.owner, body: keyBody }), 201)).id;
  const template = (slug: string) => ({ name: slug, slug, subject: 'Welcome {{name}}', html: '<p>{{name}}</p>', text: 'Hi {{name}}' });
  f.templateId = (await must(call(t, 'POST', `/v1/templates?projectId=${f.projectId}`, { as: f.owner, body: template('welcome') }), 201)).id;
  f.templateToDelete = (await must(call(t, 'POST', `/v1/templates?projectId=${f.projectId}`, { as: f.owner, body: template('farewell') }), 201)).id;
  const sent = await t.app.inject({
    method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${f.apiKey}` },
    payload: { from: 'app@bad-input.test', to: 'owner@bad-input.test', subject: 'Hi', text: 'Hi', html: '<p>Hi</p>' },
  });
  if (sent.statusCode !== 202) throw new Error(`fixture email: ${sent.statusCode} ${sent.body}`);
  f.emailId = sent.json().id;
  await waitUntil(() => existsSync(join(f.t.config.dataDir, 'outbox', `${f.emailId}.eml`)), 'the fixture email is in the outbox');
  await must(call(t, 'POST', `/v1/workspaces/${f.workspaceId}/suppressions`, { as: f.owner, body: { address: 'gone@bad-input.test' } }), 201);
  f.memberWorkspaceId = (await must(call(t, 'POST', '/v1/workspaces', { as: f.member, body: { name: 'Member owned' } }), 201)).id;
  const joining = (await must(call(t, 'POST', `/v1/workspaces/${f.memberWorkspaceId}/members`, { as: f.member, body: { email: f.owner.email, role: 'viewer' } }), 201)).id;
  await must(call(t, 'POST', `/v1/invitations/${joining}/accept`, { as: f.owner }), 200);
  for (const which of ['invitationToAccept', 'invitationToDecline'] as const) {
    const inviting = (await must(call(t, 'POST', '/v1/workspaces', { as: f.member, body: { name: `Inviting ${which}` } }), 201)).id;
    f[which] = (await must(call(t, 'POST', `/v1/workspaces/${inviting}/members`, { as: f.member, body: { email: f.owner.email, role: 'viewer' } }), 201)).id;
  }
  const hook = { url: 'https://hooks.bad-input.test/relay', events: ['email.sent'] };
  f.endpointId = (await must(call(t, 'POST', `/v1/projects/${f.projectId}/webhook-endpoints`, { as: f.owner, body: hook }), 201)).id;
  f.endpointToDelete = (await must(call(t, 'POST', `/v1/projects/${f.projectId}/webhook-endpoints`, { as: f.owner, body: hook }), 201)).id;
});

bad.after(async (f) => {
  await f.t.close();
  await f.dns.close();
});

bad('every route the app serves is covered here, and the fixtures make each valid request succeed', async (f) => {
  const served = servedRoutes(f.t);
  const covered = new Set(ROUTES.map(shapeOf));
  const missing = [...served].filter((r) => !r.startsWith('HEAD ') && !covered.has(r));
  const stale = [...covered].filter((r) => !served.has(r));
  assert.equal(missing, [], `routes without hostile-input coverage: ${missing.join(', ')}`);
  assert.equal(stale, [], `ROUTES rows the app does not serve: ${stale.join(', ')}`);
  // Sanity: the valid form of each request gets past validation, or hostile variants would prove nothing.
  for (const route of ROUTES) {
    const response = await f.t.app.inject({
      method: route.method,
      url: urlOf(route, route.params(f), queryOf(route.query?.(f) ?? {})),
      headers: await credentials(f, route),
      ...(route.body ? { payload: route.body(f) } : {}),
    });
    assert.ok(response.statusCode < 400 || response.statusCode === 409, `${route.method} ${route.path}: ${response.statusCode} ${response.body}`);
  }
});

for (const route of ROUTES) {
  const name = `${route.method} ${route.path}`;

  bad(`${name}: garbled credentials`, async (f) => {
    const failures: Failure[] = [];
    const url = urlOf(route, route.params(f), queryOf(route.query?.(f) ?? {}));
    const payload = route.body ? JSON.stringify(route.body(f)) : undefined;
    const json: Record<string, string> = payload === undefined ? {} : { 'content-type': 'application/json' };
    for (const cookie of HOSTILE_COOKIES) await probe(f.t, { method: route.method, url, headers: { ...json, cookie }, payload }, `Cookie ${cookie.slice(0, 40)}`, failures);
    for (const authorization of HOSTILE_AUTHORIZATIONS) {
      await probe(f.t, { method: route.method, url, headers: { ...json, authorization }, payload }, `Authorization ${authorization.slice(0, 40)}`, failures);
    }
    // A live session next to a garbled second cookie, and a browser write from elsewhere.
    const valid = await credentials(f, route);
    if (valid.cookie) await probe(f.t, { method: route.method, url, headers: { ...json, cookie: `${valid.cookie}; rr_session=%ZZ; =;` }, payload }, 'extra cookies', failures);
    for (const origin of ['null', 'http://evil.test', `http://${'o'.repeat(10_000)}.test`, '%ZZ']) {
      await probe(f.t, { method: route.method, url, headers: { ...json, ...valid, origin }, payload }, `Origin ${origin.slice(0, 30)}`, failures);
    }
    report(failures);
  });

  bad(`${name}: hostile path parameters`, async (f) => {
    const failures: Failure[] = [];
    const params = route.params(f);
    const query = queryOf(route.query?.(f) ?? {});
    const headers = await credentials(f, route);
    for (const param of Object.keys(params)) {
      for (const [label, segment] of HOSTILE_SEGMENTS) {
        const url = urlOf(route, { ...params, [param]: segment }, query);
        await probe(f.t, { method: route.method, url, headers }, `${param}=${label}`, failures);
      }
    }
    // Junk after or inside the path, and unsupported methods on it.
    const url = urlOf(route, params, '');
    for (const tail of ['/', '//', '/%ZZ', '%00', '/..%2F..%2Fetc', ';x=1']) await probe(f.t, { method: route.method, url: `${url}${tail}`, headers }, `tail ${tail}`, failures);
    for (const method of ['PUT', 'PATCH', 'DELETE', 'POST'] as const) {
      if (method === route.method) continue;
      const asCaller = await credentials(f, { auth: route.auth, method, path: route.path });
      await probe(f.t, { method, url, headers: asCaller }, 'another method', failures);
    }
    report(failures);
  });

  bad(`${name}: hostile query strings`, async (f) => {
    const failures: Failure[] = [];
    const base = queryOf(route.query?.(f) ?? {});
    const headers = await credentials(f, route);
    const payload = route.body ? JSON.stringify(route.body(f)) : undefined;
    if (payload !== undefined) headers['content-type'] = 'application/json';
    for (const extra of HOSTILE_QUERIES) {
      const url = urlOf(route, route.params(f), [base, extra].filter(Boolean).join('&'));
      await probe(f.t, { method: route.method, url, headers, payload }, `query ${extra.slice(0, 40)}`, failures);
    }
    // Each valid query parameter alone replaced by hostile values.
    for (const key of Object.keys(route.query?.(f) ?? {})) {
      for (const value of ['', '%00', 'x'.repeat(5000), '-1', '1e2', '%F0%9F%92%A9', '[]']) {
        const query = Object.entries(route.query!(f)).map(([k, v]) => `${k}=${k === key ? value : encodeURIComponent(v)}`).join('&');
        await probe(f.t, { method: route.method, url: urlOf(route, route.params(f), query), headers, payload }, `${key}=${value.slice(0, 20)}`, failures);
      }
    }
    report(failures);
  });

  bad(`${name}: hostile bodies`, async (f) => {
    const failures: Failure[] = [];
    const url = urlOf(route, route.params(f), queryOf(route.query?.(f) ?? {}));
    const headers = await credentials(f, route);
    const post = (payload: string | Buffer, contentType: string | undefined, what: string) =>
      probe(f.t, { method: route.method, url, headers: { ...headers, ...(contentType === undefined ? {} : { 'content-type': contentType }) }, payload }, what, failures);
    for (const [label, payload, contentType] of HOSTILE_BODIES) await post(payload, contentType, label);
    const samples = route.body ? [route.body(f)] : [];
    if (route.method === 'POST' && route.path === '/v1/emails') samples.push(templateSendBody());
    for (const sample of samples) {
      for (const path of leavesOf(sample)) {
        for (const [label, value] of HOSTILE_VALUES) await post(JSON.stringify(withValue(sample, path, value)), 'application/json', `body.${path.join('.')} = ${label}`);
        const without = structuredClone(sample) as Record<string, any>;
        if (path.length === 1) delete without[path[0]];
        else delete without[path[0]][path[1]];
        await post(JSON.stringify(without), 'application/json', `without body.${path.join('.')}`);
      }
      const allNull = Object.fromEntries(Object.keys(sample).map((k) => [k, null]));
      await post(JSON.stringify(allNull), 'application/json', 'every field null');
      await post(JSON.stringify({ ...sample, extra: 1 }), 'application/json', 'an extra property');
      await post(`{"__proto__":{"admin":true},${JSON.stringify(sample).slice(1)}`, 'application/json', 'valid body with __proto__');
      await post(`{"constructor":{"prototype":{"admin":true}},${JSON.stringify(sample).slice(1)}`, 'application/json', 'valid body with constructor');
    }
    report(failures);
  });
}

bad('HEAD on every GET route with garbled credentials stays below 500', async (f) => {
  const failures: Failure[] = [];
  for (const route of ROUTES.filter((r) => r.method === 'GET')) {
    const url = urlOf(route, route.params(f), queryOf(route.query?.(f) ?? {}));
    for (const headers of [{}, { cookie: 'rr_session=%ZZ' }, { authorization: 'Bearer' }, await credentials(f, route)]) {
      await probe(f.t, { method: 'HEAD', url, headers }, JSON.stringify(headers).slice(0, 40), failures);
    }
  }
  report(failures);
});

bad('Idempotency-Key garbage on POST /v1/emails stays below 500', async (f) => {
  const failures: Failure[] = [];
  const payload = JSON.stringify({ from: 'app@bad-input.test', to: 'owner@bad-input.test', subject: 'Hi', text: 'Hi' });
  for (const key of ['', ' ', 'k'.repeat(129), 'k'.repeat(100_000), '\u00e9', 'a\u007fb', '%00']) {
    await probe(f.t, {
      method: 'POST', url: '/v1/emails', payload,
      headers: { authorization: `Bearer ${f.apiKey}`, 'content-type': 'application/json', 'idempotency-key': key },
    }, `Idempotency-Key ${key.slice(0, 20)}`, failures);
  }
  report(failures);
});

bad('names and addresses with control characters are refused (400 naming the field); other Unicode is kept', async (f) => {
  const as = { as: f.owner };
  for (const control of ['\u0000', '\r\n', '\t', '\u001b[2J', '\u007f', '\u009b']) {
    const cases: Array<[string, string, Record<string, unknown>, string]> = [
      ['POST', '/v1/workspaces', { name: `Acme${control}Mail` }, 'body.name'],
      ['POST', `/v1/workspaces/${f.workspaceId}/projects`, { name: `P${control}`, environment: 'development' }, 'body.name'],
      ['POST', `/v1/projects/${f.projectId}/api-keys`, { name: `k${control}ey`, permissions: ['email:send'] }, 'body.name'],
      ['POST', `/v1/workspaces/${f.workspaceId}/members`, { email: `m${control}@bad-input.test`, role: 'viewer' }, 'body.email'],
      ['POST', `/v1/workspaces/${f.workspaceId}/suppressions`, { address: `s${control}x@bad-input.test` }, 'body.address'],
    ];
    for (const [method, url, body, field] of cases) {
      const response = await call(f.t, method as 'POST', url, { ...as, body });
      assert.is(response.statusCode, 400, `${url} ${JSON.stringify(body)}: ${response.body}`);
      assert.is(response.json().error.code, 'validation_error');
      assert.match(response.json().error.message, new RegExp(`^${field.replace('.', '\\.')}: `));
    }
  }
  // By a user of its own: the sweeps above create workspaces as the owner, up to the 10 a user may (MANAGEMENT-API.md, Limits).
  const creator = await newCaller(f.t, 'unicode@bad-input.test');
  const unicode = await call(f.t, 'POST', '/v1/workspaces', { as: creator, body: { name: '  Bücher 書店 \u{1F4DA}  ' } });
  assert.is(unicode.statusCode, 201, unicode.body);
  assert.is(unicode.json().name, 'Bücher 書店 \u{1F4DA}');
});

/**
 * Shapes that once got in or broke something later: metadata nested 1,000 deep (admitted, then
 * beyond sqlite's JSON functions in the projection) and 10,000 deep (a 500: the recursive
 * fingerprint overflowed), 400,000 metadata keys in a 6.3 MiB body (admitted after seconds of a
 * blocked event loop), 200,000 custom headers (admitted), and control characters, separators,
 * lone surrogates, BOM and bidi overrides in header-bound fields (admitted). Each is now 400 naming
 * the field and the limit, for direct and template sends. (Limits: INTERFACE-DECISIONS.)
 */
bad('POST /v1/emails: hostile metadata, headers and header characters are 400 naming the field and the limit', async (f) => {
  const failures: Failure[] = [];
  const headers = { authorization: `Bearer ${f.apiKey}`, 'content-type': 'application/json' };
  const direct = JSON.stringify({ from: 'App <app@bad-input.test>', to: 'owner@bad-input.test', subject: 'Hi', text: 'Hi', metadata: '@M', headers: '@H' });
  const template = JSON.stringify({ ...templateSendBody(), metadata: '@M', headers: '@H' });
  const deepObjects = (n: number) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;
  const deepArrays = (n: number) => `{"a":${'['.repeat(n)}1${']'.repeat(n)}}`;
  const manyKeys = (n: number, prefix: string, value: string) => `{${Array.from({ length: n }, (_, i) => `"${prefix}${i}":${value}`).join(',')}}`;
  const cases: Array<[string, string, string, RegExp]> = [
    ['metadata objects 1,000 deep', deepObjects(1_000), '{}', /^body\.metadata(\.a)+: .*metadata nests at most 10 levels/],
    ['metadata objects 10,000 deep', deepObjects(10_000), '{}', /^body\.metadata(\.a)+: .*metadata nests at most 10 levels/],
    ['metadata arrays 1,000 deep', deepArrays(1_000), '{}', /^body\.metadata\.a(\[0\])+: .*metadata nests at most 10 levels/],
    ['metadata arrays 10,000 deep', deepArrays(10_000), '{}', /^body\.metadata\.a(\[0\])+: .*metadata nests at most 10 levels/],
    ['400,000 metadata keys', manyKeys(400_000, 'key', '"value-value"'), '{}', /^body\.metadata: .*at most 1,000 keys/],
    ['400,000 metadata keys one level down', `{"a":${manyKeys(400_000, 'key', '1')}}`, '{}', /^body\.metadata(\.a)?: .*at most 1,000 keys in all/],
    ['a 10,000,000-character metadata string', `{"s":"${'s'.repeat(10_000_000)}"}`, '{}', /^body\.metadata\.s: strings in metadata are at most 2,048 characters/],
    ['200,000 custom headers', '{}', manyKeys(200_000, 'X-H', '"v"'), /^body\.headers: .*at most 50 headers/],
    ['a 1,000,000-character header name', '{}', `{"X-${'n'.repeat(1_000_000)}":"v"}`, /^body\.headers\.X-n+…: header names are at most 128 characters/],
  ];
  for (const [label, metadata, customHeaders, says] of cases) {
    for (const [kind, body] of [['direct', direct], ['template', template]]) {
      const payload = body.replace('"@M"', metadata).replace('"@H"', customHeaders);
      const response = await probe(f.t, { method: 'POST', url: '/v1/emails', headers, payload }, `${kind}: ${label}`, failures);
      const message = response.statusCode === 400 ? String(response.json().error.message) : '';
      if (response.statusCode !== 400 || !says.test(message)) {
        failures.push({ what: `${kind}: ${label}: expected 400 matching ${says}`, status: response.statusCode, body: response.body.slice(0, 300) });
      }
    }
  }
  // Every character the header rule refuses, in every header-bound field (test/send-bounds.int.test.ts has the messages;
  // CR and LF, which the schema refuses with a message of its own, are among HOSTILE_VALUES).
  const refused = [
    ...Array.from({ length: 0x20 }, (_, i) => i).filter((c) => c !== 0x09 && c !== 0x0a && c !== 0x0d), 0x7f, ...Array.from({ length: 0x20 }, (_, i) => 0x80 + i),
    0x2028, 0x2029, 0xd800, 0xdfff, 0xfeff, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069,
  ];
  for (const code of refused) {
    const c = String.fromCharCode(code);
    const fields: Array<[string, Record<string, unknown>, string]> = [
      ['from', { from: `A${c}pp <app@bad-input.test>` }, 'body.from'],
      ['to', { to: [`Own${c}er <owner@bad-input.test>`] }, 'body.to[0]'],
      ['cc', { cc: `c${c}c@bad-input.test` }, 'body.cc'],
      ['bcc', { bcc: [`"B${c}" <bcc@bad-input.test>`] }, 'body.bcc[0]'],
      ['reply_to', { reply_to: `${c}Reply <reply@bad-input.test>` }, 'body.reply_to'],
      ['subject', { subject: `Hi${c}` }, 'body.subject'],
      ['header value', { headers: { 'X-Campaign': `spring${c}` } }, 'body.headers.X-Campaign'],
    ];
    for (const [label, extra, field] of fields) {
      const payload = JSON.stringify({ from: 'app@bad-input.test', to: 'owner@bad-input.test', subject: 'Hi', text: 'Hi', ...extra });
      const response = await probe(f.t, { method: 'POST', url: '/v1/emails', headers, payload }, `${label} with U+${code.toString(16)}`, failures);
      if (response.statusCode !== 400 || !String(response.json().error.message).startsWith(`${field}: must not contain `)) {
        failures.push({ what: `${label} with U+${code.toString(16)}: expected 400 naming ${field}`, status: response.statusCode, body: response.body.slice(0, 300) });
      }
    }
  }
  report(failures);
});

bad('URLs the router cannot decode, and over-long path parameters, are 400 validation_error in the envelope', async (f) => {
  const headers = { cookie: f.owner.cookie };
  for (const url of ['/v1/workspaces/%ZZ', '/v1/workspaces/%E0%A4%A', `/v1/projects/${'p'.repeat(5000)}`, `/v1/emails/${'e'.repeat(101)}`]) {
    const response = await f.t.app.inject({ method: 'GET', url, headers });
    assert.is(response.statusCode, 400, `${url}: ${response.body}`);
    assert.is(response.json().error.code, 'validation_error');
  }
});

/**
 * What inject cannot send: raw bytes on a socket, as a real client (or attacker) writes them.
 * Duplicate Authorization and Cookie headers, a request line with raw junk, obs-fold.
 */
bad('raw HTTP: duplicated and malformed headers on a real socket stay below 500', async (f) => {
  {
    const { port } = new URL(f.t.url!);
    const exchange = (raw: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1', () => socket.end(raw));
        let data = '';
        socket.setEncoding('latin1').on('data', (d: string) => (data += d)).on('end', () => resolve(data)).on('error', reject);
      });
    const json = 'Content-Type: application/json\r\n';
    const requests: Array<[string, string]> = [
      ['two Authorization headers', `GET /v1/emails HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${f.apiKey}\r\nAuthorization: Bearer junk\r\nConnection: close\r\n\r\n`],
      ['two Cookie headers', `GET /v1/session HTTP/1.1\r\nHost: x\r\nCookie: ${f.owner.cookie}\r\nCookie: rr_session=%ZZ\r\nConnection: close\r\n\r\n`],
      ['two Content-Type headers', `POST /v1/workspaces HTTP/1.1\r\nHost: x\r\nCookie: ${f.owner.cookie}\r\n${json}Content-Type: text/plain\r\nContent-Length: 12\r\nConnection: close\r\n\r\n{"name":"x"}`],
      ['two Idempotency-Key headers', `POST /v1/emails HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${f.apiKey}\r\nIdempotency-Key: a\r\nIdempotency-Key: b\r\n${json}Content-Length: 2\r\nConnection: close\r\n\r\n{}`],
      ['two Origin headers', `POST /v1/workspaces HTTP/1.1\r\nHost: x\r\nCookie: ${f.owner.cookie}\r\nOrigin: http://a.test\r\nOrigin: http://b.test\r\n${json}Content-Length: 12\r\nConnection: close\r\n\r\n{"name":"x"}`],
      ['raw non-ASCII in the path', `GET /v1/workspaces/\xe9\xff HTTP/1.1\r\nHost: x\r\nCookie: ${f.owner.cookie}\r\nConnection: close\r\n\r\n`],
      ['latin-1 cookie', `GET /v1/session HTTP/1.1\r\nHost: x\r\nCookie: rr_session=\xe9\xff\r\nConnection: close\r\n\r\n`],
      ['body shorter than its length', `POST /v1/session HTTP/1.1\r\nHost: x\r\n${json}Content-Length: 50\r\nConnection: close\r\n\r\n{"email":`],
      ['chunked junk', `POST /v1/session HTTP/1.1\r\nHost: x\r\n${json}Transfer-Encoding: chunked\r\nConnection: close\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n`],
    ];
    const failures: string[] = [];
    for (const [label, raw] of requests) {
      const answer = await exchange(raw);
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0);
      const body = answer.split('\r\n\r\n').slice(1).join('\r\n\r\n');
      // Node itself answers requests it cannot parse with a bare 400 and closes: not our envelope, but not a 5xx either.
      if (status === 0 && answer === '') continue;
      if (status >= 500 || status === 0) failures.push(`${label}: ${answer.slice(0, 200)}`);
      else if (/\n\s+at \S|node_modules|file:\/\//.test(body) || body.includes(REPO_ROOT)) failures.push(`${label}: stack in ${body.slice(0, 200)}`);
    }
    assert.equal(failures, []);
  }
});

bad.run();
