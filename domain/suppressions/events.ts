// Changes of a workspace's suppression list, as events on the stream `suppressions-<workspaceId>`,
// so that the list's history replays like everything else. The list itself stays the
// `suppressions` collection that admission reads (apps/services/management/suppressions.ts says
// in which order the two are written and what a crash between them leaves).
import { Type, type Static, type TSchema } from '@sinclair/typebox';

export const SUPPRESSION_STREAM_PREFIX = 'suppressions-';
export const suppressionStreamId = (workspaceId: string): string => `${SUPPRESSION_STREAM_PREFIX}${workspaceId}`;

const Reason = Type.Union([Type.Literal('manual'), Type.Literal('hard_bounce'), Type.Literal('complaint')]);

/**
 * Who or what made the change: a signed-in user, or an email event (a hard bounce, a complaint).
 * An email event about a BCC recipient is not named: the address is on the list, and naming the
 * email (or its event, or the report) would tell, for good, whose BCC recipient it was.
 */
export const SuppressionCauseSchema = Type.Union([
  Type.Object({ kind: Type.Literal('user'), userId: Type.String() }),
  Type.Object({
    kind: Type.Literal('email_event'),
    emailId: Type.String(),
    eventId: Type.String({ description: 'The DeliveryAttempted or RecipientReported event that called for it.' }),
    reportId: Type.Union([Type.String(), Type.Null()], { description: 'The reportId of the RecipientReported that called for it; null for a DeliveryAttempted.' }),
  }),
  Type.Object(
    { kind: Type.Literal('bcc_recipient_event') },
    {
      description: 'A hard bounce or complaint of a BCC recipient: which email, event or report is never said (nor by the metadata, the event\'s id or its ' +
        'occurredAt: an origin of its own, an id derived with a key, the time the block was made), so that the address is not tied to the email it was a BCC recipient of.',
    },
  ),
]);
export type SuppressionCause = Static<typeof SuppressionCauseSchema>;

export const RecipientSuppressedDataSchema = Type.Object({
  workspaceId: Type.String(),
  address: Type.String({ description: 'Normalized (trimmed, lower case).' }),
  reason: Reason,
  by: SuppressionCauseSchema,
  occurredAt: Type.String({
    format: 'date-time',
    description: "When it was added: a user's request; for a bounce or complaint of a To or CC recipient, that email event's occurredAt; of a BCC recipient, when the block was made.",
  }),
});

export const RecipientUnsuppressedDataSchema = Type.Object({
  workspaceId: Type.String(),
  address: Type.String(),
  /** What had put it there. */
  reason: Reason,
  by: SuppressionCauseSchema,
  occurredAt: Type.String({ format: 'date-time' }),
});

export type RecipientSuppressed = { type: 'RecipientSuppressed'; data: Static<typeof RecipientSuppressedDataSchema> };
export type RecipientUnsuppressed = { type: 'RecipientUnsuppressed'; data: Static<typeof RecipientUnsuppressedDataSchema> };
export type SuppressionEvent = RecipientSuppressed | RecipientUnsuppressed;

export const SUPPRESSION_EVENT_DATA: { [K in SuppressionEvent['type']]: TSchema } = {
  RecipientSuppressed: RecipientSuppressedDataSchema,
  RecipientUnsuppressed: RecipientUnsuppressedDataSchema,
};

export const SUPPRESSION_SCHEMA_VERSIONS: Record<SuppressionEvent['type'], number> = { RecipientSuppressed: 1, RecipientUnsuppressed: 1 };
