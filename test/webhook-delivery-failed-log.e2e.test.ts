// A webhook delivery that fails attempt after attempt, and is finally given up, is in the log:
// `relay start` with JSON logs at debug, a receiver that answers every attempt 503, the seven
// attempts' retries scaled down. The end of the delivery without a 2xx is one line at warn
// (`webhook delivery failed: not retried`, seen at the default level) naming the email, its
// workspace and project, the endpoint, the event and its type, how many attempts were made and
// the last result; each failed attempt before it is a line at debug with when the next one is
// due, so that an endpoint down for a day writes one warn line per delivery, not seven. None
// holds the body, the endpoint's URL or its secret. relay_webhook_attempts_total counts results
// without any id (docs/operations.md): these lines answer "the customer never got the webhook for em_…".
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { makeTestCa, startHttpsReceiver, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';
import { waitUntil } from './support/eventually.ts';
import { linesNaming, startTracedRelay, waitForEmailDetail, type LogLine, type TracedRelay } from './support/traced-relay.ts';

const test = suite<{ ca: TestCa; receiver: HttpsReceiver; relay: TracedRelay }>('a webhook delivery given up, in the log');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue(['localhost']));
  // The customer's receiver is down: every attempt gets a 503.
  ctx.receiver.answer = () => ({ status: 503 });
  ctx.relay = await startTracedRelay({
    domain: 'hooks-given-up.example.test',
    env: {
      RELAY_WEBHOOK_ALLOW: `localhost:${ctx.receiver.port}`,
      NODE_EXTRA_CA_CERTS: ctx.ca.caFile,
      // The seven attempts' 31 h of retries in about 6 s.
      RELAY_WEBHOOK_RETRY_SCALE: '0.00005',
      RELAY_LOG_LEVEL: 'debug',
    },
  });
});

test.after(async (ctx) => {
  await ctx.relay?.close();
  await ctx.receiver?.close();
  ctx.ca?.remove();
});

test('the end of a webhook delivery without a 2xx is a warn line naming the email and the endpoint, each retried attempt a debug line', async ({ relay, receiver }) => {
  const endpoint = await relay.call('POST', `/v1/projects/${relay.setup.projectId}/webhook-endpoints`, {
    cookie: true, body: { url: `https://localhost:${receiver.port}/hook`, events: ['email.sent'] },
  });
  assert.is(endpoint.status, 201, JSON.stringify(endpoint.body));
  const sent = await relay.call('POST', '/v1/emails', { key: true, body: { from: `hello@${relay.setup.domain}`, to: `ann@${relay.setup.domain}`, subject: 'Hello', text: 'hi' } });
  assert.is(sent.status, 202, JSON.stringify(sent.body));
  const emailId: string = sent.body.id;

  // The positive marker: the API says the delivery is over, failed, after its seven attempts.
  const email = await waitForEmailDetail(relay, emailId, (e) => e.webhookDeliveries?.[0]?.status === 'failed', 'has its webhook delivery given up');
  const [delivery] = email.webhookDeliveries;
  assert.is(delivery.attemptLogs.length, 7, 'seven attempts, each a 503');
  assert.ok(delivery.attemptLogs.every((a: { httpStatus: number }) => a.httpStatus === 503));
  assert.is(receiver.requests.length, 7);

  // The delivery is recorded, then logged: the line follows the API's answer.
  const ended = (): LogLine | undefined => linesNaming(relay.lines(), emailId).find((line) => line.level >= 40 && line.endpointId === endpoint.body.id);
  await waitUntil(() => ended() !== undefined, `a warn line names ${emailId} and its endpoint ${endpoint.body.id}`);
  const line = ended()!;
  const fields = ['level', 'msg', 'part', 'emailId', 'workspaceId', 'projectId', 'endpointId', 'deliveryId', 'eventId', 'eventType', 'attempts', 'result', 'httpStatus', 'errorCode', 'retried'];
  assert.equal(Object.fromEntries(fields.map((f) => [f, line[f]])), {
    level: 40, msg: 'webhook delivery failed: not retried', part: 'webhooks',
    emailId, workspaceId: relay.setup.workspaceId, projectId: relay.setup.projectId, endpointId: endpoint.body.id, deliveryId: delivery.id,
    eventId: delivery.eventId, eventType: 'email.sent', attempts: 7, result: '5xx', httpStatus: 503, errorCode: 'http_error', retried: false,
  });
  const retried = linesNaming(relay.lines(), emailId).filter((l) => l.msg === 'webhook attempt failed: retried');
  assert.equal(retried.map((l) => [l.level, l.attempts, l.httpStatus, l.endpointId, typeof l.nextAttemptAt]), [1, 2, 3, 4, 5, 6].map((n) => [20, n, 503, endpoint.body.id, 'string']));
  for (const l of [line, ...retried]) assert.not.match(JSON.stringify(l), /localhost|\/hook|"data"/, 'neither the URL nor the body');
});

test.run();
