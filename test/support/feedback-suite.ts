// Feedback end to end: an email goes out through a smarthost (its VERP return paths captured
// there), then a real SMTP client (nodemailer) delivers reports to Relay's inbound server at
// those return paths, and the statuses, timeline and suppression list change (a BCC recipient's
// entry and its event never naming the email). Runs embedded
// (test/feedback.int.test.ts) and on Kafka + FerretDB (test/feedback.distributed.int.test.ts).
import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import * as assert from 'uvu/assert';
import { startInbound, type InboundServer } from '../../apps/inbound/inbound-server.ts';
import { COLLECTIONS } from '../../apps/services/collections.ts';
import { removeSuppression } from '../../apps/services/management/suppressions.ts';
import { verpAddress, VERP_MAC_PURPOSE } from '../../domain/delivery/verp.ts';
import { startTestApp, type TestApp } from './app.ts';
import { deliveryTenant, detail, send, waitForDetail, type DeliveryTenant } from './delivery.ts';
import { waitUntil } from './eventually.ts';
import { call, workspaceOwner } from './management.ts';
import { processorsCaughtUp } from './markers.ts';
import { arf, deliverReport, dsn } from './reports.ts';
import { skippableSuite } from './skippable-suite.ts';
import { startSmtpSink, type SmtpSink } from './smtp-sink.ts';

interface Context {
  sink: SmtpSink;
  t: TestApp;
  inbound: InboundServer;
  tenant: DeliveryTenant;
}

