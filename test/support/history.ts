// A generated history of email streams with every shape the status rules care about: suppressed
// admissions, retries after delays, hard and soft bounces and refusals from the sender, deliveries
// by MX, whole-email failures, and reports from outside: deliveries (some before the sender's own
// "sent", some after a delivery_unknown), bounces, complaints, delays after delivery, delays
// reported before the attempt's outcome they followed (reportedFirst), undetermined ones, and
// outcomes of BCC recipients (whose address no event holds), and reports repeated. Seeded, so a
// failure can be replayed.
import { randomUUID } from 'node:crypto';
import type { AdmittedMessage, RecipientAttempt } from '../../domain/email/events.ts';
import { emailStreamId } from '../../domain/email/events.ts';
import type { Status } from '../../domain/email/status.ts';
import type { EventStore, NewEvent } from '../../infra/ports/event-store.ts';
import { admittedMessage } from './builders.ts';
import type { AnyEmailEvent } from './email-events.ts';

/** mulberry32: a small seeded generator. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface EmailPlan {
  emailId: string;
  events: AnyEmailEvent[];
}

export interface HistoryOptions {
  emails: number;
  projectId: string;
  workspaceId?: string;
  seed?: number;
  /** When the first email is admitted; the others follow `spacingMs` apart. */
  start?: string;
  spacingMs?: number;
  sendingDomains?: string[];
  recipientDomains?: string[];
  /** Email ids are `${idPrefix}${n}`. */
  idPrefix?: string;
}

const SMTP: Partial<Record<Status, { code: number; enhanced: string; response: string }>> = {
  sent: { code: 250, enhanced: '2.0.0', response: '250 2.0.0 Ok: queued as ABC' },
  delivered: { code: 250, enhanced: '2.0.0', response: '250 2.0.0 OK' },
  delayed: { code: 451, enhanced: '4.7.1', response: '451 4.7.1 Try again later' },
  hard_bounced: { code: 550, enhanced: '5.1.1', response: '550 5.1.1 <someone@x.test>: Recipient address rejected: User unknown' },
  soft_bounced: { code: 552, enhanced: '5.2.2', response: '552 5.2.2 Mailbox full' },
  rejected: { code: 554, enhanced: '5.7.1', response: '554 5.7.1 Message refused as spam' },
};

