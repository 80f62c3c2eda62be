// The one reading point of email streams: every stored event of an email, whatever Relay
// version wrote it, becomes today's typed event here. Version 1 is the only one so far; a
// change of an event's data shape bumps its version in EMAIL_SCHEMA_VERSIONS and adds the
// conversion from the older version below, so deciders and projections only know today's.
import type { StoredEventLike } from '../decider.ts';
import { schemaVersionOf } from '../events/metadata.ts';
import type { EmailEvent, RecordedEmailEvent } from './events.ts';

export const EMAIL_SCHEMA_VERSIONS: Record<EmailEvent['type'], number> = {
  EmailAccepted: 1,
  EmailSuppressed: 1,
  DeliveryClaimed: 1,
  DeliveryTransactionStarted: 1,
  DeliveryAttempted: 1,
  DeliveryFailed: 1,
  RecipientReported: 1,
  RecipientReportRepeated: 1,
};

/** The conversions from older versions, per type (none so far): what the event catalog tells readers. */
export const EMAIL_UPCASTS: Record<EmailEvent['type'], ReadonlyArray<{ from: number; change: string }>> = {
  EmailAccepted: [], EmailSuppressed: [], DeliveryClaimed: [], DeliveryTransactionStarted: [], DeliveryAttempted: [], DeliveryFailed: [], RecipientReported: [], RecipientReportRepeated: [],
};

const known = (type: string): type is EmailEvent['type'] => Object.hasOwn(EMAIL_SCHEMA_VERSIONS, type);

export function upcastEmailEvent(stored: StoredEventLike): RecordedEmailEvent {
  const recorded = { id: stored.id, streamId: stored.streamId, revision: stored.revision };
  if (!known(stored.type)) return { ...recorded, type: 'UnrecognizedEvent', data: { type: stored.type } };
  const version = schemaVersionOf(stored.metadata);
  if (version > EMAIL_SCHEMA_VERSIONS[stored.type]) {
    // Written by a newer Relay: this version cannot read it, and must not guess.
    return { ...recorded, type: 'UnrecognizedEvent', data: { type: stored.type, schemaVersion: version } };
  }
  return { ...recorded, type: stored.type, data: stored.data } as unknown as RecordedEmailEvent;
}
