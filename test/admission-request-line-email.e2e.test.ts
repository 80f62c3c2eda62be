// The request line of a send names the email it admitted, and every answer names its request:
// `relay start` with JSON logs at the default level (info). The request line of `POST /v1/emails`
// answered 202 (queued, suppressed, or a replay under its Idempotency-Key) holds `emailId`,
// `workspaceId` and `projectId` beside its `requestId`, which is the `correlationId` of the
// email's events: em_… is the one identifier the client holds and the request id the one the log
// holds, and this line, written for every email whatever the level, is where they meet without
// the event store (which a log pipeline does not have). Every answer carries its request id in
// `X-Request-Id` (refusals by a hook, 404s and undecodable paths included), so a client that got
// a 500 can quote it and the operator find its request line.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { runRelay } from './support/relay-process.ts';
import { linesNaming, startTracedRelay, waitForEmailDetail, type TracedRelay } from './support/traced-relay.ts';

const test = suite<{ relay: TracedRelay }>('the request line of a send, and the email it admitted');

test.before(async (ctx) => {
  ctx.relay = await startTracedRelay({ domain: 'admission-line.example.test' });
});

test.after(async (ctx) => {
  await ctx.relay?.close();
});

async function correlationIdOf(relay: TracedRelay, emailId: string): Promise<string> {
  const run = await runRelay(['events', '--stream', emailId], relay.env);
  assert.is(run.code, 0, run.stderr);
  const [first] = run.stdout.trim().split('\n').map((line) => JSON.parse(line));
  return first.metadata.correlationId;
}

test('a queued and a suppressed email each find their request line by their id', async ({ relay }) => {
  const { domain, workspaceId } = relay.setup;
  const blocked = await relay.call('POST', `/v1/workspaces/${workspaceId}/suppressions`, { cookie: true, body: { address: `gone@${domain}` } });
  assert.is(blocked.status, 201, JSON.stringify(blocked.body));

  const queued = await relay.call('POST', '/v1/emails', { key: true, body: { from: `hello@${domain}`, to: `ann@${domain}`, subject: 'Hello', text: 'hi' } });
  assert.is(queued.status, 202, JSON.stringify(queued.body));
  const suppressed = await relay.call('POST', '/v1/emails', { key: true, body: { from: `hello@${domain}`, to: `gone@${domain}`, subject: 'Hello', text: 'hi' } });
  assert.is(suppressed.status, 202, JSON.stringify(suppressed.body));
  assert.is(suppressed.body.status, 'suppressed');
  // The pipeline has handled both (the outbox took the first).
  await waitForEmailDetail(relay, queued.body.id, (e) => e.status === 'sent', 'is sent');
  await waitForEmailDetail(relay, suppressed.body.id, (e) => e.status === 'suppressed', 'is suppressed');
  const sendLines = () => relay.lines().filter((l) => l.msg === 'request' && l.route === '/v1/emails' && l.method === 'POST');
  await waitUntil(() => sendLines().length === 2, 'both sends\' request lines are written');

  const found = [];
  for (const email of [queued.body, suppressed.body]) {
    // The link as it stands: through the event store, the request line whose id is the events' correlation id.
    const correlationId = await correlationIdOf(relay, email.id);
    const requestLine = sendLines().find((l) => l.requestId === correlationId);
    assert.ok(requestLine, `the request line of ${email.id} exists (request id ${correlationId}, the correlation id of its events)`);
    found.push({
      status: email.status,
      anyLineNamesIt: linesNaming(relay.lines(), email.id).length > 0,
      requestLineNamesIt: requestLine!.emailId === email.id,
    });
  }
  assert.equal(found, [
    { status: 'queued', anyLineNamesIt: true, requestLineNamesIt: true },
    { status: 'suppressed', anyLineNamesIt: true, requestLineNamesIt: true },
  ]);
  for (const answer of [queued, suppressed]) {
    const line = sendLines().find((l) => l.emailId === answer.body.id)!;
    assert.equal([line.workspaceId, line.projectId, line.status], [workspaceId, relay.setup.projectId, 202]);
    assert.is(answer.headers.get('x-request-id'), line.requestId, 'the answer names its request');
  }
});

test('a replay\'s request line names the email; a refused send\'s names none', async ({ relay }) => {
  const { domain } = relay.setup;
  const body = { from: `hello@${domain}`, to: `ann@${domain}`, subject: 'Replayed', text: 'hi' };
  const headers = { 'idempotency-key': 'tracing-replay-1' };
  const first = await relay.call('POST', '/v1/emails', { key: true, body, headers });
  const again = await relay.call('POST', '/v1/emails', { key: true, body, headers });
  const refused = await relay.call('POST', '/v1/emails', { key: true, body: { ...body, from: 'hello@elsewhere.example' } });
  assert.equal([first.status, again.status, again.body.id, refused.status], [202, 202, first.body.id, 422]);
  const lineOf = (answer: { headers: Headers }) => relay.lines().find((l) => l.msg === 'request' && l.requestId === answer.headers.get('x-request-id'));
  await waitUntil(() => [first, again, refused].every((answer) => lineOf(answer) !== undefined), 'the three request lines are written');
  assert.equal([first, again, refused].map((answer) => lineOf(answer)!.emailId ?? null), [first.body.id, first.body.id, null]);
});

test('every answer carries its request id: a refusal by a hook, a 404, an undecodable path', async ({ relay }) => {
  const answers = [
    await fetch(`${relay.base}/v1/emails`, { method: 'POST', headers: { authorization: 'Bearer rr_test_nope', 'content-type': 'application/json' }, body: '{}' }),
    await fetch(`${relay.base}/v1/no-such-route`),
    await fetch(`${relay.base}/v1/emails/%E0%A4%A`, { headers: { authorization: `Bearer ${relay.setup.apiKey}` } }),
    await fetch(`${relay.base}/healthz`),
  ];
  assert.equal(answers.map((a) => a.status), [401, 404, 400, 200]);
  const ids = answers.map((a) => a.headers.get('x-request-id'));
  for (const id of ids) assert.match(String(id), /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  // Each names the request of its line (a path the router cannot decode writes none).
  const logged = [ids[0], ids[1], ids[3]];
  await waitUntil(() => logged.every((id) => relay.lines().some((l) => l.msg === 'request' && l.requestId === id)), 'each answer\'s request line is written');
});

test.run();