export function generateHistory(options: HistoryOptions): EmailPlan[] {
  const random = seeded(options.seed ?? 26);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)];
  const chance = (p: number) => random() < p;
  const sendingDomains = options.sendingDomains ?? ['mail.alpha.test', 'mail.beta.test'];
  const recipientDomains = options.recipientDomains ?? ['gmail.test', 'yahoo.test', 'outlook.test', 'corp.test', 'tiny.test', 'example.test'];
  const start = Date.parse(options.start ?? '2026-11-01T00:00:00.000Z');
  const spacing = options.spacingMs ?? 47_000;
  const plans: EmailPlan[] = [];
  for (let n = 0; n < options.emails; n++) {
    const emailId = `${options.idPrefix ?? 'em_hist'}${n}`;
    let clock = start + n * spacing;
    const at = (ms: number) => new Date((clock += ms)).toISOString();
    const toCount = 1 + Math.floor(random() * 3);
    const ccCount = chance(0.3) ? 1 : 0;
    const bccCount = chance(0.25) ? 1 : 0;
    const toAddresses = Array.from({ length: toCount }, (_, i) => `u${n}.${i}@${pick(recipientDomains)}`);
    const ccAddresses = Array.from({ length: ccCount }, () => `cc${n}@${pick(recipientDomains)}`);
    const visible = toCount + ccCount;
    const recipientCount = visible + bccCount;
    const fromDomain = pick(sendingDomains);
    const message: AdmittedMessage = admittedMessage({
      emailId, projectId: options.projectId, workspaceId: options.workspaceId ?? 'ws_hist', testMode: false,
      from: `app@${fromDomain}`, fromAddress: `app@${fromDomain}`, fromDomain,
      to: toAddresses, toAddresses, cc: ccAddresses, ccAddresses, bccCount, recipientCount,
      template: chance(0.5) ? { id: `tpl_${n % 3}`, slug: `template-${n % 3}`, revision: 1 + (n % 2) } : null,
      content: { keyId: emailId, alg: 'A256GCM', iv: 'aXY=', data: 'ZGF0YQ==', tag: 'dGFn' },
      occurredAt: at(0),
    });
    const events: AnyEmailEvent[] = [];
    if (chance(0.05)) {
      events.push({ type: 'EmailSuppressed', data: { ...message, suppressedRecipients: [{ address: toAddresses[0], reason: 'hard_bounce' }], reason: `${toAddresses[0]} is suppressed (hard_bounce)` } });
      plans.push({ emailId, events });
      continue;
    }
    events.push({ type: 'EmailAccepted', data: message });
    const address = (index: number) => (index < toCount ? toAddresses[index] : index < visible ? ccAddresses[index - toCount] : null);
    /** A report at `occurredAt`, drawing nothing from the generator. */
    const reportAt = (index: number, outcome: string, occurredAt: string, extra: Record<string, unknown> = {}) => events.push({
      type: 'RecipientReported',
      data: {
        reportId: `<r${events.length}.${n}@reports.test>`, recipientIndex: index, address: address(index), outcome,
        format: outcome === 'complained' ? 'arf' : 'dsn',
        status: outcome === 'hard_bounced' ? '5.1.1' : outcome === 'soft_bounced' ? '4.4.7' : outcome === 'delayed' ? '4.4.1' : outcome === 'delivered' ? '2.0.0' : null,
        diagnosticCode: outcome === 'hard_bounced' ? `smtp; 550 5.1.1 <${address(index) ?? 'hidden@x.test'}>... User unknown` : null,
        reason: `reported ${outcome}`, complaintType: outcome === 'complained' ? 'abuse' : null, occurredAt, ...extra,
      },
    });
    const report = (index: number, outcome: string, extra: Record<string, unknown> = {}) => reportAt(index, outcome, at(60_000 + Math.floor(random() * 600_000)), extra);
    if (chance(0.03)) {
      // The email's delivery ended without an attempt outcome: its sender stopped mid-transaction.
      events.push({ type: 'DeliveryClaimed', data: { attempt: 1, claimedBy: 'sender-a', transport: 'smtp', occurredAt: at(800) } });
      events.push({ type: 'DeliveryTransactionStarted', data: { attempt: 1, recipients: Array.from({ length: recipientCount }, (_, index) => index), occurredAt: at(810) } });
      events.push({ type: 'DeliveryFailed', data: { attempt: 1, failureCode: 'delivery_unknown', reason: 'the claim was left open', recipients: Array.from({ length: recipientCount }, (_, index) => ({ index, address: address(index) })), occurredAt: at(600_000) } });
      // Every other one: the copy had gone out, and its DSN "delivered" answers the unknown.
      if (n % 2 === 0) reportAt(0, 'delivered', at(120_000));
      plans.push({ emailId, events });
      continue;
    }
    const earlyDelivered = chance(0.08);
    const mx = chance(0.15);
    // A DSN "delayed" about the first recipient's copy, recorded before the first attempt's outcome (no random draw).
    const delayReportedFirst = !earlyDelivered && n % 7 === 3;
    let pending = Array.from({ length: recipientCount }, (_, index) => index);
    const final = new Map<number, Status>();
    for (let attempt = 1; pending.length > 0 && attempt <= 3; attempt++) {
      events.push({ type: 'DeliveryClaimed', data: { attempt, claimedBy: 'sender-a', transport: mx ? 'mx' : 'smtp', occurredAt: at(attempt === 1 ? 300 + Math.floor(random() * 5_000) : 900_000) } });
      // A DSN that overtook the sender's own outcome: "delivered" before "sent".
      if (attempt === 1 && earlyDelivered && !mx) report(0, 'delivered', { occurredAt: at(50) });
      if (attempt === 1 && delayReportedFirst) reportAt(0, 'delayed', at(40));
      const recipients: RecipientAttempt[] = pending.map((index) => {
        const roll = random();
        const status: Status = attempt === 3 ? (roll < 0.8 ? (mx ? 'delivered' : 'sent') : 'hard_bounced')
          : roll < 0.62 ? (mx ? 'delivered' : 'sent') : roll < 0.74 ? 'delayed' : roll < 0.83 ? 'hard_bounced' : roll < 0.9 ? 'rejected' : roll < 0.95 ? 'soft_bounced' : 'failed';
        const reply = SMTP[status] ?? { code: 0, enhanced: '', response: 'connection refused' };
        // Every other email as today's sender records it, with each failed or rejected recipient's
        // own code (no random draw: the rest of the history stays as it was); the others as before.
        const own = n % 2 === 0 ? null : status === 'rejected' ? 'provider_rejected' : status === 'failed' ? (index % 2 === 0 ? 'provider_unavailable' : 'delivery_unknown') : null;
        return {
          index, address: address(index), status, smtpCode: status === 'failed' ? null : reply.code, enhancedCode: status === 'failed' ? null : reply.enhanced, response: reply.response,
          ...(own ? { failureCode: own } : {}), ...(attempt === 1 && delayReportedFirst && index === 0 ? { reportedFirst: true as const } : {}),
        };
      });
      const codes = new Set(recipients.map((r) => r.failureCode));
      const retry = recipients.some((r) => r.status === 'delayed');
      events.push({
        type: 'DeliveryAttempted',
        data: {
          attempt, transport: mx ? 'mx' : 'smtp', messageId: `<${emailId}@relay.test>`, providerMessageId: mx ? null : `prov-${n}-${attempt}`, recipients,
          nextAttemptAt: retry ? new Date(clock + 900_000).toISOString() : null,
          failureCode: n % 2 === 0
            ? (recipients.some((r) => r.status === 'failed') ? 'provider_unavailable' : null)
            : (['delivery_unknown', 'provider_unavailable', 'provider_rejected'].find((code) => codes.has(code)) ?? null),
          occurredAt: at(400 + Math.floor(random() * 20_000)),
        },
      });
      for (const r of recipients) if (r.status !== 'delayed') final.set(r.index, r.status);
      pending = recipients.filter((r) => r.status === 'delayed').map((r) => r.index);
    }
    // Reports from outside, in the order the network brings them.
    for (const [index, status] of final) {
      if (status !== 'sent' && status !== 'delivered') continue;
      const roll = random();
      if (status === 'sent' && roll < 0.4) {
        report(index, 'delivered');
        // The same outcome reported again: recorded as a repeat, which changes nothing.
        if (roll < 0.06) {
          events.push({ type: 'RecipientReportRepeated', data: { reportId: `<again${events.length}.${n}@reports.test>`, recipientIndex: index, address: address(index), outcome: 'delivered', occurredAt: at(30_000) } });
        }
      }
      if (roll < 0.05) report(index, 'hard_bounced');
      else if (roll < 0.09) report(index, 'complained');
      else if (roll < 0.15) report(index, 'delayed');
      else if (roll < 0.18) report(index, 'undetermined');
      else if (roll < 0.2) report(index, 'soft_bounced');
    }
    plans.push({ emailId, events });
  }
  return plans;
}

export const toStored = (event: AnyEmailEvent): NewEvent => ({
  id: randomUUID(),
  type: event.type,
  data: event.data as Record<string, unknown>,
  metadata: { correlationId: 'history', causationId: 'history', schemaVersion: 1 },
});

/** Appends each email's events in one append, `concurrency` emails at a time. */
export async function appendHistory(events: EventStore, plans: EmailPlan[], concurrency = 64): Promise<number> {
  let next = 0;
  let appended = 0;
  const worker = async () => {
    while (next < plans.length) {
      const plan = plans[next++];
      await events.append(emailStreamId(plan.emailId), plan.events.map(toStored), { expectedRevision: 'no_stream' });
      appended += plan.events.length;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return appended;
}
