// Builders for the events of an email's stream (domain/email/events.ts), as deciders emit them,
// as the event store takes them (NewEvent) and as readers receive them (RecordedEmailEvent,
// through upcastEmailEvent). The default message is admittedMessage(): recipient 0 is the To
// (ann@example.test), 1 the CC (cc@example.test), 2 the BCC, whose address no event holds.
import { randomUUID } from 'node:crypto';
import type {
  AdmittedMessage, DeliveryAttempted, DeliveryClaimed, DeliveryFailed, EmailAccepted, EmailSuppressed,
  RecipientAttempt, RecordedEmailEvent, SuppressedRecipient,
} from '../../domain/email/events.ts';
import { emailStreamId } from '../../domain/email/events.ts';
import { upcastEmailEvent } from '../../domain/email/upcast.ts';
import type { Status } from '../../domain/email/status.ts';
import type { NewEvent } from '../../infra/ports/event-store.ts';
import { admittedMessage } from './builders.ts';

/** Any event of an email stream, known to this version or not. */
export interface AnyEmailEvent {
  type: string;
  data: object;
}

/** When the default message was admitted. */
export const T0 = '2026-11-01T10:00:00.000Z';
/** `ms` milliseconds after `from` (T0 by default), as an ISO string. */
export const after = (ms: number, from: string = T0): string => new Date(Date.parse(from) + ms).toISOString();

export const TO = 'ann@example.test';
export const CC = 'cc@example.test';
/** Indexes of the default message's recipients. */
export const TO_INDEX = 0;
export const CC_INDEX = 1;
export const BCC_INDEX = 2;
const visibleAddress = (index: number): string | null => [TO, CC][index] ?? null;

export const accepted = (overrides: Partial<AdmittedMessage> = {}): EmailAccepted => ({ type: 'EmailAccepted', data: admittedMessage(overrides) });

export function suppressed(suppressedRecipients: SuppressedRecipient[], overrides: Partial<AdmittedMessage> = {}): EmailSuppressed {
  const first = suppressedRecipients[0];
  return {
    type: 'EmailSuppressed',
    data: { ...admittedMessage(overrides), suppressedRecipients, reason: `${first.address} is suppressed (${first.reason})` },
  };
}

export const claimed = (overrides: Partial<DeliveryClaimed['data']> = {}): DeliveryClaimed => ({
  type: 'DeliveryClaimed',
  data: { attempt: 1, claimedBy: 'sender-a', transport: 'smtp', occurredAt: after(1_000), ...overrides },
});

/** One recipient's outcome; the address is the default message's (null for the BCC) unless given. */
export const outcome = (index: number, status: Status, overrides: Partial<RecipientAttempt> = {}): RecipientAttempt => ({
  index, address: visibleAddress(index), status, smtpCode: 250, enhancedCode: '2.0.0', response: `250 ${status}`, ...overrides,
});

export const attempted = (recipients: RecipientAttempt[], overrides: Partial<DeliveryAttempted['data']> = {}): DeliveryAttempted => ({
  type: 'DeliveryAttempted',
  data: {
    attempt: 1, transport: 'smtp', messageId: '<m1@example.test>', providerMessageId: null, recipients,
    nextAttemptAt: null, failureCode: null, occurredAt: after(2_000), ...overrides,
  },
});

export const deliveryFailed = (indexes: number[], overrides: Partial<DeliveryFailed['data']> = {}): DeliveryFailed => ({
  type: 'DeliveryFailed',
  data: {
    attempt: 1, failureCode: 'delivery_unknown', reason: 'the claim was left open',
    recipients: indexes.map((index) => ({ index, address: visibleAddress(index) })), occurredAt: after(3_000), ...overrides,
  },
});

/** An event written by a newer Relay, of a type this version does not know. */
export const unknownEvent = (type = 'EmailOpened'): AnyEmailEvent => ({ type, data: { at: T0 } });

/** The events as read back from `email-<emailId>`, revisions from `fromRevision`, ids `evt-<revision>`. */
export function recorded(events: AnyEmailEvent[], emailId = 'em_test1', fromRevision = 0): RecordedEmailEvent[] {
  return events.map((event, i) => upcastEmailEvent({
    id: `evt-${fromRevision + i}`,
    streamId: emailStreamId(emailId),
    revision: fromRevision + i,
    type: event.type,
    data: event.data as Record<string, unknown>,
    metadata: { schemaVersion: 1 },
  }));
}

/** The event as appended to the event store. */
export const toNewEvent = (event: AnyEmailEvent): NewEvent => ({
  id: randomUUID(),
  type: event.type,
  data: event.data as Record<string, unknown>,
  metadata: { correlationId: 'test', causationId: 'test', schemaVersion: 1 },
});
