// The deliverability read model. Pure: (document, event) → document, one document per email.
//
// Each document folds one email: for each visible recipient (To, then CC, by recipient index;
// BCC recipients are never counted, as nowhere in reads), its recipient domain, its status under
// the one outcome model (domain/email/outcomes.ts, statusAfter: the sender's outcomes replace,
// reports move a recipient up), the instant it first reached each counted outcome and, for a failure, the
// reply that brought it there. The counts per project ×
// UTC hour × sending domain × recipient domain × outcome, and the latency histograms, are derived
// from these documents (countsOf), never kept as counters:
// - an event applied twice counts once by construction: the document's stream revision guards it
//   (as in the emails model), and a recipient reaches an outcome once however many events say so;
// - counters spread over bucket documents cannot be made exactly-once without a transaction
//   across documents: keeping applied event ids per bucket makes the busy buckets (an hour of
//   mail to one large provider) grow with every email and be rewritten whole on each event, and a
//   watermark per bucket and log partition loses the events a rebuild's swap or a parked retry
//   brings back out of order. A document per email has neither problem, and rebuilds and
//   applies exactly as the emails model does;
// - reads sum the documents of the emails active in the range: a workspace admits its monthly
//   allowance of recipients (5,000 by the spec, unless its operator set another), and buckets
//   would not be fewer, since transactional mail goes to many recipient domains with few emails
//   each.
//
// An email is active in a range when its instants meet it: lastAt ≥ from and firstAt < to. No
// bound holds on how long after admission an outcome can still come: return paths never expire
// and a report is recorded whenever it arrives (domain/email/feedback.ts), so a complaint a month
// later moves lastAt a month on. One index can bound only one of the two instants, and bounding
// lastAt alone makes a range read visit every email since `from`. So each document carries its
// span class (`span`): the first k with lastAt − firstAt ≤ SPAN_BOUNDS_MS[k], whose bound is a
// window, as an acceptance window would be: an active email of class k has firstAt in
// [from − SPAN_BOUNDS_MS[k], to), one range on the index (projectId, span, firstAt). What a
// class's window visits beyond the active emails is of that class only: most mail is in the first
// (its outcomes come within minutes; retries end within a day), and the classes grow fourfold,
// so a read makes a few seeks, one per class, whatever the history after `from`.
import { maskAddresses } from '../domain/addresses-in-text.ts';
import { occurredAtOf, type RecordedEmailEvent } from '../domain/email/events.ts';
import { outcomesOf, statusAfter, type RecipientOutcome } from '../domain/email/outcomes.ts';
import type { Status } from '../domain/email/status.ts';

/** What is counted, per recipient: each once, when the recipient's status first becomes it. */
export const OUTCOMES = [
  'accepted', 'suppressed', 'sent', 'delivered', 'delayed', 'soft_bounced', 'hard_bounced', 'complained', 'rejected', 'failed',
] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** The outcomes that are failures: what ranks recipient domains. */
export const FAILURES = ['hard_bounced', 'soft_bounced', 'rejected', 'failed'] as const satisfies readonly Outcome[];
export type Failure = (typeof FAILURES)[number];
const isFailure = (outcome: Outcome): outcome is Failure => (FAILURES as readonly Outcome[]).includes(outcome);

const COUNTED_STATUS: Partial<Record<Status, Outcome>> = {
  queued: 'accepted', suppressed: 'suppressed', sent: 'sent', delivered: 'delivered', delayed: 'delayed',
  soft_bounced: 'soft_bounced', hard_bounced: 'hard_bounced', complained: 'complained', rejected: 'rejected', failed: 'failed',
};

/** A failure's reply: the SMTP reply and enhanced codes ("550 5.1.1"), and its words with addresses masked. */
export interface FailureReply {
  code: string;
  text: string;
}

export interface DeliverabilityRecipient {
  /** The recipient's domain, lower case. */
  domain: string;
  status: Status;
  /** When the recipient first reached each outcome. */
  reached: Partial<Record<Outcome, string>>;
  /**
   * The reply of each failure outcome it reached, from the event that first reached it: counted
   * with that outcome, at its instant in `reached`, as a later failure's reply would not be.
   * Absent in documents written before it (see `reply`).
   */
  replies?: Partial<Record<Failure, FailureReply>>;
  /**
   * Documents written before `replies` hold only the reply of the recipient's latest failure: a
   * failure outcome without its own reply is counted with it (countsOf). This version only keeps
   * it where it was; `relay projections rebuild deliverability` rewrites those documents without it.
   */
  reply?: FailureReply | null;
}

