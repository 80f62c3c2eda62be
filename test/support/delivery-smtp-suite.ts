// Delivery through a smarthost (RELAY_DELIVERY=smtp), end to end: POST /v1/emails → event store
// → log → sender consumer group → real SMTP to a real smtp-server on loopback → lifecycle
// events → the email's timeline. DKIM is checked by mailauth (not the signer), with the key
// Relay told the customer to publish, served by a real DNS server. Runs embedded
// (test/delivery-smtp.int.test.ts) and on Kafka + FerretDB (test/delivery-smtp.distributed.int.test.ts).
import { randomBytes } from 'node:crypto';
import { DatabaseSync } from 'node:sqlite';
import PostalMime from 'postal-mime';
import * as assert from 'uvu/assert';
import { parseVerpAddress, VERP_MAC_PURPOSE } from '../../domain/delivery/verp.ts';
import { emailStreamId } from '../../domain/email/events.ts';
import { COLLECTIONS } from '../../apps/services/collections.ts';
import { eventsTopic } from '../../apps/pipeline/topics.ts';
import { embeddedFiles } from '../../apps/runtime.ts';
import { runDeliveryStep } from '../../apps/services/delivery/attempt.ts';
import { commitHoldSwitch, type CommitHoldSwitch } from './commit-hold.ts';
import { processorsCaughtUp, workItemGone } from './markers.ts';
import { startTestApp, type TestApp } from './app.ts';
import { deliveryTenant, detail, dkimResults, send, waitForDetail, type DeliveryTenant } from './delivery.ts';
import { startDnsServer, type TestDnsServer } from './dns-server.ts';
import { waitUntil } from './eventually.ts';
import { skippableSuite } from './skippable-suite.ts';
import { smtpError, startSmtpSink, type DataAnswer, type SmtpSink } from './smtp-sink.ts';

interface Context {
  dns: TestDnsServer;
  sink: SmtpSink;
  /** What the smarthost answers to DATA next (default 250 with a queue id). */
  answers: DataAnswer[];
  t: TestApp;
  tenant: DeliveryTenant;
  /** Holds the embedded stores' commits when set. */
  holds: CommitHoldSwitch;
}

/** Stores of the distributed mode: Kafka and a MongoDB-wire store, in a namespace and database of their own. */
export function distributedEnv(brokers: string, mongoUrl: string): Record<string, string> {
  const run = randomBytes(4).toString('hex');
  const database = new URL(mongoUrl);
  database.pathname = `/relay_delivery_${run}`;
  return { RELAY_KAFKA_BROKERS: brokers, RELAY_MONGODB_URL: database.toString(), RELAY_LOG_NAMESPACE: `delivery_${run}` };
}

