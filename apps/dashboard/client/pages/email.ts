// One email: its status and addresses, every recipient's status, the timeline, tags and
// metadata, and the webhook deliveries with their attempt logs. The page follows the email
// while it is open. Webhook deliveries are not replayed by hand: the spec rules it out.
import { get } from '../api.ts';
import type { PageContext } from '../context.ts';
import { badge, facts, fill, h, redrawKeepingFocus, section, table, when, type Child } from '../dom.ts';
import { livePoll, type Seen } from '../live.ts';

interface Attempt { number: number; httpStatus: number | null; errorCode: string | null; durationMs: number; createdAt: string }
interface EmailDetail {
  id: string; fromAddress: string; subject: string; status: string; testMode: boolean; failureCode: string | null;
  createdAt: string; sentAt: string | null; deliveredAt: string | null; to: string[]; cc: string[]; reply_to: string | null;
  providerMessageId: string | null;
  recipients: Array<{ address: string; status: string; occurredAt: string }>;
  webhookDeliveries: Array<{ id: string; eventId: string; status: string; nextAttemptAt: string | null; attemptLogs: Attempt[] }>;
  metadata: Record<string, unknown>;
  tags: Record<string, string>;
  events: Array<{ id: string; type: string; occurredAt: string; payload: Record<string, unknown> }>;
}

/** A payload's fields in one line each: "smtpCode: 250", nested values as JSON. */
function payloadOf(payload: Record<string, unknown>): Child {
  const entries = Object.entries(payload).filter(([, v]) => v !== null && v !== undefined && !(Array.isArray(v) && v.length === 0));
  if (entries.length === 0) return null;
  return h('dl', { class: 'facts' }, entries.map(([key, v]) => [h('dt', null, key), h('dd', null, typeof v === 'object' ? JSON.stringify(v) : String(v))]));
}

export function attemptsTable(caption: string, attempts: Attempt[]): HTMLElement {
  return table(caption, ['#', 'Receiver answered', 'Error', 'Took', 'At'], attempts.map((a) => [
    String(a.number),
    a.httpStatus === null ? '—' : `HTTP ${a.httpStatus}`,
    a.errorCode ?? '—',
    `${a.durationMs} ms`,
    when(a.createdAt),
  ]), 'No attempt yet.');
}

function draw(ctx: PageContext, email: EmailDetail): Child[] {
  const messagePath = `/projects/${ctx.project!.id}/emails/${email.id}/message`;
  return [
    facts([
      ['Status', [badge(email.status), email.testMode ? [' ', badge('test mode', 'muted')] : null, email.failureCode ? ` ${email.failureCode}` : null]],
      ['From', email.fromAddress],
      ['To', email.to.join(', ')],
      ['Cc', email.cc.length ? email.cc.join(', ') : '—'],
      ['Reply-To', email.reply_to ?? '—'],
      ['Created', when(email.createdAt)],
      ['Sent', when(email.sentAt)],
      ['Delivered', when(email.deliveredAt)],
      ['Provider message id', email.providerMessageId ?? '—'],
      ['Email id', h('code', null, email.id)],
    ]),
    h('p', null, h('a', { href: messagePath, class: 'button secondary' }, 'View the message')),
    section('Recipients', table('Recipients', ['Address', 'Status', 'Since'],
      email.recipients.map((r) => [r.address, badge(r.status), when(r.occurredAt)]), 'No visible recipient (BCC recipients are never shown).')),
    section('Timeline', h('ol', { class: 'timeline' }, email.events.map((event) =>
      h('li', null, h('strong', null, event.type), ' ', when(event.occurredAt), payloadOf(event.payload))))),
    section('Tags', Object.keys(email.tags).length
      ? facts(Object.entries(email.tags).map(([k, v]): [string, Child] => [k, v]))
      : h('p', { class: 'empty' }, 'No tags.')),
    section('Metadata', Object.keys(email.metadata).length
      ? h('pre', { tabindex: 0, role: 'region', 'aria-label': 'Metadata as JSON' }, JSON.stringify(email.metadata, null, 2))
      : h('p', { class: 'empty' }, 'No metadata.')),
    section('Webhook deliveries',
      h('p', { class: 'hint' }, 'Each event sent to each endpoint, newest first, with every attempt. Failed deliveries are retried on a schedule, not by hand.'),
      email.webhookDeliveries.length === 0
        ? h('p', { class: 'empty' }, 'No webhook delivery for this email.')
        : email.webhookDeliveries.map((d) => h('div', { class: 'delivery' },
          h('h3', null, `Event ${d.eventId} `, badge(d.status)),
          d.nextAttemptAt ? h('p', { class: 'hint' }, 'Next attempt ', when(d.nextAttemptAt)) : null,
          attemptsTable(`Attempts of delivery ${d.id}`, d.attemptLogs)))),
  ];
}

/** What moved since the email was last drawn, in a few words: "Status: sent; 2 new events." */
function changeOf(before: EmailDetail, after: EmailDetail): string {
  const parts: string[] = [];
  if (after.status !== before.status) parts.push(`Status: ${after.status}`);
  const known = new Set(before.events.map((event) => event.id));
  const events = after.events.filter((event) => !known.has(event.id)).length;
  if (events > 0) parts.push(`${events} new ${events === 1 ? 'event' : 'events'}`);
  if (JSON.stringify(after.webhookDeliveries) !== JSON.stringify(before.webhookDeliveries)) parts.push('webhook deliveries updated');
  return parts.length > 0 ? `${parts.join('; ')}.` : 'The email was updated.';
}

export async function render(ctx: PageContext): Promise<void> {
  const path = `/v1/projects/${ctx.project!.id}/emails/${ctx.params.emailId}`;
  // The body is not a live region (each redraw would read the whole page out again): a short
  // status line says what changed.
  const body = h('div');
  const status = h('p', { class: 'visually-hidden', role: 'status' });
  const back = h('p', null, h('a', { href: `/projects/${ctx.project!.id}/emails` }, '← All emails'));
  let shown = '';
  let last: EmailDetail | null = null;
  async function load(): Promise<Seen> {
    const email = await get<EmailDetail>(path);
    const seen = JSON.stringify(email);
    if (seen === shown) return 'unchanged';
    shown = seen;
    ctx.title(email.subject);
    // Focus stays where the reader was (a link, a table), in the new drawing.
    redrawKeepingFocus(body, () => fill(body, draw(ctx, email)));
    if (last !== null) status.textContent = changeOf(last, email);
    last = email;
    return 'changed';
  }
  await load();
  ctx.main.append(back, status, body);
  // Followed for as long as the page is open, with a wait that grows while nothing moves: no
  // status is the last word (a bounce report or a complaint may come days after "sent" or
  // "delivered"), and a delayed email may wait minutes for its next attempt.
  livePoll(load, { maxIntervalMs: 30_000 });
}
