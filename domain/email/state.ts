// The state of one email as its deciders see it, folded from the email's stream.
import type { AdmissionResult } from './admission.ts';
import type { AdmittedMessage, RecordedEmailEvent, ReportedOutcome } from './events.ts';
import { outcomesOf, shownProviderMessageId, statusAfter, statusOnClaim } from './outcomes.ts';
import { EMAIL_SCHEMA_VERSIONS } from './upcast.ts';
import { emailStatusOf, isFinalDeliveryStatus, type Status } from './status.ts';

export interface OpenClaim {
  attempt: number;
  claimedBy: string;
  claimedAt: string;
  /** The transport it sends with (DeliveryClaimed.transport). */
  transport: string;
  /** Which one of that name (DeliveryClaimed.transportInstance: an outbox's directory); null when the claim names none. */
  transportInstance: string | null;
  /** Recipients whose transaction began under this claim (DeliveryTransactionStarted): only they may have been delivered. */
  begun: number[];
  /** When the last of those transactions began; null while none has. */
  begunAt: string | null;
}

export interface DeliveryState {
  /** Attempts claimed so far. */
  attempts: number;
  /** A claim with no outcome yet: someone is sending (or about to), or stopped before its outcome. */
  openClaim: OpenClaim | null;
  firstAttemptAt: string | null;
  /** When the last attempt's outcome (or the delivery's failure) was recorded. */
  lastAttemptAt: string | null;
  /** When the next attempt is due: null for at once, and once finished. */
  nextAttemptAt: string | null;
  /** Status per recipient index (To, CC, BCC as admitted). */
  recipients: Status[];
  /**
   * Per recipient index: Relay is done sending to it, because an outcome once gave it a final
   * status (a transport accepted it, refused it for good, or its fate became unknown; or a
   * report said it was delivered, bounced or complained), even when a report recorded first
   * stands over it. A later report may still move its shown status (a reported delay after
   * `sent`), never back into the send set.
   */
  done: boolean[];
  /**
   * Per recipient index: the indexes its last transaction carried (DeliveryTransactionStarted),
   * itself included: one copy for an address listed twice (To and CC, or To and BCC), so a report
   * about that copy is about each of them. Absent before its first transaction.
   */
  copies: ReadonlyArray<readonly number[] | undefined>;
  /**
   * Nothing more is ever sent: admission suppressed the email, an attempt's outcome scheduled no
   * retry, a failure left nobody pending, or a report left nobody pending while no claim was
   * open. decideClaim and the sender's schedule (its work item goes) stop on it.
   */
  finished: boolean;
}

/** What reports have said about one recipient (domain/email/feedback.ts decides with it). */
export interface RecipientReports {
  /** Outcomes recorded (RecipientReported), each once. */
  outcomes: readonly ReportedOutcome[];
  /** The last outcome recorded for this recipient (an attempt's or a report's) was a reported delay. */
  delayReportedLast: boolean;
  /** Report events on the stream about this recipient: recorded and counted. */
  events: number;
  /** Of those, reports that said nothing new (RecipientReportRepeated). */
  repeated: number;
}

export const NO_REPORTS: RecipientReports = { outcomes: [], delayReportedLast: false, events: 0, repeated: 0 };

export interface EmailState {
  emailId: string | null;
  fingerprint: string | null;
  admission: AdmissionResult | null;
  /**
   * The admitted message as its event holds it (ids, project, workspace, test mode, from/to/cc,
   * subject, tags, template, recipient count, when it was admitted): bodies and BCC only
   * sealed. Null before admission.
   */
  message: AdmittedMessage | null;
  status: Status | null;
  /** Normalized To and CC addresses: the recipients whose addresses events may name. */
  visibleAddresses: string[];
  /** `${reportId}:${recipientIndex}` of every report recorded or counted. */
  reports: ReadonlySet<string>;
  /** Per recipient index: what reports said (absent: nothing yet). */
  recipientReports: ReadonlyArray<RecipientReports | undefined>;
  delivery: DeliveryState;
  /** The provider's id of the message, from the latest attempt that accepted a visible recipient (outcomes.ts, shownProviderMessageId). */
  providerMessageId: string | null;
  /** When the last event applied happened (events this version cannot read leave it as it was). */
  occurredAt: string | null;
  /** Revision of the last event applied; -1 before the first. */
  revision: number;
}

const noDelivery: DeliveryState = {
  attempts: 0, openClaim: null, firstAttemptAt: null, lastAttemptAt: null, nextAttemptAt: null, recipients: [], done: [], copies: [], finished: false,
};

