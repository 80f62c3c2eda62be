// The contract (Authentication 5) carries the dashboard session in a cookie named
// `__Host-rr_session` in production and `rr_session` locally, and with RELAY_ENV=production the
// API reads `__Host-rr_session` alone (domain/management.ts sessionCookieNameFor). The OpenAPI
// document, the same in every environment (test/openapi.int.test.ts), declares both as
// machine-readable alternatives: two apiKey-in-cookie security schemes, `session` (rr_session)
// and `productionSession` (__Host-rr_session), each session operation listing both (OpenAPI 3.1,
// 4.8.10 Security Requirement Object: a list of requirements, any one of which suffices). A
// client generated from the document (or a tester such as Schemathesis or Postman) that sends
// the session under the cookies the operation declares is signed in, in production as
// elsewhere: here against an API started with RELAY_ENV=production.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createUser } from '../apps/services/management/users.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { call, PASSWORD } from './support/management.ts';
import { servedDocument, type OpenApiDocument } from './support/openapi-document.ts';

interface Ctx { t: TestApp; doc: OpenApiDocument }
const test = suite<Ctx>('OpenAPI: the session cookie the document declares, in production');

test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_ENV: 'production', RELAY_DELIVERY: 'mx', RELAY_DASHBOARD_ORIGIN: 'https://dashboard.relay.test' });
  ctx.doc = await servedDocument(ctx.t);
});
test.after(async ({ t }) => {
  await t?.close();
});

test('a client that sends the session under a cookie name the document declares for GET /v1/session is signed in', async ({ t, doc }) => {
  await createUser(t.ctx.documents, { email: 'generated-client@acme.test', password: PASSWORD }, t.ctx.now());
  const login = await call(t, 'POST', '/v1/session', { body: { email: 'generated-client@acme.test', password: PASSWORD } });
  assert.is(login.statusCode, 200, login.body);
  const setCookie = [login.headers['set-cookie'] ?? []].flat().join('\n');
  const token = /^[^=;]+=([A-Za-z0-9_-]{43});/m.exec(setCookie)?.[1];
  assert.ok(token, `a session cookie was set: ${setCookie}`);

  // What a generated client does: take the operation's security requirements, each scheme's cookie name.
  const operation = doc.paths['/v1/session'].get;
  const schemes = operation.security.flatMap((requirement) => Object.keys(requirement)).map((name) => doc.components.securitySchemes[name]);
  const cookieNames = schemes.filter((s) => s.type === 'apiKey' && s.in === 'cookie').map((s) => s.name as string);
  assert.ok(cookieNames.length > 0, 'GET /v1/session documents a cookie scheme');

  const answers = [];
  for (const name of cookieNames) {
    const response = await call(t, 'GET', '/v1/session', { as: `${name}=${token}` });
    answers.push(`${name}: ${response.statusCode} ${response.body.slice(0, 120)}`);
    if (response.statusCode === 200) return;
  }
  assert.unreachable(`no cookie the document declares is the one the API reads in production (__Host-rr_session):\n${answers.join('\n')}`);
});

test.run();