export interface DeliverabilityEmail {
  /** The email id. */
  _id: string;
  projectId: string;
  sendingDomain: string;
  admittedAt: string;
  /** The earliest and latest instant in `reached`: what range reads select on. */
  firstAt: string;
  lastAt: string;
  /**
   * The span class of lastAt − firstAt (spanClassOf). Documents written before it existed lack
   * it: reads find those without a window (apps/services/deliverability-stats.ts), and
   * `relay projections rebuild deliverability` gives them theirs.
   */
  span: number;
  recipients: DeliverabilityRecipient[];
  streamRevision: number;
}

/** Event types that never change a document: the live processor skips them (apps/services/stream-projection.ts, ignores). */
export const DELIVERABILITY_IGNORES = ['DeliveryClaimed', 'DeliveryTransactionStarted', 'RecipientReportRepeated'] as const;

/** Bounds (milliseconds, inclusive) of the latency histograms' buckets; the last bucket holds the rest. */
export const LATENCY_BOUNDS_MS = [100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 1_800_000, 3_600_000, 21_600_000, 86_400_000] as const;
export const LATENCIES = ['accepted_to_sent', 'sent_to_delivered'] as const;
export type Latency = (typeof LATENCIES)[number];

const HOUR_MS = 3_600_000;
/** Upper bounds (milliseconds, inclusive) of the span classes but the last, which holds the rest. */
export const SPAN_BOUNDS_MS = [1, 4, 16, 64, 256, 1_024, 4_096, 16_384, 65_536].map((hours) => hours * HOUR_MS);

/** The span class of an email whose instants run from firstAt to lastAt: SPAN_BOUNDS_MS.length beyond the last bound. */
export function spanClassOf(firstAt: string, lastAt: string): number {
  const span = Date.parse(lastAt) - Date.parse(firstAt);
  const k = SPAN_BOUNDS_MS.findIndex((bound) => span <= bound);
  return k < 0 ? SPAN_BOUNDS_MS.length : k;
}

const domainOf = (address: string): string => address.slice(address.lastIndexOf('@') + 1).toLowerCase();

export const maskedReply = (text: string): string => maskAddresses(text).replace(/\s+/g, ' ').trim().slice(0, 200);


function reach(recipient: DeliverabilityRecipient, status: Status, at: string, reply: FailureReply | null): DeliverabilityRecipient {
  const outcome = COUNTED_STATUS[status];
  if (!outcome || recipient.reached[outcome] !== undefined) return { ...recipient, status };
  const reached = { ...recipient.reached, [outcome]: at };
  // Delivered by Relay itself (MX delivery), or reported before the sender's own outcome: it was sent then too.
  if (outcome === 'delivered' && reached.sent === undefined) reached.sent = at;
  const replies = isFailure(outcome) && reply ? { ...recipient.replies, [outcome]: reply } : recipient.replies;
  return { ...recipient, status, reached, ...(replies ? { replies } : {}) };
}

function withRecipients(email: DeliverabilityEmail, revision: number, recipients: DeliverabilityRecipient[]): DeliverabilityEmail {
  let firstAt = email.firstAt;
  let lastAt = email.lastAt;
  for (const r of recipients) {
    for (const at of Object.values(r.reached)) {
      if (at < firstAt) firstAt = at;
      if (at > lastAt) lastAt = at;
    }
  }
  return { ...email, recipients, firstAt, lastAt, span: spanClassOf(firstAt, lastAt), streamRevision: revision };
}

/** Each recipient an event names moves as the outcome model says (domain/email/outcomes.ts, statusAfter). */
function withOutcomes(email: DeliverabilityEmail, revision: number, at: string, outcomes: Array<{ outcome: RecipientOutcome; reply: FailureReply }>): DeliverabilityEmail {
  const recipients = email.recipients.map((recipient, index) => {
    const named = outcomes.find((o) => o.outcome.index === index);
    if (!named) return recipient;
    const status = statusAfter(recipient.status, named.outcome);
    // A sender's outcome that a report recorded first had followed counts as though it had come
    // first: its own outcome at its instant (a copy the provider took is sent), then what stands.
    const first = named.outcome.reportedFirst ? reach(recipient, named.outcome.status, at, named.reply) : recipient;
    return status === first.status ? first : reach(first, status, at, named.reply);
  });
  return withRecipients(email, revision, recipients);
}

/**
 * A report's status as a reply code: an enhanced status code ("5.1.1"), the one a stored
 * "5.1.1 (comment)" starts with, else null: never the rest of the text.
 */
const statusCodeOf = (status: string | null): string | null =>
  (status === null ? null : /^\s*([245]\.\d{1,3}\.\d{1,3})(?![\d.])/.exec(status.slice(0, 20))?.[1] ?? null);