export const initialEmailState: EmailState = {
  emailId: null, fingerprint: null, admission: null, message: null, status: null, visibleAddresses: [], reports: new Set(), recipientReports: [],
  delivery: noDelivery, providerMessageId: null, occurredAt: null, revision: -1,
};

export const reportKey = (reportId: string, recipientIndex: number): string => `${reportId}:${recipientIndex}`;

export const reportsAbout = (state: EmailState, recipientIndex: number): RecipientReports => state.recipientReports[recipientIndex] ?? NO_REPORTS;

type EmailStreamEvent = Pick<RecordedEmailEvent, 'type' | 'data'>;

const KNOWN: ReadonlySet<string> = new Set(Object.keys(EMAIL_SCHEMA_VERSIONS));

/** Whether Relay is done sending to recipient `index`: whatever its status shows now, it is never sent again. */
export const isDoneSending = (delivery: DeliveryState, index: number): boolean =>
  (delivery.done[index] ?? false) || isFinalDeliveryStatus(delivery.recipients[index] ?? 'queued');

/** Indexes of the recipients still waiting for an outcome: the send set of the next attempt. */
export const pendingRecipients = (delivery: DeliveryState): number[] =>
  delivery.recipients.flatMap((_, index) => (isDoneSending(delivery, index) ? [] : [index]));

/**
 * Whether a report moved pending recipient `index` while the open claim waits for its outcome:
 * the claim made every pending recipient processing, and only a report moves one before the
 * outcome (to `delayed`: any other report outcome is final, and ends its sending).
 */
export const reportedUnderClaim = (delivery: DeliveryState, index: number): boolean =>
  delivery.openClaim !== null && !isDoneSending(delivery, index) && delivery.recipients[index] === 'delayed';

/** The indexes a report about recipient `index` is about: every one its copy was sent for. */
export const copyOf = (delivery: DeliveryState, index: number): readonly number[] => delivery.copies[index] ?? [index];

/** Sets the recipients' statuses (and the email's from its visible ones); a recipient that reaches a final status stays done sending. */
function withRecipients(state: EmailState, delivery: DeliveryState): EmailState {
  const done = delivery.recipients.map((_, index) => isDoneSending(delivery, index));
  return { ...state, delivery: { ...delivery, done }, status: emailStatusOf(delivery.recipients.slice(0, state.visibleAddresses.length), 'queued') };
}

/** The recipients' report knowledge after `change` to those at `indexes`. */
function withReports(state: EmailState, indexes: number[], change: (known: RecipientReports) => RecipientReports): ReadonlyArray<RecipientReports | undefined> {
  const next = [...state.recipientReports];
  for (const index of indexes) next[index] = change(next[index] ?? NO_REPORTS);
  return next;
}

