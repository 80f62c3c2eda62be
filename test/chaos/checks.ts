// What a chaos run must show, judged from what it collected (no I/O here), and its summary.
import { isFinalDeliveryStatus, type Status } from '../../domain/email/status.ts';
import type { CutTransaction } from './counting-sink.ts';

export interface SentEmail {
  index: number;
  id: string;
  rcpt: string;
}

export interface KillRecord {
  atMs: number;
  part: string;
}

export interface WebhookRequest {
  path: string;
  eventId: string;
  body: string;
  status: number;
}

export interface ReadModelComparison {
  collection: string;
  live: number;
  rebuilt: number;
  /** Ids whose documents differ or are missing on one side (at most a few are kept). */
  differing: string[];
  differingCount: number;
}

export interface Facts {
  seed: number;
  emailsAsked: number;
  sent: SentEmail[];
  /** Email id → its status and failure code in the read model GET /v1/emails serves. */
  listed: Map<string, { status: Status; failureCode: string | null }>;
  sink: { received: Map<string, number>; recipients: Set<string>; cut: CutTransaction[]; begun: number };
  kills: KillRecord[];
  /** Emails the sink never got whose transaction Relay had begun (durably) before a sender kill that came before its next delivery event. */
  begunAtSenderKills: string[];
  /** Recipients whose bounce report the inbound server took. */
  bouncesFed: string[];
  /** Each webhook event the email streams give, with the endpoints (paths) subscribed to its type. */
  expectedWebhooks: Array<{ eventId: string; type: string; paths: string[] }>;
  webhookRequests: WebhookRequest[];
  readModels: ReadModelComparison[];
  parked: number;
  drain: { completed: boolean; seconds: number; waitingFor: string };
  notReady: string[];
  sendSeconds: number;
}

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

const some = (items: string[], n = 5) => (items.length === 0 ? '' : `: ${items.slice(0, n).join(', ')}${items.length > n ? `, … (${items.length})` : ''}`);

