// Can an analyst trust the event catalog? A real flow, driven only through Relay's interfaces
// (the HTTP API on a socket, delivery through a scripted smarthost, reports through the feedback
// SMTP server, suppressions added and removed over HTTP, a development key's send, a retry, an
// idempotent replay, a body gone past retention), read back only the way analysts read it
// (`relay events export`), and checked against the catalog GET /v1/asyncapi.json serves and the
// pages it points to (docs/analysing-events.md, docs/event-status-rules.md):
// - every type written is in the catalog, and the flow writes every type it lists; each event
//   validates against its message's payload (Ajv) and carries no field the catalog does not list;
// - streams are named as documented, revisions run from 0 without gaps, positions rise, export
//   resumes from a position (exclusive --from, inclusive --to) and --project keeps that project's
//   emails;
// - fields mean what the catalog says (counts, Message-ID, queue ids, return-path reports, causes);
// - a read model written from the catalog's words alone (outcomes per recipient domain) agrees
//   with the deliverability stats Relay serves;
// - rebuilding the emails and deliverability read models (`relay projections rebuild`) gives the
//   same documents and the same stats.
// The defects this review found have tests of their own (test/events-*.int.test.ts).
import { createHash } from 'node:crypto';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { canonicalJson } from '../apps/services/canonical-json.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { loadConfig } from '../infra/config.ts';
import { deliveryTenant } from './support/delivery.ts';
import { waitUntil } from './support/eventually.ts';
import { arf, deliverReport, dsn } from './support/reports.ts';
import { runRelay } from './support/relay-process.ts';
import {
  DEFERRING_DOMAIN, DROPPING_DOMAIN, GREYLISTING_DOMAIN, REFUSING_DOMAIN, allCaughtUp, exportEvents, manage, returnPathFor, returnPathOf, sendOverHttp, startCatalogFlow,
  waitForEmail, type CatalogFlow, type ExportedEvent,
} from './support/catalog-flow.ts';

interface Message { payload: Record<string, any>; headers: Record<string, any>; 'x-relay': { stream: string; schemaVersion: number; timeline?: string[] } }

interface Ctx {
  flow: CatalogFlow;
  catalog: Record<string, Message>;
  events: ExportedEvent[];
  ids: Record<string, string>;
}

const test = suite<Ctx>('the event catalog against a real flow');

const ORDER_HEADERS = { 'X-Campaign': 'autumn' };
const SUPPRESSED_BODY = (from: string) => ({ from, to: 'dora@one.example.org', subject: 'Order 4', text: 'hi' });