export function evolveEmail(state: EmailState, event: EmailStreamEvent): EmailState {
  const e = event as RecordedEmailEvent;
  // Events this version does not know still advance the revision.
  if (e.type === 'UnrecognizedEvent' || !KNOWN.has(e.type)) return { ...state, revision: state.revision + 1 };
  const next = { ...state, revision: state.revision + 1, occurredAt: e.data.occurredAt };
  switch (e.type) {
    case 'EmailAccepted':
      return {
        ...next,
        emailId: e.data.emailId,
        fingerprint: e.data.fingerprint,
        admission: { id: e.data.emailId, status: 'queued', testMode: e.data.testMode, reason: null },
        message: e.data,
        status: 'queued',
        visibleAddresses: [...e.data.toAddresses, ...e.data.ccAddresses],
        delivery: { ...noDelivery, recipients: Array.from({ length: e.data.recipientCount }, () => 'queued' as Status), done: Array.from({ length: e.data.recipientCount }, () => false) },
      };
    case 'EmailSuppressed':
      return {
        ...next,
        emailId: e.data.emailId,
        fingerprint: e.data.fingerprint,
        admission: { id: e.data.emailId, status: 'suppressed', testMode: e.data.testMode, reason: e.data.reason },
        message: e.data,
        status: 'suppressed',
        visibleAddresses: [...e.data.toAddresses, ...e.data.ccAddresses],
        delivery: { ...noDelivery, finished: true },
      };
    case 'DeliveryClaimed': {
      const d = next.delivery;
      return withRecipients(next, {
        ...d,
        attempts: Math.max(d.attempts, e.data.attempt),
        // A claim of the attempt already open takes it over: the new holder's, with nothing begun.
        openClaim: {
          attempt: e.data.attempt, claimedBy: e.data.claimedBy, claimedAt: e.data.occurredAt,
          transport: e.data.transport, transportInstance: e.data.transportInstance ?? null, begun: [], begunAt: null,
        },
        firstAttemptAt: d.firstAttemptAt ?? e.data.occurredAt,
        recipients: d.recipients.map((status, index) => statusOnClaim(status, isDoneSending(d, index))),
      });
    }
    case 'DeliveryTransactionStarted': {
      const d = next.delivery;
      const claim = d.openClaim;
      if (!claim || claim.attempt !== e.data.attempt) return next;
      const begun = [...new Set([...claim.begun, ...e.data.recipients])];
      const copies = [...d.copies];
      for (const index of e.data.recipients) copies[index] = e.data.recipients;
      return { ...next, delivery: { ...d, copies, openClaim: { ...claim, begun, begunAt: e.data.occurredAt } } };
    }
    case 'DeliveryAttempted':
    case 'DeliveryFailed': {
      const d = next.delivery;
      const outcomes = outcomesOf(e).recipients;
      const recipients = [...d.recipients];
      const done = [...d.done];
      for (const o of outcomes) {
        recipients[o.index] = statusAfter(recipients[o.index] ?? 'queued', o);
        // Final even when the report recorded first still shows: a copy went out, or never will.
        if (isFinalDeliveryStatus(o.status)) done[o.index] = true;
      }
      // An attempt's outcome is something else that happened: a reported delay after it is news
      // again. Not after one that the report recorded first had followed: that delay is still the last.
      const recipientReports = withReports(next, outcomes.filter((o) => !o.reportedFirst).map((o) => o.index), (known) => ({ ...known, delayReportedLast: false }));
      const providerMessageId = (e.type === 'DeliveryAttempted' && shownProviderMessageId(e.data)) || next.providerMessageId;
      const nextAttemptAt = e.type === 'DeliveryAttempted' ? e.data.nextAttemptAt : null;
      // A failure may leave recipients pending (a dead sender's claim: those whose transaction
      // never began): their next attempt is due at once.
      const finished = e.type === 'DeliveryAttempted' ? nextAttemptAt === null : recipients.every((_, index) => isDoneSending({ ...d, recipients, done }, index));
      return withRecipients(
        { ...next, providerMessageId, recipientReports },
        { ...d, openClaim: null, lastAttemptAt: e.data.occurredAt, nextAttemptAt, recipients, done, finished },
      );
    }
    case 'RecipientReported': {
      const d = next.delivery;
      const { reportId, recipientIndex, outcome } = e.data;
      const reports = new Set(next.reports).add(reportKey(reportId, recipientIndex));
      const recipientReports = withReports(next, [recipientIndex], (known) => ({
        outcomes: known.outcomes.includes(outcome) ? known.outcomes : [...known.outcomes, outcome],
        delayReportedLast: outcome === 'delayed',
        events: known.events + 1,
        repeated: known.repeated,
      }));
      const recorded = { ...next, reports, recipientReports };
      const [reported] = outcomesOf(e).recipients;
      if (!reported) return recorded; // undetermined: no status changes
      // Reports travel the network in any order: they only ever move a recipient up (or past `failed`).
      const recipients = [...d.recipients];
      recipients[recipientIndex] = statusAfter(recipients[recipientIndex] ?? 'queued', reported);
      const after = withRecipients(recorded, { ...d, recipients });
      // A report that leaves nobody to send to ends the delivery, as an attempt's outcome would:
      // the retry scheduled for the last pending recipient is owed to no one. Under an open claim
      // it is left to the claim: its outcome or its recovery ends it (a claim under which nothing
      // began owes nothing then: apps/services/delivery/work-items.ts).
      if (d.openClaim || pendingRecipients(after.delivery).length > 0) return after;
      return { ...after, delivery: { ...after.delivery, finished: true, nextAttemptAt: null } };
    }
    case 'RecipientReportRepeated': {
      const { reportId, recipientIndex } = e.data;
      return {
        ...next,
        reports: new Set(next.reports).add(reportKey(reportId, recipientIndex)),
        recipientReports: withReports(next, [recipientIndex], (known) => ({ ...known, events: known.events + 1, repeated: known.repeated + 1 })),
      };
    }
  }
}

export const foldEmail = (events: EmailStreamEvent[], state: EmailState = initialEmailState): EmailState => events.reduce(evolveEmail, state);