export function evaluate(f: Facts): Check[] {
  const checks: Check[] = [];
  const check = (name: string, ok: boolean, detail: string) => checks.push({ name, ok, detail });

  check('drained', f.drain.completed, f.drain.completed ? `in ${f.drain.seconds} s` : `not within ${f.drain.seconds} s, still waiting for ${f.drain.waitingFor}`);
  check('every email admitted', f.sent.length === f.emailsAsked, `${f.sent.length} of ${f.emailsAsked} answered 202`);

  const notFinal = f.sent.filter((e) => !isFinalDeliveryStatus(f.listed.get(e.id)?.status ?? 'queued'));
  check('every admitted email in a final state', notFinal.length === 0,
    `${f.sent.length - notFinal.length} of ${f.sent.length}${some(notFinal.map((e) => `${e.id} ${f.listed.get(e.id)?.status ?? 'not listed'}`))}`);

  const missing = f.sent.filter((e) => !f.sink.recipients.has(e.rcpt));
  const notUnknown = missing.filter((e) => f.listed.get(e.id)?.failureCode !== 'delivery_unknown');
  const unknownTotal = f.sent.filter((e) => f.listed.get(e.id)?.failureCode === 'delivery_unknown').length;
  const senderKills = f.kills.filter((k) => k.part === 'sender').length;
  // A transaction begins with Relay's durable mark, then MAIL FROM: a kill between the two cuts a
  // transaction the sink never saw, so the bound is the transactions begun and not finished at
  // the kills (from the event store), with the sink's count of cut transactions beside it.
  const begun = new Set(f.begunAtSenderKills);
  const notBegun = missing.filter((e) => !begun.has(e.id));
  check('every admitted email reached the sink, except transactions cut by a kill (delivery_unknown)',
    notUnknown.length === 0 && notBegun.length === 0,
    `${f.sent.length - missing.length} reached the sink; ${missing.length} did not (delivery_unknown: ${missing.length - notUnknown.length}) ` +
    `vs ${begun.size} transactions begun and not finished at the ${senderKills} sender kills (${f.sink.cut.length} of them cut on the wire, as the sink saw); delivery_unknown in all: ${unknownTotal}` +
    some(notBegun.map((e) => `${e.id} not begun before a sender kill`)) +
    some(notUnknown.map((e) => `${e.id} ${f.listed.get(e.id)?.status}/${f.listed.get(e.id)?.failureCode ?? '-'} not at the sink`)));

  const twice = [...f.sink.received].filter(([, n]) => n > 1).map(([key, n]) => `${key} ×${n}`);
  const messages = [...f.sink.received.values()].reduce((a, b) => a + b, 0);
  check('no recipient received a message twice', twice.length === 0, `${f.sink.received.size} (recipient, Message-ID) pairs, ${messages} messages${some(twice)}`);

  const expected = new Map<string, string>();
  for (const hook of f.expectedWebhooks) for (const path of hook.paths) expected.set(`${path} ${hook.eventId}`, hook.type);
  const bodies = new Map<string, Set<string>>();
  const acknowledged = new Set<string>();
  for (const r of f.webhookRequests) {
    const key = `${r.path} ${r.eventId}`;
    (bodies.get(key) ?? bodies.set(key, new Set()).get(key)!).add(r.body);
    if (r.status >= 200 && r.status < 300) acknowledged.add(key);
  }
  const unacknowledged = [...expected.keys()].filter((k) => !acknowledged.has(k));
  const unexpected = [...bodies.keys()].filter((k) => !expected.has(k));
  const changing = [...bodies].filter(([, b]) => b.size > 1).map(([k]) => k);
  check('every webhook event reached each subscribed endpoint with a 2xx, under one id',
    unacknowledged.length === 0 && unexpected.length === 0 && changing.length === 0,
    `${expected.size} (event, endpoint) pairs expected, ${acknowledged.size} acknowledged, ${f.webhookRequests.length} requests; ` +
    `missing ${unacknowledged.length}, ids no email event gives ${unexpected.length}, ids with differing bodies ${changing.length}` +
    some([...unacknowledged, ...unexpected, ...changing]));

  for (const m of f.readModels) {
    check(`read model ${m.collection} equals a rebuild from the event store`, m.differingCount === 0 && m.live === m.rebuilt && m.live > 0,
      `${m.live} live documents, ${m.rebuilt} rebuilt, ${m.differingCount} differ${some(m.differing)}`);
  }
  check('no event parked', f.parked === 0, `${f.parked} parked`);
  check('every part ready at the end', f.notReady.length === 0, f.notReady.length ? `not ready: ${f.notReady.join(', ')}` : 'all answer /readyz 200');
  return checks;
}

export function summary(f: Facts, checks: Check[]): string {
  const byPart = new Map<string, number>();
  for (const k of f.kills) byPart.set(k.part, (byPart.get(k.part) ?? 0) + 1);
  const fed = new Set(f.bouncesFed);
  const hardBounced = f.sent.filter((e) => fed.has(e.rcpt) && f.listed.get(e.id)?.status === 'hard_bounced').length;
  const lines = [
    `chaos summary (seed ${f.seed})`,
    `  emails: ${f.sent.length} admitted in ${f.sendSeconds} s; bounce reports taken: ${f.bouncesFed.length}, their emails hard_bounced: ${hardBounced}`,
    `  kills: ${f.kills.length} (${[...byPart].sort().map(([p, n]) => `${p} ${n}`).join(', ')})`,
    `  sink: ${f.sink.begun} transactions begun, ${f.sink.cut.length} cut by sender kills`,
    ...checks.map((c) => `  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.detail}`),
    checks.every((c) => c.ok) ? 'chaos: every check passed' : `chaos: ${checks.filter((c) => !c.ok).length} check(s) failed`,
  ];
  return lines.join('\n');
}