export function deliverySmtpSuite(mode: string, storesEnv: () => Record<string, string>, skipReason?: string): void {
const test = skippableSuite<Context>(`delivery through a smarthost [${mode}]`, skipReason);

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
  ctx.answers = [];
  let queued = 0;
  ctx.sink = await startSmtpSink({
    onData: () => ctx.answers.shift() ?? { reply: `2.0.0 Ok: queued as QID${String(++queued).padStart(4, '0')}` },
    // A smarthost that verifies recipients (Postfix's reject_unverified_recipient, a provider's API).
    onRcptTo: (address) => (address.address === 'gone@example.org' ? smtpError(550, '5.1.1 <gone@example.org>: Recipient address rejected: User unknown') : undefined),
  });
  ctx.t = await startTestApp({
    ...storesEnv(),
    RELAY_DELIVERY: 'smtp',
    RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none`,
    RELAY_DELIVERY_RETRY_SCALE: '0.001',
  }, { processors: true, commitHold: (ctx.holds = commitHoldSwitch()).hold });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.dns.setZone(ctx.tenant.zone);
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.sink.close();
  await ctx.dns.close();
});

const messagesFor = (sink: SmtpSink, emailId: string) => sink.messages.filter((m) => m.raw.toString().includes(`Message-ID: <${emailId}@`));

test('a message sent through the API arrives with its headers, BCC only in the envelope, a DKIM signature mailauth passes, and a VERP return path', async (ctx) => {
  const { t, tenant, sink } = ctx;
  const id = await send(t, tenant.key, {
    from: `Äcme Støre <hello@${tenant.domain}>`,
    to: ['Ann <ann@example.org>'],
    cc: 'cc@example.org',
    bcc: 'hidden@example.net',
    reply_to: `support@${tenant.domain}`,
    subject: 'Grüße — your order',
    text: 'Hello Ann',
    html: '<p>Hello <b>Ann</b></p>',
    headers: { 'X-Campaign': 'spring' },
  });
  const final = await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'is sent');
  const arrived = messagesFor(sink, id);
  assert.is(arrived.length, 3, 'one transaction per recipient (each has its own return path)');
  const recipientsByTransaction = arrived.map((m) => m.rcptTo.map((r) => r.address));
  assert.equal(recipientsByTransaction.flat().sort(), ['ann@example.org', 'cc@example.org', 'hidden@example.net']);
  for (const m of arrived) assert.equal(m.raw, arrived[0].raw, 'the same signed bytes go to everyone');

  const parsed = await PostalMime.parse(arrived[0].raw);
  assert.equal(parsed.from, { address: `hello@${tenant.domain}`, name: 'Äcme Støre' });
  assert.equal(parsed.to, [{ address: 'ann@example.org', name: 'Ann' }]);
  assert.equal(parsed.cc, [{ address: 'cc@example.org', name: '' }]);
  assert.equal(parsed.replyTo, [{ address: `support@${tenant.domain}`, name: '' }]);
  assert.is(parsed.subject, 'Grüße — your order');
  assert.is(parsed.messageId, `<${id}@${tenant.domain}>`);
  assert.ok(parsed.date, 'a Date header');
  assert.is(parsed.text?.trim(), 'Hello Ann');
  assert.match(parsed.html ?? '', /<b>Ann<\/b>/);
  assert.equal(parsed.headers.filter((h) => h.key === 'x-campaign').map((h) => h.value), ['spring']);
  assert.not.ok(parsed.headers.some((h) => h.key === 'bcc'), 'no Bcc header');
  assert.not.match(arrived[0].raw.toString(), /hidden@example\.net/, 'the BCC address is nowhere in the message');
  assert.match(arrived[0].raw.toString().split('\r\n\r\n')[0], /Content-Type: multipart\/alternative/);

  const [verdict] = await dkimResults(ctx.dns, arrived[0].raw);
  assert.is(verdict.status.result, 'pass', verdict.info);
  assert.is(verdict.signingDomain, tenant.domain);
  assert.is(verdict.format, 'relaxed/relaxed');
  assert.is(verdict.algo, 'rsa-sha256');

  for (const m of arrived) {
    const mailFrom = m.mailFrom === false ? '' : m.mailFrom.address;
    assert.ok(mailFrom.endsWith(`@bounce.${tenant.domain}`), mailFrom);
    const parsedVerp = parseVerpAddress(mailFrom, (data, mac) => t.ctx.services.secrets.macVerify(VERP_MAC_PURPOSE, data, mac));
    assert.ok('emailId' in parsedVerp && parsedVerp.emailId === id, JSON.stringify(parsedVerp));
    assert.equal(m.dsn, { ret: 'HDRS', envid: id }, 'DSN asked for with the email id as ENVID');
    assert.equal(m.rcptTo[0].args && Object.fromEntries(Object.entries(m.rcptTo[0].args).map(([k, v]) => [k.toUpperCase(), v])), { NOTIFY: 'SUCCESS,FAILURE,DELAY' });
  }

  assert.match(final.providerMessageId, /^QID\d{4}$/, 'the queue id the smarthost named');
  // Every transaction's queue id is kept, with its recipient; the email's field is the first recipient's.
  const sentEntry = final.events.find((e: any) => e.type === 'email.sent');
  const queueIds = sentEntry.payload.recipients.map((r: any) => [r.address, r.providerMessageId]);
  assert.equal(queueIds.map(([address]: string[]) => address), ['ann@example.org', 'cc@example.org']);
  assert.ok(queueIds.every(([, queueId]: string[]) => /^QID\d{4}$/.test(queueId)), JSON.stringify(queueIds));
  assert.is.not(queueIds[0][1], queueIds[1][1], 'one queue id per transaction');
  assert.is(final.providerMessageId, queueIds[0][1]);
  assert.ok(final.sentAt);
  assert.equal(final.events.map((e: any) => e.type), ['email.queued', 'email.processing', 'email.sent']);
  assert.equal(final.recipients.map((r: any) => [r.address, r.status]), [['ann@example.org', 'sent'], ['cc@example.org', 'sent']]);
  assert.not.match(JSON.stringify(final), /hidden@example\.net/);
});

test('a 4xx answer is retried on the schedule: delayed, then sent after the retry', async (ctx) => {
  ctx.answers.push({ error: smtpError(451, '4.3.0 Try again later') });
  const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'bob@example.org', subject: 'Retry me', text: 'hi' });
  const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent', 'is sent after a retry');
  assert.equal(final.events.map((e: any) => e.type), ['email.queued', 'email.processing', 'email.delayed', 'email.processing', 'email.sent']);
  const delayed = final.events.find((e: any) => e.type === 'email.delayed');
  assert.is(delayed.payload.recipients[0].smtpCode, 451);
  assert.ok(delayed.payload.nextAttemptAt, 'the delayed entry says when the next attempt is due');
  assert.is(messagesFor(ctx.sink, id).length, 1, 'delivered once');
});

test('an unknown-user reply from the smarthost at RCPT is a hard bounce, as from the recipient\'s MX: the address is suppressed', async (ctx) => {
  const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'gone@example.org', subject: 'Nobody home', text: 'hi' });
  const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'hard_bounced', 'is hard_bounced');
  const bounce = final.events.find((e: any) => e.type === 'email.bounced');
  assert.is(bounce.payload.bounce_type, 'hard');
  assert.equal([bounce.payload.recipients[0].smtpCode, bounce.payload.recipients[0].enhancedCode], [550, '5.1.1']);
  assert.is(final.failureCode, null);
  const suppressions = ctx.t.stores.documents.collection<{ _id: string; reason: string }>(COLLECTIONS.suppressions);
  await waitUntil(async () => (await suppressions.get(`${ctx.tenant.workspaceId}:gone@example.org`))?.reason === 'hard_bounce', 'gone@example.org is suppressed');
  const next = await ctx.t.app.inject({ method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.tenant.key}` }, payload: { from: `hello@${ctx.tenant.domain}`, to: 'gone@example.org', subject: 'Again', text: 'hi' } });
  assert.is(next.json().status, 'suppressed');
});

