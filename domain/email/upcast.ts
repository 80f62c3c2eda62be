// The one reading point of email streams: every stored event of an email, whatever Relay
// version wrote it, becomes today's typed event here. Version 1 is the only one so far; a
// change of an event's data shape bumps its version in EMAIL_SCHEMA_VERSIONS and adds the
// conversion from the older version below, so deciders and projections only know today's.
//
// Addresses are read in today's canonical form (canonicalAddress, domain/mailbox.ts: the form
// admission gives every address). Versions before 2026-11-28 (6ae826a) kept an address as
// written, only lower-cased: `"Ann"@example.org` was `"ann"@example.org` in the events, where
// today's admission writes ann@example.org. The shape is the same (still version 1: a version
// bump would make a rolled-back Relay read every new event as UnrecognizedEvent), only the
// values differ; so these events are read with the addresses admission would give them today,
// and a read model, a rebuild, the suppressor and the sender all agree with today's admissions
// (apps/services/management/canonical-addresses.ts re-keys what was stored beside the events).
import type { StoredEventLike } from '../decider.ts';
import { schemaVersionOf } from '../events/metadata.ts';
import { canonicalAddress, parseAddress } from '../mailbox.ts';
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

/** Text that may not be its own canonical form: a quote, an upper-case letter, a non-ASCII character. */
const MAY_CHANGE = /["A-Z]|[^\x00-\x7f]/;

/**
 * A stored address in today's canonical form (canonicalAddress). Text that is no address
 * parseAddress accepts stays as stored: a BCC recipient's stand-in ("a BCC recipient"), or an
 * address an older rule admitted and today's refuses (kept lower-cased, as it was written).
 * Lower-case ASCII without quotes is its own canonical form, so most addresses cost one test.
 */
export function canonicalStoredAddress(address: string): string {
  if (!MAY_CHANGE.test(address) || !parseAddress(address).ok) return address;
  return canonicalAddress(address);
}

/** A stored value that is an address: in canonical form; anything else (a malformed event) as stored. */
const canonicalValue = (value: unknown): unknown => (typeof value === 'string' ? canonicalStoredAddress(value) : value);

/** A list of addresses in canonical form: the list itself when none changes. */
function canonicalList(value: unknown): unknown {
  if (!Array.isArray(value)) return value;
  const canonical = value.map(canonicalValue);
  return canonical.some((a, i) => a !== value[i]) ? canonical : value;
}

/** A list of objects with an `address` (each recipient of an outcome, each suppressed recipient): the list itself when none changes. */
export function canonicalRecipients(value: unknown): unknown {
  if (!Array.isArray(value)) return value;
  const canonical = value.map((r: unknown) => {
    if (r === null || typeof r !== 'object') return r;
    const { address } = r as { address?: unknown };
    const now = canonicalValue(address);
    return now === address ? r : { ...r, address: now };
  });
  return canonical.some((r, i) => r !== value[i]) ? canonical : value;
}

/** The fields of each type that hold addresses, and how each is read. */
const ADDRESS_FIELDS: Partial<Record<EmailEvent['type'], Record<string, (value: unknown) => unknown>>> = {
  EmailAccepted: { fromAddress: canonicalValue, toAddresses: canonicalList, ccAddresses: canonicalList },
  EmailSuppressed: { fromAddress: canonicalValue, toAddresses: canonicalList, ccAddresses: canonicalList, suppressedRecipients: canonicalRecipients },
  DeliveryAttempted: { recipients: canonicalRecipients },
  DeliveryFailed: { recipients: canonicalRecipients },
  RecipientReported: { address: canonicalValue },
  RecipientReportRepeated: { address: canonicalValue },
};

/**
 * `data` with its addresses in canonical form; `data` itself when they are already (every event
 * written since 2026-11-28), so that what is read is the stored object, key order and all.
 */
function withCanonicalAddresses(type: EmailEvent['type'], data: Record<string, unknown>): Record<string, unknown> {
  const fields = ADDRESS_FIELDS[type];
  if (!fields) return data;
  let read = data;
  for (const [field, canonical] of Object.entries(fields)) {
    if (!Object.hasOwn(data, field)) continue;
    const value = canonical(data[field]);
    if (value !== data[field]) read = { ...read, [field]: value };
  }
  return read;
}

const known = (type: string): type is EmailEvent['type'] => Object.hasOwn(EMAIL_SCHEMA_VERSIONS, type);

export function upcastEmailEvent(stored: StoredEventLike): RecordedEmailEvent {
  const recorded = { id: stored.id, streamId: stored.streamId, revision: stored.revision };
  if (!known(stored.type)) return { ...recorded, type: 'UnrecognizedEvent', data: { type: stored.type } };
  const version = schemaVersionOf(stored.metadata);
  if (version > EMAIL_SCHEMA_VERSIONS[stored.type]) {
    // Written by a newer Relay: this version cannot read it, and must not guess.
    return { ...recorded, type: 'UnrecognizedEvent', data: { type: stored.type, schemaVersion: version } };
  }
  return { ...recorded, type: stored.type, data: withCanonicalAddresses(stored.type, stored.data) } as unknown as RecordedEmailEvent;
}
