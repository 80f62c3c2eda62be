// The one reading point of suppression streams (`suppressions-<workspaceId>`; see
// domain/email/upcast.ts for the pattern): a stored suppression change, whatever Relay version
// wrote it, becomes today's typed event here, or UnrecognizedEvent when this version cannot read
// it (a type it does not know, or a version above SUPPRESSION_SCHEMA_VERSIONS). A change of an
// event's data shape bumps its version there and adds the conversion from the older version below.
import { schemaVersionOf } from '../events/metadata.ts';
import { SUPPRESSION_SCHEMA_VERSIONS, type SuppressionEvent } from './events.ts';

export { SUPPRESSION_SCHEMA_VERSIONS };

/** The conversions from older versions, per type (none so far): what the event catalog tells readers. */
export const SUPPRESSION_UPCASTS: Record<SuppressionEvent['type'], ReadonlyArray<{ from: number; change: string }>> = {
  RecipientSuppressed: [], RecipientUnsuppressed: [],
};

/** What this version does not read: the type, and the version when the type is known. */
export type UnrecognizedSuppressionEvent = { type: 'UnrecognizedEvent'; data: { type: string; schemaVersion?: number } };

const known = (type: string): type is SuppressionEvent['type'] => Object.hasOwn(SUPPRESSION_SCHEMA_VERSIONS, type);

export function upcastSuppressionEvent(stored: { type: string; data: Record<string, unknown>; metadata?: Record<string, unknown> }): SuppressionEvent | UnrecognizedSuppressionEvent {
  if (!known(stored.type)) return { type: 'UnrecognizedEvent', data: { type: stored.type } };
  const version = schemaVersionOf(stored.metadata);
  if (version > SUPPRESSION_SCHEMA_VERSIONS[stored.type]) {
    // Written by a newer Relay: this version cannot read it, and must not guess.
    return { type: 'UnrecognizedEvent', data: { type: stored.type, schemaVersion: version } };
  }
  return { type: stored.type, data: stored.data } as unknown as SuppressionEvent;
}
