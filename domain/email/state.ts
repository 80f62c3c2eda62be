// The state of one email as its deciders see it, folded from the email's stream.
import type { AdmissionResult } from './admission.ts';
import type { AdmittedMessage, RecordedEmailEvent } from './events.ts';
import { EMAIL_SCHEMA_VERSIONS } from './upcast.ts';
import { emailStatusOf, isFinalDeliveryStatus, supersede, type Status } from './status.ts';

export interface OpenClaim {
  attempt: number;
  claimedBy: string;
  claimedAt: string;
}

export interface DeliveryState {
  /** Attempts claimed so far. */
  attempts: number;
  /** A claim with no outcome yet: someone is sending, or died while sending. */
  openClaim: OpenClaim | null;
  firstAttemptAt: string | null;
  /** When the last attempt's outcome (or the delivery's failure) was recorded. */
  lastAttemptAt: string | null;
  nextAttemptAt: string | null;
  /** Status per recipient index (To, CC, BCC as admitted). */
  recipients: Status[];
  finished: boolean;
}

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
  /** `${reportId}:${recipientIndex}` of every report recorded. */
  reports: ReadonlySet<string>;
  delivery: DeliveryState;
  /** The provider's id of the message, from the latest attempt that reported one. */
  providerMessageId: string | null;
  /** When the last event applied happened (events this version cannot read leave it as it was). */
  occurredAt: string | null;
  /** Revision of the last event applied; -1 before the first. */
  revision: number;
}

const noDelivery: DeliveryState = {
  attempts: 0, openClaim: null, firstAttemptAt: null, lastAttemptAt: null, nextAttemptAt: null, recipients: [], finished: false,
};

export const initialEmailState: EmailState = {
  emailId: null, fingerprint: null, admission: null, message: null, status: null, visibleAddresses: [], reports: new Set(),
  delivery: noDelivery, providerMessageId: null, occurredAt: null, revision: -1,
};

export const reportKey = (reportId: string, recipientIndex: number): string => `${reportId}:${recipientIndex}`;

type EmailStreamEvent = Pick<RecordedEmailEvent, 'type' | 'data'>;

const KNOWN: ReadonlySet<string> = new Set(Object.keys(EMAIL_SCHEMA_VERSIONS));

/** Indexes of the recipients still waiting for an outcome. */
export const pendingRecipients = (delivery: DeliveryState): number[] =>
  delivery.recipients.flatMap((status, index) => (isFinalDeliveryStatus(status) ? [] : [index]));

function withRecipients(state: EmailState, delivery: DeliveryState): EmailState {
  return { ...state, delivery, status: emailStatusOf(delivery.recipients.slice(0, state.visibleAddresses.length), 'queued') };
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
        delivery: { ...noDelivery, recipients: Array.from({ length: e.data.recipientCount }, () => 'queued' as Status) },
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
        openClaim: { attempt: e.data.attempt, claimedBy: e.data.claimedBy, claimedAt: e.data.occurredAt },
        firstAttemptAt: d.firstAttemptAt ?? e.data.occurredAt,
        recipients: d.recipients.map((s) => (isFinalDeliveryStatus(s) ? s : 'processing')),
      });
    }
    case 'DeliveryAttempted': {
      const d = next.delivery;
      const recipients = [...d.recipients];
      // The sender's own outcomes come in attempt order on the stream: the latest stands
      // (a retry that succeeds ends a delay). Only reports from outside will need the order.
      for (const r of e.data.recipients) recipients[r.index] = r.status;
      return withRecipients(
        { ...next, providerMessageId: e.data.providerMessageId || next.providerMessageId },
        { ...d, openClaim: null, lastAttemptAt: e.data.occurredAt, nextAttemptAt: e.data.nextAttemptAt, recipients, finished: e.data.nextAttemptAt === null },
      );
    }
    case 'DeliveryFailed': {
      const d = next.delivery;
      const recipients = [...d.recipients];
      for (const r of e.data.recipients) recipients[r.index] = 'failed';
      return withRecipients(next, { ...d, openClaim: null, lastAttemptAt: e.data.occurredAt, nextAttemptAt: null, recipients, finished: true });
    }
    case 'RecipientReported': {
      const d = next.delivery;
      const reports = new Set(next.reports).add(reportKey(e.data.reportId, e.data.recipientIndex));
      if (e.data.outcome === 'undetermined') return { ...next, reports };
      // Reports travel the network in any order: they only ever move a recipient up.
      const recipients = [...d.recipients];
      recipients[e.data.recipientIndex] = supersede(recipients[e.data.recipientIndex] ?? 'queued', e.data.outcome);
      return withRecipients({ ...next, reports }, { ...d, recipients });
    }
  }
}

export const foldEmail = (events: EmailStreamEvent[], state: EmailState = initialEmailState): EmailState => events.reduce(evolveEmail, state);
