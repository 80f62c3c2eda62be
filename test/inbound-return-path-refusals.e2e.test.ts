// A report that the feedback SMTP server refuses at RCPT (550) because its return path does not
// verify is counted and logged: `relay start` at debug, an email sent through a smarthost, then a
// complaint to its return path with one character of the MAC changed (as under a secret key Relay
// no longer has) and one to an address that is no return path at all. Each refusal is counted in
// relay_inbound_refused_total by reason (unknown_return_path: Relay's form, a MAC no key verifies;
// not_a_return_path: another form; unknown_email, unknown_recipient), is a debug line naming the
// email and recipient the address claims, and, but for not_a_return_path (mail to made-up
// addresses, which any bounce domain gets), a warn line at most once a minute per reason. A
// secret key dropped too early (docs/operations.md, "The secret key") refuses every report for
// mail sent before it, and its recipients are never suppressed: without these, the only sign
// would be relay_feedback_reports_total going quiet, as on a day without bounces.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { scrape, type Sample } from './support/metrics.ts';
import { arf, deliverReport } from './support/reports.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';
import { waitUntil } from './support/eventually.ts';
import { startTracedRelay, waitForEmailDetail, type TracedRelay } from './support/traced-relay.ts';

const test = suite<{ sink: SmtpSink; relay: TracedRelay }>('a report refused at RCPT, in the log and on /metrics');

test.before(async (ctx) => {
  ctx.sink = await startSmtpSink();
  ctx.relay = await startTracedRelay({
    domain: 'refused-report.example.test',
    env: { RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`, RELAY_LOG_LEVEL: 'debug' },
  });
});

test.after(async (ctx) => {
  await ctx.relay?.close();
  await ctx.sink?.close();
});

const inboundSeries = (samples: Sample[]) => Object.fromEntries(samples
  .filter((s) => /^relay_(inbound_refused|feedback_reports)_total$/.test(s.name))
  .map((s) => [`${s.name}${JSON.stringify(s.labels)}`, s.value]));

test('a complaint whose return path does not verify is counted, named at debug and summed at warn', async ({ relay, sink }) => {
  const { domain } = relay.setup;
  const sent = await relay.call('POST', '/v1/emails', { key: true, body: { from: `hello@${domain}`, to: `ann@${domain}`, subject: 'Hello', text: 'hi' } });
  assert.is(sent.status, 202, JSON.stringify(sent.body));
  const emailId: string = sent.body.id;
  await waitForEmailDetail(relay, emailId, (e) => e.status === 'sent', 'is sent');
  const returnPath = (sink.messages[0].mailFrom as { address: string }).address;
  // The same return path with its MAC wrong (as under a secret key Relay no longer has): one base32 character changed.
  const at = returnPath.indexOf('@');
  const wrongMac = `${returnPath.slice(0, at - 1)}${returnPath[at - 1] === 'a' ? 'b' : 'a'}${returnPath.slice(at)}`;

  const before = inboundSeries(await scrape(relay.base));
  const refusal = await deliverReport(relay.inboundPort, wrongMac, arf({ recipient: `ann@${domain}` })).then(() => null, (error: Error) => error.message);
  assert.match(String(refusal), /550/, 'the report is refused at RCPT');
  const notOurs = await deliverReport(relay.inboundPort, `postmaster@${returnPath.slice(at + 1)}`, arf({ recipient: `ann@${domain}` })).then(() => null, (error: Error) => error.message);
  assert.match(String(notOurs), /550/, 'so is one to an address that is no return path');
  // The positive marker: a report to the right return path, after them, is read and recorded.
  await deliverReport(relay.inboundPort, returnPath, arf({ recipient: `ann@${domain}` }));
  await waitForEmailDetail(relay, emailId, (e) => e.status === 'complained', 'is complained');
  const after = inboundSeries(await scrape(relay.base));

  const moved = Object.fromEntries(Object.keys(after).filter((series) => after[series] !== (before[series] ?? 0)).map((series) => [series, after[series] - (before[series] ?? 0)]));
  assert.equal(moved, {
    'relay_inbound_refused_total{"reason":"unknown_return_path"}': 1,
    'relay_inbound_refused_total{"reason":"not_a_return_path"}': 1,
    'relay_feedback_reports_total{"kind":"complained","effect":"recorded"}': 1,
  });
  const inbound = () => relay.lines().filter((line) => line.part === 'inbound' && line.msg !== 'report received' && !String(line.msg).startsWith('feedback SMTP'));
  await waitUntil(() => inbound().length >= 3, 'the refusals\' lines are written');
  assert.equal(inbound().map((line) => ({ level: line.level, reason: line.reason, emailId: line.emailId ?? null, recipientIndex: line.recipientIndex ?? null, refused: line.refused ?? null })), [
    { level: 20, reason: 'unknown_return_path', emailId, recipientIndex: 0, refused: null },
    { level: 40, reason: 'unknown_return_path', emailId, recipientIndex: 0, refused: 1 },
    { level: 20, reason: 'not_a_return_path', emailId: null, recipientIndex: null, refused: null },
  ]);
});

test.run();