export function feedbackSuite(mode: string, storesEnv: () => Record<string, string>, skipReason?: string): void {
  const test = skippableSuite<Context>(`feedback: bounces and complaints [${mode}]`, skipReason);

  test.before(async (ctx) => {
    ctx.sink = await startSmtpSink();
    ctx.t = await startTestApp({ ...storesEnv(), RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none` }, { processors: true });
    ctx.inbound = await startInbound({
      host: '127.0.0.1', port: 0, hostname: 'feedback.relay.test', tlsCertFile: null, tlsKeyFile: null,
      events: ctx.t.stores.events, emails: ctx.t.ctx.services.emails, documents: ctx.t.stores.documents, secrets: ctx.t.ctx.services.secrets, now: () => new Date(),
      onError: () => {},
    });
    ctx.tenant = await deliveryTenant(ctx.t);
  });

  test.after(async (ctx) => {
    await ctx.inbound.stop();
    await ctx.t.close();
    await ctx.sink.close();
  });

  /** Sends an email and returns, per recipient address, the return path its transaction used. */
  async function sendAndCapture(ctx: Context, body: Record<string, unknown>): Promise<{ id: string; returnPath: Record<string, string> }> {
    const id = await send(ctx.t, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, subject: 'Feedback', text: 'hi', ...body });
    await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent', 'is sent');
    const returnPath: Record<string, string> = {};
    for (const m of ctx.sink.messages.filter((m) => m.raw.toString().includes(`<${id}@`))) {
      returnPath[m.rcptTo[0].address] = m.mailFrom === false ? '' : m.mailFrom.address;
    }
    return { id, returnPath };
  }

  const report = (ctx: Context, to: string, raw: string) => deliverReport(ctx.inbound.port, to, raw);

  async function refused(ctx: Context, to: string, raw: string): Promise<string> {
    try {
      await report(ctx, to, raw);
    } catch (error) {
      return String((error as { response?: string }).response ?? (error as Error).message);
    }
    assert.unreachable(`${to} was accepted`);
    return '';
  }

  const suppressionOf = (ctx: Context, address: string) =>
    ctx.t.stores.documents.collection<{ _id: string; reason: string; emailId: string | null }>(COLLECTIONS.suppressions).get(`${ctx.tenant.workspaceId}:${address}`);

  const recipientStatus = async (ctx: Context, id: string, address: string) =>
    (await detail(ctx.t, ctx.tenant.key, id)).recipients.find((r: { address: string }) => r.address === address)?.status;

  test('a hard bounce (DSN failed 5.1.1): hard_bounced, email.bounced in the timeline, the address suppressed; the next send to it is suppressed', async (ctx) => {
    const { id, returnPath } = await sendAndCapture(ctx, { to: ['ann@example.org', 'bob@example.org'] });
    await report(ctx, returnPath['ann@example.org'], dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 <ann@example.org>: Recipient address rejected: User unknown', envelopeId: id }));
    const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'hard_bounced', 'is hard_bounced');
    assert.equal(final.recipients.map((r: any) => [r.address, r.status]), [['ann@example.org', 'hard_bounced'], ['bob@example.org', 'sent']]);
    const bounce = final.events.find((e: any) => e.type === 'email.bounced');
    assert.is(bounce.payload.bounce_type, 'hard');
    assert.is(bounce.payload.source, 'dsn');
    assert.is(bounce.payload.recipients[0].status, '5.1.1');
    await waitUntil(async () => (await suppressionOf(ctx, 'ann@example.org')) !== null, 'ann is on the suppression list');
    const entry = await suppressionOf(ctx, 'ann@example.org');
    assert.is(entry!.reason, 'hard_bounce');
    assert.is(entry!.emailId, id);
    assert.is(await suppressionOf(ctx, 'bob@example.org'), null, 'only the bounced recipient');
    const next = await ctx.t.app.inject({ method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.tenant.key}` }, payload: { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'Again', text: 'hi' } });
    assert.is(next.statusCode, 202);
    assert.is(next.json().status, 'suppressed');
    // An owner or admin can lift it.
    await removeSuppression(ctx.t.stores, ctx.tenant.workspaceId, 'ann@example.org', new Date(), { kind: 'user', userId: 'usr_test' });
    const after = await ctx.t.app.inject({ method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.tenant.key}` }, payload: { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'Lifted', text: 'hi' } });
    assert.is(after.json().status, 'queued');
  });

  test('a soft bounce (failed 4.2.2), a delay and a delivery notice: soft_bounced, delayed, delivered; none suppresses', async (ctx) => {
    const { id, returnPath } = await sendAndCapture(ctx, { to: ['soft@example.org', 'late@example.org', 'fine@example.org'] });
    await report(ctx, returnPath['soft@example.org'], dsn({ recipient: 'soft@example.org', action: 'failed', status: '4.2.2', diagnostic: '452 4.2.2 Mailbox full' }));
    await report(ctx, returnPath['late@example.org'], dsn({ recipient: 'late@example.org', action: 'delayed', status: '4.4.1', diagnostic: 'connection timed out' }));
    await report(ctx, returnPath['fine@example.org'], dsn({ recipient: 'fine@example.org', action: 'delivered', status: '2.0.0' }));
    const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.recipients.every((r: any) => r.status !== 'sent'), 'has every report applied');
    assert.equal(final.recipients.map((r: any) => [r.address, r.status]), [['soft@example.org', 'soft_bounced'], ['late@example.org', 'delayed'], ['fine@example.org', 'delivered']]);
    assert.ok(final.deliveredAt);
    assert.is(final.status, 'soft_bounced', 'the highest in the status order');
    const types = final.events.map((e: any) => e.type);
    for (const type of ['email.bounced', 'email.delayed', 'email.delivered']) assert.ok(types.includes(type), type);
    assert.is(final.events.find((e: any) => e.type === 'email.bounced').payload.bounce_type, 'soft');
    // The suppressor has handled the reports too.
    await processorsCaughtUp(ctx.t, ['suppressor']);
    for (const address of ['soft@example.org', 'late@example.org', 'fine@example.org']) assert.is(await suppressionOf(ctx, address), null, address);
  });

  test('an ARF complaint: complained with its Feedback-Type, and the address suppressed for the complaint', async (ctx) => {
    const { id, returnPath } = await sendAndCapture(ctx, { to: 'angry@example.org' });
    await report(ctx, returnPath['angry@example.org'], arf({ recipient: 'angry@example.org', feedbackType: 'abuse' }));
    const final = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'complained', 'is complained');
    const complaint = final.events.find((e: any) => e.type === 'email.complained');
    assert.is(complaint.payload.complaint_type, 'abuse');
    await waitUntil(async () => (await suppressionOf(ctx, 'angry@example.org'))?.reason === 'complaint', 'suppressed for the complaint');
  });

  test('a BCC recipient\'s hard bounce suppresses it, and nothing about it shows', async (ctx) => {
    const { id, returnPath } = await sendAndCapture(ctx, { to: 'shown@example.org', bcc: 'hidden@example.org' });
    await report(ctx, returnPath['hidden@example.org'], dsn({ recipient: 'hidden@example.org', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 unknown user' }));
    await waitUntil(async () => (await suppressionOf(ctx, 'hidden@example.org')) !== null, 'the BCC address is suppressed');
    const final = await detail(ctx.t, ctx.tenant.key, id);
    assert.is(final.status, 'sent');
    assert.not.match(JSON.stringify(final), /hidden@example\.org/);
    assert.not.ok(final.events.some((e: any) => e.type === 'email.bounced'));
    // The list names the address (it must, to block it), never the email it was a BCC recipient of:
    // every member reads the list, long after the email's BCC became unreadable.
    assert.is((await suppressionOf(ctx, 'hidden@example.org'))!.emailId, null);
    const member = await workspaceOwner(ctx.t, ctx.tenant.workspaceId, `owner-${randomUUID()}@bcc-suppression.test`);
    const exported = await call(ctx.t, 'GET', `/v1/workspaces/${ctx.tenant.workspaceId}/suppressions/export`, { as: member });
    assert.is(exported.statusCode, 200);
    const row = exported.body.split('\r\n').find((line) => line.startsWith('hidden@example.org,'));
    assert.equal(row?.split(',').slice(0, 3), ['hidden@example.org', 'hard_bounce', ''], exported.body);
    const listed = await call(ctx.t, 'GET', `/v1/workspaces/${ctx.tenant.workspaceId}/suppressions?prefix=hidden@example.org`, { as: member });
    assert.equal(listed.json().suppressions.map((s: { address: string; emailId: string | null }) => [s.address, s.emailId]), [['hidden@example.org', null]]);
    // Nor does the list's history: no email, event or report in the event, no link in its metadata.
    const history = () => ctx.t.stores.events.readStream(`suppressions-${ctx.tenant.workspaceId}`);
    await waitUntil(async () => (await history()).some((e) => e.type === 'RecipientSuppressed' && e.data.address === 'hidden@example.org'), 'the addition is recorded');
    const added = (await history()).find((e) => e.type === 'RecipientSuppressed' && e.data.address === 'hidden@example.org')!;
    assert.equal(added.data.by, { kind: 'bcc_recipient_event' });
    const emailEvents = await ctx.t.stores.events.readStream(`email-${id}`);
    const ofTheEmail = [id, ...emailEvents.flatMap((e) => [e.id, e.metadata?.correlationId]).filter((v): v is string => typeof v === 'string')];
    for (const value of [...Object.values(added.metadata ?? {}), JSON.stringify(added.data)].map(String)) {
      for (const link of ofTheEmail) assert.not.ok(value.includes(link), `the suppression event names ${link} of the email: ${value}`);
    }
  });

  test('refused at RCPT: a forged MAC, an unknown email, an address that is no return path; a report about someone else changes nothing', async (ctx) => {
    const { id, returnPath } = await sendAndCapture(ctx, { to: 'target@example.org' });
    const good = returnPath['target@example.org'];
    const [local, domain] = good.split('@');
    const forged = `${local.slice(0, -1)}${local.endsWith('a') ? 'b' : 'a'}@${domain}`;
    const body = dsn({ recipient: 'target@example.org', action: 'failed', status: '5.1.1' });
    assert.match(await refused(ctx, forged, body), /^550/);
    const unknownEmail = verpAddress({ emailId: 'em_AAAAAAAAAAAAAAAAAAAA', recipientIndex: 0, mailFromDomain: domain }, (d) => ctx.t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, d));
    assert.match(await refused(ctx, unknownEmail, body), /^550/);
    const otherIndex = verpAddress({ emailId: id, recipientIndex: 7, mailFromDomain: domain }, (d) => ctx.t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, d));
    assert.match(await refused(ctx, otherIndex, body), /^550/, 'a recipient the email does not have');
    assert.match(await refused(ctx, `postmaster@${domain}`, body), /^550/);
    assert.match(await refused(ctx, 'someone@elsewhere.example', body), /^550/, 'never relays');
    // Accepted at its return path (answered once ingested), but naming another address: nothing
    // is recorded, so nothing can follow from it.
    await report(ctx, good, dsn({ recipient: 'victim@example.org', action: 'failed', status: '5.1.1' }));
    assert.equal((await ctx.t.stores.events.readStream(`email-${id}`)).map((e) => e.type), ['EmailAccepted', 'DeliveryClaimed', 'DeliveryTransactionStarted', 'DeliveryAttempted']);
    await processorsCaughtUp(ctx.t, ['projector', 'suppressor']);
    assert.is(await recipientStatus(ctx, id, 'target@example.org'), 'sent');
    assert.is(await suppressionOf(ctx, 'victim@example.org'), null);
  });

  test('the same report delivered twice is recorded once', async (ctx) => {
    const { id, returnPath } = await sendAndCapture(ctx, { to: 'twice@example.org' });
    const body = dsn({ recipient: 'twice@example.org', action: 'delayed', status: '4.4.7', messageId: `twice.${id}@mx.example.org` });
    await report(ctx, returnPath['twice@example.org'], body);
    await report(ctx, returnPath['twice@example.org'], body);
    await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'delayed', 'is delayed');
    // Each report was answered once ingested: the stream holds all they recorded.
    const stream = await ctx.t.stores.events.readStream(`email-${id}`);
    assert.is(stream.filter((e) => e.type === 'RecipientReported').length, 1);
    assert.is(stream.filter((e) => e.type === 'RecipientReportRepeated').length, 0, 'the same report is not even counted again');
  });

  test('fuzzed reports (truncated MIME, wrong boundaries, huge headers, non-UTF-8, random bytes) never crash the server and change no status', async (ctx) => {
    const { id, returnPath } = await sendAndCapture(ctx, { to: 'fuzz@example.org' });
    const to = returnPath['fuzz@example.org'];
    const valid = dsn({ recipient: 'fuzz@example.org', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 no' });
    // Damaged so that what the report said is gone (a parser may still read a readable bounce
    // out of a lightly damaged one, and then it is right to act on it).
    const head = valid.split('\r\n\r\n')[0];
    let seed = 42;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const noise = (n: number) => Buffer.from(Array.from({ length: n }, () => Math.floor(random() * 256))).toString('latin1');
    const cases = [
      head.slice(0, Math.floor(head.length / 2)),
      `${head}\r\n\r\n--dsn-boundary-x\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mx\r\n`,
      valid.replace(/boundary="[^"]+"/, 'boundary="not-the-one"').replace(/5\.1\.1|550|Action: failed|Undelivered[^\r]*/g, ''),
      `X-Huge: ${'a'.repeat(900_000)}\r\nSubject: x\r\n\r\nhello`,
      `${'X-Many: y\r\n'.repeat(50_000)}\r\nbody`,
      Buffer.from([0xff, 0xfe, 0x00, 0x41, 0xc3, 0x28, 0x0d, 0x0a, 0x0d, 0x0a, 0x80, 0x81]).toString('latin1'),
      'Content-Type: multipart/report; report-type=delivery-status; boundary=x\r\n\r\n--x\r\nContent-Type: message/delivery-status\r\n\r\nFinal-Recipient: rfc822;\r\nAction:\r\n--x',
      'Content-Type: multipart/report; report-type=feedback-report; boundary=y\r\n\r\n--y\r\nContent-Type: message/feedback-report\r\n\r\n--y--',
      '',
      ...Array.from({ length: 20 }, (_, i) => noise(200 + i * 97)),
    ];
    for (const raw of cases) await report(ctx, to, raw).catch(() => {});
    // The server still answers, and a last valid report is still processed.
    assert.is(await recipientStatus(ctx, id, 'fuzz@example.org'), 'sent', 'no fuzzed report changed the status');
    await new Promise<void>((resolve, reject) => {
      const socket = connect(ctx.inbound.port, '127.0.0.1');
      socket.once('data', (greeting) => (String(greeting).startsWith('220') ? resolve() : reject(new Error(String(greeting)))));
      socket.once('error', reject);
    }).finally(() => {});
    await report(ctx, to, valid);
    await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'hard_bounced', 'the valid report is applied');
  });

  test.run();
}
