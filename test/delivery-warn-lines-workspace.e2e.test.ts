// The sender's warn lines about an email's delivery (`delivery delayed`, `delivery hard_bounced`,
// `delivery failed`, `delivery unknown`…) name the email, its workspace and its project, beside
// the recipient's domain and what comes next (`nextAttemptAt` for a deferral): `relay start`
// with JSON logs at the default level, a smarthost that refuses one recipient for good and defers
// another once. Metrics name no tenant (docs/operations.md), so when RelayDeliveryFailureRatio or
// RelayBounceRateWarning fires, these lines, grouped by workspaceId, say whose mail bounces.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';
import { waitUntil } from './support/eventually.ts';
import { linesNaming, startTracedRelay, waitForEmailDetail, type TracedRelay } from './support/traced-relay.ts';

const test = suite<{ sink: SmtpSink; relay: TracedRelay }>('the sender\'s warn lines and the workspace');

test.before(async (ctx) => {
  let deferred = 0;
  // The smarthost refuses one recipient for good and defers another once, as greylisting does.
  ctx.sink = await startSmtpSink({
    onRcptTo: (address) => {
      if (address.address.startsWith('gone@')) return smtpError(550, '5.1.1 No such user');
      if (address.address.startsWith('later@') && deferred++ === 0) return smtpError(451, '4.7.1 Try again later');
    },
  });
  ctx.relay = await startTracedRelay({
    domain: 'warn-workspace.example.test',
    env: { RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`, RELAY_DELIVERY_RETRY_SCALE: '0.001' },
  });
});

test.after(async (ctx) => {
  await ctx.relay?.close();
  await ctx.sink?.close();
});

test('a hard bounce and a deferral are warn lines naming the email, its workspace and project, and what comes next', async ({ relay }) => {
  const { domain, workspaceId, projectId } = relay.setup;
  const send = async (to: string) => {
    const sent = await relay.call('POST', '/v1/emails', { key: true, body: { from: `hello@${domain}`, to, subject: 'Hello', text: 'hi' } });
    assert.is(sent.status, 202, JSON.stringify(sent.body));
    return sent.body.id as string;
  };
  const gone = await send(`gone@${domain}`);
  const later = await send(`later@${domain}`);
  await waitForEmailDetail(relay, gone, (e) => e.status === 'hard_bounced', 'is hard_bounced');
  await waitForEmailDetail(relay, later, (e) => e.status === 'sent' && e.events.some((t: { type: string }) => t.type === 'email.delayed'), 'is sent after a deferral');

  const warnedOf = () => [gone, later].flatMap((id) => linesNaming(relay.lines(), id).filter((line) => line.level >= 40));
  // The outcomes are appended, then logged: the lines follow what the API shows.
  await waitUntil(() => warnedOf().length >= 2, 'both outcomes\' warn lines are written');
  const warned = warnedOf();
  assert.equal(warned.map((line) => line.msg).sort(), ['delivery delayed', 'delivery hard_bounced'], 'one warn line for each outcome');
  assert.ok(warned.find((line) => line.msg === 'delivery delayed')!.nextAttemptAt, 'the deferral says when it is retried');
  assert.equal(
    warned.map((line) => ({ msg: line.msg, emailId: line.emailId, workspaceId: line.workspaceId ?? null, projectId: line.projectId ?? null })),
    [gone, later].map((id) => ({ msg: id === gone ? 'delivery hard_bounced' : 'delivery delayed', emailId: id, workspaceId, projectId })),
  );
});

test.run();