/** A failure's reply as an event gives it: the SMTP codes and reply, the failure code and reason, or the report's status and diagnostic. */
function replyOf(event: RecordedEmailEvent, outcome: RecipientOutcome): FailureReply {
  const reply = (codes: Array<string | number | null | undefined>, text: string | null | undefined): FailureReply => ({
    code: codes.filter((c) => c !== null && c !== undefined && c !== '').join(' '),
    text: maskedReply(text ?? ''),
  });
  switch (event.type) {
    case 'DeliveryAttempted': return reply([outcome.shownAs.smtpCode as number | null, outcome.shownAs.enhancedCode as string | null], outcome.reason);
    case 'DeliveryFailed': return reply([event.data.failureCode], event.data.reason);
    // Events recorded before the report parser kept the code alone hold the Status field as
    // the report wrote it (any words, addresses included): only a status code is a code.
    case 'RecipientReported': return reply([statusCodeOf(event.data.status)], event.data.diagnosticCode ?? event.data.reason);
    default: return reply([], outcome.reason);
  }
}

/**
 * Applies one event of an email's stream (the next revision, after the revision guard).
 * Returns the same object when the event was applied already or changes nothing.
 */
export function applyToDeliverability(email: DeliverabilityEmail | null, event: RecordedEmailEvent): DeliverabilityEmail | null {
  if (email && event.revision <= email.streamRevision) return email;
  switch (event.type) {
    case 'EmailAccepted':
    case 'EmailSuppressed': {
      const data = event.data;
      const status: Status = event.type === 'EmailAccepted' ? 'queued' : 'suppressed';
      const blank = (address: string): DeliverabilityRecipient => ({ domain: domainOf(address), status, reached: {}, replies: {} });
      return withRecipients(
        { _id: data.emailId, projectId: data.projectId, sendingDomain: data.fromDomain, admittedAt: data.occurredAt, firstAt: data.occurredAt, lastAt: data.occurredAt, span: 0, recipients: [], streamRevision: event.revision },
        event.revision,
        [...data.toAddresses, ...data.ccAddresses].map((address) => reach(blank(address), status, data.occurredAt, null)),
      );
    }
  }
  // Lifecycle events of an email whose admission is not there cannot be placed.
  if (!email) return email;
  // A claim moves recipients to processing, which is no counted outcome and decides nothing
  // here (an attempt replaces it whatever it was, and any report outranks both queued and
  // processing); a transaction's start, a repeated or undetermined report, or a type this
  // version does not know, records no outcome. These leave the document as it is (DELIVERABILITY_IGNORES).
  const { recipients } = outcomesOf(event);
  if (recipients.length === 0) return email;
  const at = occurredAtOf(event)!;
  return withOutcomes(email, event.revision, at, recipients.map((outcome) => ({ outcome, reply: replyOf(event, outcome) })));
}

/** One email's part of the counts: outcome (or latency) at an instant, for a recipient domain. */
export interface Contribution {
  at: string;
  recipientDomain: string;
  outcome: Outcome;
  /** The failure's reply, for failures. */
  reply: FailureReply | null;
}

export interface LatencySample {
  at: string;
  recipientDomain: string;
  latency: Latency;
  ms: number;
}

/** What an email adds to the counts: one contribution per recipient and outcome reached, and its latencies. */
export function countsOf(email: Pick<DeliverabilityEmail, 'recipients'>): { contributions: Contribution[]; latencies: LatencySample[] } {
  const contributions: Contribution[] = [];
  const latencies: LatencySample[] = [];
  for (const r of email.recipients) {
    for (const outcome of OUTCOMES) {
      const at = r.reached[outcome];
      if (at === undefined) continue;
      contributions.push({ at, recipientDomain: r.domain, outcome, reply: isFailure(outcome) ? (r.replies?.[outcome] ?? r.reply ?? null) : null });
    }
    const { accepted, sent, delivered } = r.reached;
    if (accepted !== undefined && sent !== undefined) latencies.push({ at: sent, recipientDomain: r.domain, latency: 'accepted_to_sent', ms: Math.max(0, Date.parse(sent) - Date.parse(accepted)) });
    if (sent !== undefined && delivered !== undefined) latencies.push({ at: delivered, recipientDomain: r.domain, latency: 'sent_to_delivered', ms: Math.max(0, Date.parse(delivered) - Date.parse(sent)) });
  }
  return { contributions, latencies };
}

/** The index of the histogram bucket a latency falls in. */
export const latencyBucketOf = (ms: number): number => {
  const i = LATENCY_BOUNDS_MS.findIndex((bound) => ms <= bound);
  return i < 0 ? LATENCY_BOUNDS_MS.length : i;
};