test.before(async (ctx) => {
  ctx.flow = await startCatalogFlow({ RELAY_DELIVERY_RETRY_SCALE: '0.01' });
  const { flow } = ctx;
  const from = `Shop <hello@${flow.tenant.domain}>`;
  const catalog = await fetch(`${flow.url}/v1/asyncapi.json`);
  assert.is(catalog.status, 200);
  ctx.catalog = ((await catalog.json()) as { components: { messages: Record<string, Message> } }).components.messages;
  const ids: Record<string, string> = {};
  ctx.ids = ids;

  // 1. To (one refused at RCPT TO), CC and BCC; a delivery notice for one, a delay reported after "sent" for another.
  ids.order = (await sendOverHttp(flow, {
    from, to: ['Ann <Ann@One.Example.org>', `bob@${REFUSING_DOMAIN}`], cc: ['carl@two.example.org'], bcc: ['hidden@one.example.org'],
    subject: 'Order 1', text: 'hi', tags: { kind: 'order' }, metadata: { customer: 'c-1' }, headers: ORDER_HEADERS,
  })).id;
  await waitForEmail(flow, ids.order, (d) => d.recipients[0].status === 'sent' && d.recipients[2].status === 'sent', 'is sent');
  await deliverReport(flow.inbound.port, returnPathOf(flow, ids.order, 'ann@one.example.org'), dsn({ recipient: 'ann@one.example.org', action: 'delivered', status: '2.0.0' }));
  await deliverReport(flow.inbound.port, returnPathOf(flow, ids.order, 'carl@two.example.org'), dsn({ recipient: 'carl@two.example.org', action: 'delayed', status: '4.4.7', diagnostic: '451 4.4.7 timed out' }));

  // 2. One address in To and CC (one copy); delivered, the same news again, then a complaint.
  ids.twice = (await sendOverHttp(flow, { from, to: 'dora@one.example.org', cc: 'dora@one.example.org', subject: 'Order 2', text: 'hi' })).id;
  await waitForEmail(flow, ids.twice, (d) => d.status === 'sent', 'is sent');
  const doraPath = returnPathOf(flow, ids.twice, 'dora@one.example.org');
  await deliverReport(flow.inbound.port, doraPath, dsn({ recipient: 'dora@one.example.org', action: 'delivered', status: '2.0.0', messageId: 'dsn-1@mx.one.example.org' }));
  await deliverReport(flow.inbound.port, doraPath, dsn({ recipient: 'dora@one.example.org', action: 'delivered', status: '2.0.0', messageId: 'dsn-2@mx.one.example.org' }));
  await deliverReport(flow.inbound.port, doraPath, arf({ recipient: 'dora@one.example.org', feedbackType: 'abuse', messageId: 'arf-1@isp.example.org' }));
  await waitForEmail(flow, ids.twice, (d) => d.status === 'complained', 'is complained');

  // 3. Greylisted once (a retry), and a connection cut after the message (delivery unknown); replayed with its Idempotency-Key.
  const retried = { from, to: [`gina@${GREYLISTING_DOMAIN}`, `hal@${DROPPING_DOMAIN}`], subject: 'Order 3', text: 'hi' };
  ids.retried = (await sendOverHttp(flow, retried, { 'idempotency-key': 'order-3' })).id;
  assert.is((await sendOverHttp(flow, retried, { 'idempotency-key': 'order-3' })).id, ids.retried, 'a replay answers the same email');
  await waitForEmail(flow, ids.retried, (d) => d.recipients[0].status === 'sent' && d.recipients[1].status === 'failed', 'is sent and failed');
  // The copy whose fate was unknown did arrive; the greylisted one bounced softly later (a DSN "failed" with a 4.x.x status).
  await deliverReport(flow.inbound.port, returnPathFor(flow, ids.retried, 1), dsn({ recipient: `hal@${DROPPING_DOMAIN}`, action: 'delivered', status: '2.0.0' }));
  await deliverReport(flow.inbound.port, returnPathOf(flow, ids.retried, `gina@${GREYLISTING_DOMAIN}`), dsn({ recipient: `gina@${GREYLISTING_DOMAIN}`, action: 'failed', status: '4.4.1', diagnostic: '421 4.4.1 no answer from host' }));
  await waitForEmail(flow, ids.retried, (d) => d.recipients[0].status === 'soft_bounced' && d.recipients[1].status === 'delivered', 'is soft-bounced and delivered');

  // 4. To the complaining address: suppressed at admission.
  await allCaughtUp(flow);
  ids.suppressed = (await sendOverHttp(flow, SUPPRESSED_BODY(from))).id;

  // 5. A manual block, added and removed over HTTP.
  assert.is((await manage(flow, 'POST', `/v1/workspaces/${flow.tenant.workspaceId}/suppressions`, { address: 'Manual@One.Example.org' })).status, 201);
  assert.is((await manage(flow, 'DELETE', `/v1/workspaces/${flow.tenant.workspaceId}/suppressions/manual@one.example.org`)).status, 200);

  // 6. A development key's send.
  const dev = await deliveryTenant(flow.t, 'dev.example.test', 'development');
  const devSend = await fetch(`${flow.url}/v1/emails`, {
    method: 'POST', headers: { authorization: `Bearer ${dev.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ from: 'app@dev.example.test', to: 'tester@dev.example.test', subject: 'Dev', text: 'hi' }),
  });
  assert.is(devSend.status, 202);
  ids.dev = ((await devSend.json()) as { id: string }).id;

  // 7. Deferred until its body is past retention (7 days): the retry fails with content_expired.
  ids.expired = (await sendOverHttp(flow, { from, to: `ivy@${DEFERRING_DOMAIN}`, subject: 'Order 7', text: 'hi' })).id;
  // Moved on only between attempts (the next one due seconds later), so that no attempt is in flight.
  await waitUntil(async () => {
    const stream = await flow.t.stores.events.readStream(`email-${ids.expired}`);
    const last = stream[stream.length - 1];
    return last?.type === 'DeliveryAttempted' && typeof last.data.nextAttemptAt === 'string' && Date.parse(last.data.nextAttemptAt as string) - flow.t.clock.now().getTime() > 3_000;
  }, 'an attempt is deferred with its next one seconds away', 60_000);
  flow.t.clock.advance(8 * 24 * 3_600_000);
  await waitForEmail(flow, ids.expired, (d) => d.status === 'failed', 'failed');

  await allCaughtUp(flow);
  ctx.events = await exportEvents(flow);
});

test.after(async (ctx) => {
  await ctx.flow?.close();
});

const emailEvents = (ctx: Ctx, name: string) => ctx.events.filter((e) => e.streamId === `email-${ctx.ids[name]}`);

test('every event written is a catalog type, and validates against its payload and headers; every catalog type was written', (ctx) => {
  const ajv = new Ajv({ strict: false, allErrors: true });
  addFormats.default(ajv);
  const check = new Map(Object.entries(ctx.catalog).map(([type, m]) => [type, { payload: ajv.compile(m.payload), headers: ajv.compile(m.headers) }]));
  for (const e of ctx.events) {
    const validators = check.get(e.type);
    assert.ok(validators, `${e.type} is in the catalog`);
    assert.ok(validators!.payload(e), `${e.type} ${e.streamId}@${e.revision}: ${ajv.errorsText(validators!.payload.errors)}`);
    assert.ok(validators!.headers({ 'event-type': e.type, 'event-id': e.id }));
    assert.is(e.metadata.schemaVersion, ctx.catalog[e.type]['x-relay'].schemaVersion, `${e.type}: the schema version the catalog says this Relay writes`);
  }
  assert.equal([...new Set(ctx.events.map((e) => e.type))].sort(), Object.keys(ctx.catalog).sort(), 'the flow wrote every type the catalog lists');
});

/** The paths of `value` that `schema` (JSON Schema as the catalog gives it) does not list. */
function unlisted(schema: Record<string, any>, value: unknown, path: string): string[] {
  if (schema.anyOf || schema.oneOf) {
    const branches: string[][] = (schema.anyOf ?? schema.oneOf).map((branch: Record<string, any>) => unlisted(branch, value, path));
    return branches.reduce((best, b) => (b.length < best.length ? b : best));
  }
  if (schema.allOf) {
    const merged = { type: 'object', properties: Object.assign({}, ...schema.allOf.map((s: Record<string, any>) => s.properties ?? {})) };
    return unlisted(merged, value, path);
  }
  if (Array.isArray(value)) return schema.items ? value.flatMap((v, i) => unlisted(schema.items, v, `${path}[${i}]`)) : [];
  if (value === null || typeof value !== 'object') return [];
  if (schema.type !== 'object' && !schema.properties && !schema.patternProperties) return [];
  const out: string[] = [];
  for (const [key, v] of Object.entries(value)) {
    const listed = schema.properties?.[key]
      ?? Object.entries(schema.patternProperties ?? {}).find(([pattern]) => new RegExp(pattern).test(key))?.[1]
      ?? (typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined);
    if (listed === undefined) out.push(`${path}.${key}`);
    else out.push(...unlisted(listed, v, `${path}.${key}`));
  }
  return out;
}

test('no event carries a field the catalog does not list', (ctx) => {
  const extra = ctx.events.flatMap((e) => unlisted(ctx.catalog[e.type].payload, e, e.type));
  assert.equal([...new Set(extra)], []);
});

test('streams are named as documented; revisions run from 0 in order; positions rise and recordedAt follows them', (ctx) => {
  const revisions = new Map<string, number>();
  let position = 0;
  let recordedAt = '';
  for (const e of ctx.events) {
    const stream = ctx.catalog[e.type]['x-relay'].stream;
    if (stream === 'email-<emailId>') {
      assert.match(e.streamId, /^email-em_[A-Za-z0-9_-]{20}$/);
      if (e.revision === 0) assert.is(e.streamId, `email-${e.data.emailId}`, 'the email stream is named by its email id');
    } else if (stream === 'usage-<workspaceId>-<YYYY-MM>') {
      const admitted = ctx.events.find((a) => a.streamId === `email-${e.data.emailId}` && a.revision === 0)!;
      assert.is(e.streamId, `usage-${admitted.data.workspaceId}-${e.data.occurredAt.slice(0, 7)}`, 'the charge is in its workspace\'s stream of its month');
    } else {
      assert.is(stream, 'suppressions-<workspaceId>');
      assert.is(e.streamId, `suppressions-${e.data.workspaceId}`);
    }
    assert.is(e.revision, (revisions.get(e.streamId) ?? -1) + 1, `${e.streamId}: revisions in order, none missing`);
    revisions.set(e.streamId, e.revision);
    assert.match(e.position, /^[1-9]\d*$/, 'an embedded position is a decimal integer');
    assert.ok(Number(e.position) > position, 'positions rise in the export');
    position = Number(e.position);
    assert.ok(e.recordedAt >= recordedAt, 'recordedAt follows the global order');
    recordedAt = e.recordedAt;
  }
  const kinds = new Set([...revisions.keys()].map((s) => s.replace(/-.*/, '')));
  assert.equal([...kinds].sort(), ['email', 'suppressions', 'usage']);
});

test('export resumes from a position: --to P then --from P is the whole export, once; --project keeps that project\'s emails', async (ctx) => {
  const middle = ctx.events[Math.floor(ctx.events.length / 2)].position;
  const head = await exportEvents(ctx.flow, ['--to', middle]);
  const tail = await exportEvents(ctx.flow, ['--from', middle]);
  assert.is(head[head.length - 1].position, middle, '--to is inclusive');
  assert.ok(Number(tail[0].position) > Number(middle), '--from is exclusive');
  assert.equal([...head, ...tail].map((e) => e.id), ctx.events.map((e) => e.id));
  const project = await exportEvents(ctx.flow, ['--project', ctx.flow.tenant.projectId]);
  const ofProject = new Set(ctx.events.filter((e) => e.revision === 0 && e.data.projectId === ctx.flow.tenant.projectId).map((e) => e.streamId));
  assert.equal(project.map((e) => e.id), ctx.events.filter((e) => ofProject.has(e.streamId)).map((e) => e.id));
  // From the middle, with the project: also the later events of emails accepted before it.
  const late = await exportEvents(ctx.flow, ['--from', middle, '--project', ctx.flow.tenant.projectId]);
  assert.equal(late.map((e) => e.id), tail.filter((e) => ofProject.has(e.streamId)).map((e) => e.id));
});

test('fields mean what the catalog says', async (ctx) => {
  const { flow } = ctx;
  // Admission and its charge.
  for (const [name, counts] of Object.entries({ order: [2, 1, 1], twice: [1, 1, 0], retried: [2, 0, 0], suppressed: [1, 0, 0], dev: [1, 0, 0], expired: [1, 0, 0] })) {
    const [admitted] = emailEvents(ctx, name);
    assert.equal([admitted.data.toAddresses.length, admitted.data.ccAddresses.length, admitted.data.bccCount], counts, `${name}: To, CC, BCC counts`);
    assert.is(admitted.data.recipientCount, counts[0] + counts[1] + counts[2], 'recipientCount is To + CC + BCC');
    assert.is(admitted.data.emailId, ctx.ids[name]);
    const charges = ctx.events.filter((e) => e.type === 'RecipientsCharged' && e.data.emailId === ctx.ids[name]);
    if (admitted.type === 'EmailSuppressed') {
      assert.is(charges.length, 0, 'a suppressed send is not charged');
      continue;
    }
    assert.is(charges.length, 1, `${name}: charged once (a replay adds nothing)`);
    assert.is(charges[0].data.recipients, admitted.data.recipientCount);
    assert.is(charges[0].data.fingerprint, admitted.data.fingerprint);
    assert.is(charges[0].data.apiKeyId, admitted.data.apiKeyId);
    assert.is(charges[0].data.developmentKey, name === 'dev');
    assert.is(admitted.data.testMode, name === 'dev');
  }
  // The fingerprint is keyed (a MAC under the secret key), not the body's plain sha256.
  const [suppressedSend] = emailEvents(ctx, 'suppressed');
  assert.match(suppressedSend.data.fingerprint, /^[0-9a-f]{64}$/);
  assert.is.not(suppressedSend.data.fingerprint, createHash('sha256').update(canonicalJson(SUPPRESSED_BODY(`Shop <hello@${flow.tenant.domain}>`))).digest('hex'));
  const [order] = emailEvents(ctx, 'order');
  assert.equal(order.data.toAddresses, ['ann@one.example.org', `bob@${REFUSING_DOMAIN}`], 'normalized addresses');
  assert.equal(order.data.to, ['Ann <Ann@One.Example.org>', `bob@${REFUSING_DOMAIN}`], 'mailboxes as written');
  assert.is(order.data.fromDomain, flow.tenant.domain);
  assert.equal(order.data.headers, ORDER_HEADERS);
  assert.equal(emailEvents(ctx, 'retried')[0].data.idempotencyKey, 'order-3');
  assert.is(emailEvents(ctx, 'retried').filter((e) => e.type === 'EmailAccepted').length, 1, 'a replay writes nothing');

  // The attempt: Message-ID and queue ids as the smarthost saw and gave them; BCC by index, without address.
  const attempted = emailEvents(ctx, 'order').find((e) => e.type === 'DeliveryAttempted')!;
  const copies = flow.sink.messages.filter((m) => m.raw.toString().includes(`<${ctx.ids.order}@`));
  assert.ok(copies.every((m) => m.raw.toString().includes(`Message-ID: <${attempted.data.messageId}>`)), 'messageId is the Message-ID sent');
  assert.equal(attempted.data.recipients.map((r: any) => [r.index, r.address, r.status]), [
    [0, 'ann@one.example.org', 'sent'], [1, `bob@${REFUSING_DOMAIN}`, 'hard_bounced'], [2, 'carl@two.example.org', 'sent'], [3, null, 'sent'],
  ]);
  const started = emailEvents(ctx, 'order').filter((e) => e.type === 'DeliveryTransactionStarted').flatMap((e) => e.data.recipients).sort();
  assert.equal(started, [0, 1, 2, 3], 'a transaction began for each recipient');
  assert.is(attempted.data.providerMessageId, attempted.data.recipients[0].providerMessageId, 'the email\'s queue id is the first visible recipient\'s');
  assert.match(attempted.data.providerMessageId, /^Q\d{6}$/, 'as the smarthost\'s 250 named it');

  // Reports: recorded per index of the one copy, the repeat apart, a complaint with its type.
  const reports = emailEvents(ctx, 'twice').filter((e) => e.type.startsWith('RecipientReport'));
  assert.equal(reports.map((e) => [e.type, e.data.recipientIndex, e.data.outcome]), [
    ['RecipientReported', 0, 'delivered'], ['RecipientReported', 1, 'delivered'],
    ['RecipientReportRepeated', 0, 'delivered'], ['RecipientReportRepeated', 1, 'delivered'],
    ['RecipientReported', 0, 'complained'], ['RecipientReported', 1, 'complained'],
  ]);
  // reportId identifies the finding (a hash), not the report by its Message-ID; each report its own.
  assert.ok(reports.every((e) => /^[A-Za-z0-9_-]{32}$/.test(e.data.reportId)), 'reportId: 32 base64url characters');
  assert.is(new Set(reports.filter((e) => e.data.recipientIndex === 0).map((e) => e.data.reportId)).size, 3, 'each report (and finding) its own reportId');
  assert.ok(!JSON.stringify(reports).includes('dsn-1@mx.one.example.org'), 'the report\'s Message-ID is not kept');
  const complaint = reports.find((e) => e.data.outcome === 'complained')!;
  assert.equal([complaint.data.format, complaint.data.complaintType, complaint.data.status], ['arf', 'abuse', null]);
  const delay = emailEvents(ctx, 'order').find((e) => e.type === 'RecipientReported' && e.data.outcome === 'delayed')!;
  assert.equal([delay.data.recipientIndex, delay.data.format, delay.data.status], [2, 'dsn', '4.4.7'], 'the status code as normalized');

  // Suppressions: by whom, the event and the report that called for them.
  const byId = new Map(ctx.events.map((e) => [e.id, e]));
  const suppressions = ctx.events.filter((e) => e.streamId === `suppressions-${flow.tenant.workspaceId}`);
  // The automatic blocks (in the order the suppressor met their causes), then the manual block and its removal.
  assert.equal(suppressions.slice(0, 2).map((e) => [e.type, e.data.address, e.data.reason, e.data.by.kind]).sort(), [
    ['RecipientSuppressed', `bob@${REFUSING_DOMAIN}`, 'hard_bounce', 'email_event'],
    ['RecipientSuppressed', 'dora@one.example.org', 'complaint', 'email_event'],
  ]);
  assert.equal(suppressions.slice(2).map((e) => [e.type, e.data.address, e.data.reason, e.data.by.kind]), [
    ['RecipientSuppressed', 'manual@one.example.org', 'manual', 'user'],
    ['RecipientUnsuppressed', 'manual@one.example.org', 'manual', 'user'],
  ]);
  for (const s of suppressions.filter((e) => e.data.by.kind === 'email_event')) {
    const cause = byId.get(s.data.by.eventId)!;
    assert.ok(cause && ['DeliveryAttempted', 'RecipientReported'].includes(cause.type), 'by.eventId names the DeliveryAttempted or RecipientReported');
    assert.is(cause.streamId, `email-${s.data.by.emailId}`);
    assert.is(s.data.by.reportId, cause.type === 'RecipientReported' ? cause.data.reportId : null, 'by.reportId is the report\'s, when a report called for it');
    assert.is(s.metadata.causationId, cause.id, 'its cause is that event');
  }
  assert.equal(suppressions.filter((e) => e.data.by.kind === 'user').map((e) => e.data.by.userId), [flow.owner.userId, flow.owner.userId]);
  const [suppressedEmail] = emailEvents(ctx, 'suppressed');
  assert.equal(suppressedEmail.data.suppressedRecipients, [{ address: 'dora@one.example.org', reason: 'complaint' }]);
  assert.is(emailEvents(ctx, 'suppressed').length, 1, 'no event follows EmailSuppressed');

  // Failures: delivery unknown in the attempt, content_expired in DeliveryFailed.
  const cut = emailEvents(ctx, 'retried').filter((e) => e.type === 'DeliveryAttempted').flatMap((e) => e.data.recipients).find((r: any) => r.index === 1);
  assert.equal([cut.status, cut.failureCode], ['failed', 'delivery_unknown']);
  const expired = emailEvents(ctx, 'expired').find((e) => e.type === 'DeliveryFailed')!;
  assert.equal([expired.data.failureCode, expired.data.recipients], ['content_expired', [{ index: 0, address: `ivy@${DEFERRING_DOMAIN}` }]]);

  // Every event's causation is its request or an event exported before it (reports: their SMTP session).
  const seen = new Set<string>();
  for (const e of ctx.events) {
    const { correlationId, causationId } = e.metadata;
    assert.ok(causationId === correlationId || seen.has(causationId) || (correlationId.startsWith('inbound-') && causationId.startsWith('smtp-')), `${e.type} ${e.streamId}@${e.revision}: its cause is known`);
    seen.add(e.id);
  }

  // Timelines: only entries the catalog says the stream's event types give.
  for (const name of Object.keys(ctx.ids).filter((n) => n !== 'dev')) {
    const response = await fetch(`${flow.url}/v1/emails/${ctx.ids[name]}`, { headers: { authorization: `Bearer ${flow.tenant.key}` } });
    const timeline = ((await response.json()) as { events: Array<{ type: string }> }).events.map((e) => e.type);
    const allowed = new Set(emailEvents(ctx, name).flatMap((e) => ctx.catalog[e.type]['x-relay'].timeline ?? []));
    assert.equal(timeline.filter((type) => !allowed.has(type)), [], `${name}: timeline entries the catalog gives for its events`);
  }
});

// docs/event-status-rules.md, Precedence.
const RANK: Record<string, number> = {
  queued: 0, simulated: 0, processing: 1, sent: 2, delayed: 3, delivered: 4, soft_bounced: 5, failed: 5, rejected: 6, hard_bounced: 6, suppressed: 7, complained: 8,
};
const COUNTED: Record<string, string> = {
  queued: 'accepted', suppressed: 'suppressed', sent: 'sent', delivered: 'delivered', delayed: 'delayed', soft_bounced: 'soft_bounced',
  hard_bounced: 'hard_bounced', complained: 'complained', rejected: 'rejected', failed: 'failed',
};
const FINAL = new Set(['sent', 'delivered', 'failed', 'rejected', 'hard_bounced', 'soft_bounced', 'complained', 'suppressed']);

/**
 * Outcome counts per recipient domain, from docs/event-status-rules.md alone: each visible
 * recipient (To, CC) counts once per outcome, when its status first becomes it; the sender's
 * outcomes replace, reports only move up (always past failed), reportedFirst counts the sender's
 * own status first; delivered without sent counts as sent too.
 */
function countsFromCatalog(events: ExportedEvent[], projectId: string): Map<string, Record<string, number>> {
  const counts = new Map<string, Record<string, number>>();
  const emails = new Map<string, { project: string; domains: string[]; status: string[]; done: boolean[]; reached: Array<Set<string>> }>();
  const count = (domain: string, outcome: string) => {
    const c = counts.get(domain) ?? {};
    c[outcome] = (c[outcome] ?? 0) + 1;
    counts.set(domain, c);
  };
  for (const e of events.filter((x) => x.streamId.startsWith('email-'))) {
    if (e.type === 'EmailAccepted' || e.type === 'EmailSuppressed') {
      const visible = [...e.data.toAddresses, ...e.data.ccAddresses] as string[];
      emails.set(e.streamId, { project: e.data.projectId, domains: visible.map((a) => a.slice(a.lastIndexOf('@') + 1).toLowerCase()), status: visible.map(() => ''), done: visible.map(() => false), reached: visible.map(() => new Set()) });
    }
    const email = emails.get(e.streamId)!;
    const become = (i: number, status: string) => {
      if (i >= email.status.length) return; // BCC: never counted
      if (FINAL.has(status)) email.done[i] = true;
      if (email.status[i] === status) return;
      email.status[i] = status;
      const outcome = COUNTED[status];
      if (!outcome || email.reached[i].has(outcome)) return;
      email.reached[i].add(outcome);
      if (email.project === projectId) count(email.domains[i], outcome);
      if (outcome === 'delivered' && !email.reached[i].has('sent')) {
        email.reached[i].add('sent');
        if (email.project === projectId) count(email.domains[i], 'sent');
      }
    };
    const upFrom = (current: string, reported: string) => (current === 'failed' || RANK[reported] > RANK[current] ? reported : current);
    switch (e.type) {
      case 'EmailAccepted': email.status.forEach((_, i) => become(i, 'queued')); break;
      case 'EmailSuppressed': email.status.forEach((_, i) => become(i, 'suppressed')); break;
      case 'DeliveryClaimed': email.status.forEach((s, i) => { if (!email.done[i] && !FINAL.has(s)) become(i, 'processing'); }); break;
      case 'DeliveryAttempted':
      case 'DeliveryFailed':
        for (const r of e.data.recipients) {
          const own = e.type === 'DeliveryFailed' ? 'failed' : r.status;
          if (r.reportedFirst && r.index < email.status.length) {
            const shown = upFrom(own, email.status[r.index]);
            become(r.index, own);
            become(r.index, shown);
          } else become(r.index, own);
        }
        break;
      case 'RecipientReported':
        if (e.data.outcome !== 'undetermined' && e.data.recipientIndex < email.status.length) become(e.data.recipientIndex, upFrom(email.status[e.data.recipientIndex], e.data.outcome));
        break;
      default: break;
    }
  }
  return counts;
}

async function statsByDomain(ctx: Ctx): Promise<Map<string, Record<string, number>>> {
  const times = ctx.events.map((e) => e.data.occurredAt as string).filter(Boolean).sort();
  const from = new Date(Date.parse(times[0]) - 3_600_000).toISOString();
  const to = new Date(Date.parse(times[times.length - 1]) + 3_600_000).toISOString();
  const { status, json } = await manage(ctx.flow, 'GET', `/v1/projects/${ctx.flow.tenant.projectId}/stats?from=${from}&to=${to}&granularity=hour&groupBy=recipient_domain`);
  assert.is(status, 200, JSON.stringify(json));
  const byDomain = new Map<string, Record<string, number>>();
  for (const point of json.series as Array<Record<string, any>>) {
    const c = byDomain.get(point.group) ?? {};
    for (const [k, v] of Object.entries(point)) if (typeof v === 'number' && v > 0) c[k] = (c[k] ?? 0) + v;
    byDomain.set(point.group, c);
  }
  return byDomain;
}

const sorted = (m: Map<string, Record<string, number>>) => Object.fromEntries([...m].sort(([a], [b]) => a.localeCompare(b)).map(([d, c]) => [d, Object.fromEntries(Object.entries(c).sort())]));

test('a read model built from the catalog\'s words alone agrees with the deliverability stats', async (ctx) => {
  const mine = sorted(countsFromCatalog(ctx.events, ctx.flow.tenant.projectId));
  assert.ok(Object.keys(mine).length >= 5, 'several recipient domains counted');
  assert.equal(sorted(await statsByDomain(ctx)), mine);
});

async function snapshot(dataDir: string, collection: string): Promise<Record<string, unknown>> {
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
  try {
    const docs = await stores.documents.collection<{ _id: string; _v?: number }>(collection).find({ orderBy: [['_id', 'asc']], limit: 100_000 });
    return Object.fromEntries(docs.map(({ _v, ...doc }) => [doc._id, doc]));
  } finally {
    await stores.close();
  }
}

test('`relay projections rebuild` of emails and deliverability gives the same read models and the same stats', async (ctx) => {
  const { dataDir } = ctx.flow;
  const before = { emails: await snapshot(dataDir, COLLECTIONS.emails), deliverability: await snapshot(dataDir, COLLECTIONS.deliverability), stats: sorted(await statsByDomain(ctx)) };
  assert.is(Object.keys(before.emails).length, Object.keys(ctx.ids).length);
  for (const name of ['emails', 'deliverability']) {
    const run = await runRelay(['projections', 'rebuild', name, '--json'], { RELAY_DATA_DIR: dataDir });
    assert.is(run.code, 0, run.stderr);
  }
  assert.equal(await snapshot(dataDir, COLLECTIONS.emails), before.emails);
  assert.equal(await snapshot(dataDir, COLLECTIONS.deliverability), before.deliverability);
  assert.equal(sorted(await statsByDomain(ctx)), before.stats);
});

test.run();