test('a 5xx answer to DATA rejects the email; it is not retried', async (ctx) => {
  ctx.answers.push({ error: smtpError(554, '5.7.1 Message refused') });
  const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'carol@example.org', subject: 'Refuse me', text: 'hi' });
  const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'rejected', 'is rejected');
  assert.equal(final.events.map((e: any) => e.type), ['email.queued', 'email.processing', 'email.rejected']);
  assert.is(final.events[2].payload.recipients[0].smtpCode, 554);
  assert.is(final.failureCode, 'provider_rejected');
  // Nothing is scheduled for it any more, and the projector has applied all there is.
  await workItemGone(ctx.t.stores.documents, id);
  await processorsCaughtUp(ctx.t, ['projector']);
  assert.is((await detail(ctx.t, ctx.tenant.key, id)).events.length, 3, 'no later attempt');
  assert.equal((await ctx.t.stores.events.readStream(emailStreamId(id))).map((e) => e.type), ['EmailAccepted', 'DeliveryClaimed', 'DeliveryAttempted']);
});

test('the same event delivered twice and a stale work item send nothing more: one SMTP transaction per email', async (ctx) => {
  const { t, tenant, sink } = ctx;
  const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: 'dave@example.org', subject: 'Once', text: 'only once' });
  await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'is sent');
  // Redelivery, as after a rebalance: the accepted event comes to the sender group again.
  const [accepted] = await t.stores.events.readStream(emailStreamId(id), { maxCount: 1 });
  await t.stores.log.publish(eventsTopic(t.config.logNamespace), [{ key: accepted.streamId, value: JSON.stringify(accepted), headers: { 'event-type': accepted.type, 'event-id': accepted.id } }]);
  // A sender that still holds the first attempt's work item (another instance, a slow poll).
  const stale = { _id: id, _v: 1, step: 'attempt' as const, attempt: 1, dueAt: new Date(0).toISOString(), streamRevision: 0, origin: { correlationId: 'test', causationId: 'test' } };
  const result = await runDeliveryStep({
    events: t.stores.events, emails: t.ctx.services.emails, policy: t.ctx.services.policies.delivery, documents: t.stores.documents,
    secrets: t.ctx.services.secrets, transport: t.ctx.services.transport(), sendRate: t.ctx.services.sendRate, now: () => new Date(),
  }, stale);
  assert.is(result, 'nothing_to_do');
  // The sender's group has handled the redelivered event too.
  await processorsCaughtUp(t, ['sender']);
  await workItemGone(t.stores.documents, id);
  assert.is(messagesFor(sink, id).length, 1);
  assert.equal((await t.stores.events.readStream(emailStreamId(id))).map((e) => e.type), ['EmailAccepted', 'DeliveryClaimed', 'DeliveryAttempted']);
});

