// POST /v1/emails checks the API key as soon as the headers are in, before the body is read, and
// again once it is: a send whose headers arrive before its key is revoked and whose body arrives
// after (a body may trickle for up to the 30 s request timeout) is refused 401, as MANAGEMENT-API.md
// promises: "a revoked key is refused at once by the process that revoked it".
import { connect } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { markDomainVerified } from '../apps/services/management/domains.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deferred } from './support/eventually.ts';
import { answerOf, head } from './support/raw-http.ts';
import { call, newCaller, workspaceWithProject } from './support/management.ts';

const test = suite<{ t: TestApp }>('a key revoked while the body of a send arrives');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { listen: true });
});
test.after(async (ctx) => {
  await ctx.t.close();
});

test('a send whose body completes after its key was revoked is refused with 401', async ({ t }) => {
  const owner = await newCaller(t, 'owner@slow.test');
  const { workspaceId, projectId } = await workspaceWithProject(t, owner);
  const domain = (await call(t, 'POST', `/v1/workspaces/${workspaceId}/domains`, { as: owner, body: { name: 'slow.test' } })).json();
  await markDomainVerified(t.ctx.documents, domain.id, 'review fixture', t.ctx.now());
  assert.is((await call(t, 'POST', `/v1/domains/${domain.id}/projects/${projectId}`, { as: owner })).statusCode, 200);
  const key = (await call(t, 'POST', `/v1/projects/${projectId}/api-keys`, { as: owner, body: { name: 'k', permissions: ['email:send'] } })).json();

  // Signals when the server has looked the key up (its onRequest authentication).
  const keyRead = deferred();
  const documents = t.ctx.documents as unknown as { collection: (name: string) => { find: (...a: unknown[]) => Promise<unknown> } };
  const original = documents.collection.bind(documents);
  documents.collection = (name: string) => {
    const collection = original(name);
    if (name !== 'api_keys') return collection;
    const find = collection.find.bind(collection);
    return { ...collection, find: async (...args: unknown[]) => { const found = await find(...args); keyRead.resolve(); return found; } } as never;
  };

  const body = Buffer.from(JSON.stringify({ from: 'a@slow.test', to: 'b@slow.test', subject: 'after revocation', text: 'hi' }));
  const { port } = new URL(t.url!);
  const socket = connect(Number(port), '127.0.0.1');
  let raw = '';
  socket.on('data', (chunk) => { raw += chunk.toString('latin1'); });
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.write(head([
    'POST /v1/emails HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${key.secret}`,
    'Content-Type: application/json', `Content-Length: ${body.length}`, 'Connection: close',
  ]));
  socket.write(body.subarray(0, 10));
  await keyRead.promise;
  documents.collection = original;

  const revoked = await call(t, 'DELETE', `/v1/api-keys/${key.id}`, { as: owner });
  assert.is(revoked.statusCode, 200, revoked.body);
  assert.ok(revoked.json().revokedAt);

  socket.write(body.subarray(10));
  await closed;
  const answer = answerOf(raw);
  assert.is(answer.status, 401, `the key was revoked (answered 200) before the send's body arrived, yet: ${answer.status} ${answer.body}`);
});

test.run();