// Embedded only: the test holds back the sync of the sqlite commit that holds the claim.
if (mode === 'embedded') {
  test('the claim is durable before the SMTP transaction starts', async (ctx) => {
    const { t, tenant } = ctx;
    const eventsFile = embeddedFiles(t.config.dataDir).events;
    const committed = new DatabaseSync(eventsFile, { readOnly: true });
    const claims = () => (committed.prepare("SELECT count(*) AS n FROM es_events WHERE type = 'DeliveryClaimed'").get() as { n: number }).n;
    const before = claims();
    let release: (() => void) | null = null;
    // The first sync after a new claim was committed waits for the test (the claim is then
    // committed but not durable).
    ctx.holds.set(({ file, stage }) => {
      if (release !== null || stage !== 'sync' || file !== eventsFile || claims() === before) return Promise.resolve();
      return new Promise<void>((resolve) => (release = resolve));
    });
    try {
      const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: 'erin@example.org', subject: 'Claimed first', text: 'hi' });
      await waitUntil(() => release !== null, 'the claim is committed and its sync held');
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.is(messagesFor(ctx.sink, id).length, 0, 'the message went out before its claim was durable');
      ctx.holds.set(null);
      release!();
      await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'is sent once the claim is durable');
      assert.is(messagesFor(ctx.sink, id).length, 1);
    } finally {
      ctx.holds.set(null);
      (release as (() => void) | null)?.();
      committed.close();
    }
  });
}

test('the smarthost down for a while (a minute, scaled): nothing is lost, every email is sent once it is back', async (ctx) => {
  const { t, tenant } = ctx;
  const port = ctx.sink.port;
  const before = ctx.sink.messages;
  await ctx.sink.close();
  ctx.sink.dropConnections();
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push(await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: `down${i}@example.org`, subject: `While down ${i}`, text: 'hi' }));
  // Down for a while: every email has been retried and deferred again at least once.
  const delays = (d: { events: Array<{ type: string }> }) => d.events.filter((e) => e.type === 'email.delayed').length;
  await waitUntil(async () => (await Promise.all(ids.map((id) => detail(t, tenant.key, id)))).every((d) => d.status === 'delayed' && delays(d) >= 2), 'every email is retried while the smarthost is down');
  ctx.sink = await startSmtpSink({ port });
  const back = ctx.sink;
  for (const id of ids) await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'is sent once the smarthost is back', 30_000);
  for (const id of ids) assert.is(messagesFor(back, id).length, 1, `${id} sent exactly once`);
  back.messages.unshift(...before);
});

test.run();
}
