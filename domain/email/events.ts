// Events of an email's stream (`email-<id>`). Event data is what the event store keeps
// forever, so it never holds message bodies or BCC in clear: those travel in `content`,
// sealed with a per-email key that is destroyed after the retention period. The TypeBox schemas
// are the source of truth of each event's data: the types are derived from them (Static), and so
// is the event catalog (apps/services/event-catalog.ts: `relay events schema`, GET /v1/asyncapi.json).
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { ReportOutcome } from '../feedback/classify.ts';
import { STATUSES } from './status.ts';

export const EMAIL_STREAM_PREFIX = 'email-';
export const emailStreamId = (emailId: string): string => `${EMAIL_STREAM_PREFIX}${emailId}`;
/** The email an event of stream `email-<id>` belongs to. */
export const emailIdOfStream = (streamId: string): string => streamId.slice(EMAIL_STREAM_PREFIX.length);

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const Instant = Type.String({ format: 'date-time', description: 'When it happened (ISO 8601, UTC).' });
const RecipientIndex = Type.Integer({ minimum: 0, description: 'Recipient index: To, then CC, then BCC, in the order admitted.' });
const StatusSchema = Type.Union(STATUSES.map((s) => Type.Literal(s)));
const ReportedFirst = Type.Optional(Type.Literal(true, {
  description: 'A report about this recipient (a delay, which the provider can only have written after it took this attempt\'s copy) was recorded ' +
    'under this attempt before this outcome: the status is what that report makes of this outcome (docs/event-status-rules.md). Absent otherwise.',
}));

/** Message bodies and BCC, encrypted; the key lives outside the event store and expires. */
export const SealedContentSchema = Type.Object({
  keyId: Type.String({ description: 'The per-email key, destroyed after the retention period (7 days).' }),
  alg: Type.Literal('A256GCM'),
  iv: Type.String(),
  data: Type.String({ description: 'The ciphertext (base64) of {html, text, bcc}.' }),
  tag: Type.String(),
}, { description: 'Bodies and BCC addresses, sealed: unreadable once the key is destroyed.' });
export type SealedContent = Static<typeof SealedContentSchema>;

/** What the sealed content holds once opened. */
export interface EmailContent {
  html: string | null;
  text: string | null;
  bcc: string[];
}

export const TemplateReferenceSchema = Type.Object({ id: Type.String(), slug: Type.String(), revision: Type.Integer({ minimum: 1 }) });
export type TemplateReference = Static<typeof TemplateReferenceSchema>;

/** The admitted message, common to accepted and suppressed emails. */
export const AdmittedMessageSchema = Type.Object({
  emailId: Type.String(),
  projectId: Type.String(),
  workspaceId: Type.String(),
  apiKeyId: Type.String(),
  testMode: Type.Boolean({ description: 'Sent with a development key.' }),
  fingerprint: Type.String({
    description: 'A MAC (HMAC-SHA-256, hex) of the canonical request body under a key derived from RELAY_SECRET_KEY: idempotent replays must match it. ' +
      'It cannot be recomputed without that key (emails admitted by versions before keyed fingerprints hold the plain sha256 of the body).',
  }),
  idempotencyKey: Nullable(Type.String()),
  from: Type.String({ description: 'The From mailbox as written.' }),
  fromAddress: Type.String(),
  fromDomain: Type.String({ description: 'The sending domain.' }),
  to: Type.Array(Type.String(), { description: 'Mailboxes as written (trimmed).' }),
  toAddresses: Type.Array(Type.String(), { description: 'Normalized addresses, recipient indexes 0…' }),
  cc: Type.Array(Type.String()),
  ccAddresses: Type.Array(Type.String(), { description: 'Normalized addresses, recipient indexes after the To ones.' }),
  bccCount: Type.Integer({ minimum: 0, description: 'BCC recipients (indexes after CC); their addresses are only in the sealed content.' }),
  replyTo: Nullable(Type.String()),
  subject: Type.String(),
  headers: Type.Record(Type.String(), Type.String()),
  tags: Type.Record(Type.String(), Type.String()),
  metadata: Type.Record(Type.String(), Type.Unknown()),
  template: Nullable(TemplateReferenceSchema),
  recipientCount: Type.Integer({ minimum: 1, description: 'To + CC + BCC: what the monthly allowance is charged.' }),
  content: SealedContentSchema,
  occurredAt: Instant,
});
export type AdmittedMessage = Static<typeof AdmittedMessageSchema>;

export const SuppressedRecipientSchema = Type.Object({
  address: Type.String({ description: 'The normalized address; for a BCC recipient the words "a BCC recipient" (its address is in no event).' }),
  reason: Type.String({ description: 'What put it on the list: manual, hard_bounce or complaint.' }),
});
export type SuppressedRecipient = Static<typeof SuppressedRecipientSchema>;

export const EmailSuppressedDataSchema = Type.Composite([AdmittedMessageSchema, Type.Object({
  suppressedRecipients: Type.Array(SuppressedRecipientSchema, { description: 'The recipients on the suppression list (a BCC one included: never shown).' }),
  reason: Type.String(),
})]);

export type EmailAccepted = { type: 'EmailAccepted'; data: AdmittedMessage };
export type EmailSuppressed = { type: 'EmailSuppressed'; data: Static<typeof EmailSuppressedDataSchema> };

/**
 * A sender instance took the email's next delivery attempt: only the instance whose claim was
 * appended (expected revision) sends. A claim is a reservation: nothing has gone out until a
 * DeliveryTransactionStarted follows it. A claim whose sender stopped before any transaction
 * began is taken over by another sender (a second claim of the same attempt) once its start
 * grace ends.
 */
export const DeliveryClaimedDataSchema = Type.Object({
  attempt: Type.Integer({ minimum: 1 }),
  claimedBy: Type.String({ description: 'The sender instance.' }),
  transport: Type.String({ description: 'outbox, smtp or mx.' }),
  transportInstance: Type.Optional(Type.String({
    description: 'Which transport of that name the claim sends with, when it can be told apart from another: for outbox, the id of the outbox directory written to. ' +
      'After a crash, only that one outbox is asked what became of the claim\'s transactions. Absent for smtp and mx, and in events from before it was kept ' +
      '(the recipients of such a claim whose transaction began, left open, end delivery_unknown).',
  })),
  occurredAt: Instant,
});
export type DeliveryClaimed = { type: 'DeliveryClaimed'; data: Static<typeof DeliveryClaimedDataSchema> };

/**
 * The claim's holder is about to begin the SMTP transaction (the outbox: the file write) for
 * these recipients: appended, and durable, after the transport holds a connection and right
 * before the first command that could deliver the message. From here on the message may go
 * out, so a recipient named here whose attempt gets no outcome ends as delivery_unknown; the
 * claim can no longer be taken over.
 */
export const DeliveryTransactionStartedDataSchema = Type.Object({
  attempt: Type.Integer({ minimum: 1 }),
  recipients: Type.Array(RecipientIndex, { description: 'The recipients of the transaction that begins (one address; several indexes when it was listed twice).' }),
  occurredAt: Instant,
});
export type DeliveryTransactionStarted = { type: 'DeliveryTransactionStarted'; data: Static<typeof DeliveryTransactionStartedDataSchema> };

/**
 * What one recipient's transaction came to, by recipient index (To, then CC, then BCC, as
 * admitted). `address` is null for BCC recipients: their addresses are never in an event.
 */
export const RecipientAttemptSchema = Type.Object({
  index: RecipientIndex,
  address: Nullable(Type.String({ description: 'Null for a BCC recipient.' })),
  status: StatusSchema,
  smtpCode: Nullable(Type.Integer()),
  enhancedCode: Nullable(Type.String()),
  response: Type.String({ description: "The server's reply or the local error; never message content. A BCC recipient's has every address in it masked (\"<address>\")." }),
  providerMessageId: Type.Optional(
    Nullable(Type.String({ description: 'The queue id the accepting server gave this recipient\'s transaction; absent in events from before it was kept.' })),
  ),
  failureCode: Type.Optional(
    Type.String({
      description: 'Why this recipient failed or was rejected (delivery_unknown, provider_unavailable, provider_rejected); absent for other statuses, and in events from before it was kept (the event\'s failureCode stands then).',
    }),
  ),
  reportedFirst: ReportedFirst,
});
export type RecipientAttempt = Static<typeof RecipientAttemptSchema>;

/** The outcome of a claimed attempt, per recipient, and when the next one is due, if any. */
export const DeliveryAttemptedDataSchema = Type.Object({
  attempt: Type.Integer({ minimum: 1 }),
  transport: Type.String(),
  messageId: Type.String({ description: 'The Message-ID of the message sent.' }),
  providerMessageId: Nullable(Type.String()),
  recipients: Type.Array(RecipientAttemptSchema),
  nextAttemptAt: Nullable(Type.String({ format: 'date-time', description: 'Set while recipients wait for a retry after a temporary failure.' })),
  failureCode: Nullable(Type.String({ description: 'Why recipients failed for good, when some did: provider_unavailable, delivery_unknown, … (BCC ones included). Each recipient\'s own is recipients[i].failureCode; this one stands only for events from before that was kept.' })),
  occurredAt: Instant,
});
export type DeliveryAttempted = { type: 'DeliveryAttempted'; data: Static<typeof DeliveryAttemptedDataSchema> };

/**
 * An attempt ended without a transport outcome: for every recipient still pending when its
 * holder gives up (content_expired: the body was destroyed before it went out;
 * sender_domain_unavailable: the domain or its DKIM key is gone; message_unbuildable), or, as
 * delivery_unknown, for the recipients whose transaction had begun when their sender stopped
 * (the others stay pending and are sent by the next attempt).
 */
export const DeliveryFailedDataSchema = Type.Object({
  attempt: Type.Integer({ minimum: 0 }),
  failureCode: Type.String({ description: 'delivery_unknown, content_expired, sender_domain_unavailable or message_unbuildable.' }),
  reason: Type.String(),
  recipients: Type.Array(Type.Object({ index: RecipientIndex, address: Nullable(Type.String()), reportedFirst: ReportedFirst })),
  occurredAt: Instant,
});
export type DeliveryFailed = { type: 'DeliveryFailed'; data: Static<typeof DeliveryFailedDataSchema> };

/** What a report about one recipient said (a DSN, an ARF complaint, a bounce in plain text). */
export const REPORT_OUTCOMES = ['hard_bounced', 'soft_bounced', 'delayed', 'delivered', 'complained', 'undetermined'] as const satisfies readonly ReportOutcome[];
export type ReportedOutcome = ReportOutcome;

const ReportIdDescription = "The finding's identity, not the report's Message-ID: 32 base64url characters of a SHA-256 over the report's " +
  'Message-ID (else the SHA-256 of its bytes), the finding\'s place in the report and what it found (outcome, status). The same report taken ' +
  'again gives the same reportId and is not recorded again.';

/**
 * A report that came back to the recipient's return path (VERP), about that recipient. Kept
 * even when it could not be classified (`undetermined`), which changes no status.
 */
export const RecipientReportedDataSchema = Type.Object({
  reportId: Type.String({ description: ReportIdDescription }),
  recipientIndex: RecipientIndex,
  address: Nullable(Type.String({ description: 'Null for a BCC recipient.' })),
  outcome: Type.Union(REPORT_OUTCOMES.map((o) => Type.Literal(o))),
  format: Type.Union([Type.Literal('dsn'), Type.Literal('arf'), Type.Literal('text')], { description: 'dsn (RFC 3464), arf (RFC 5965) or text (a bounce in another format).' }),
  status: Nullable(Type.String({
    description: 'The enhanced status code the report gave, normalized ("5.1.1"), or null; a comment after it is in `reason`. ' +
      'Events recorded by earlier versions may hold the Status field as written: read only a leading code from it.',
  })),
  diagnosticCode: Nullable(Type.String({ description: 'As reported; about a BCC recipient, every address in it masked ("<address>").' })),
  reason: Type.String({ description: 'The report\'s explanation, at most 1,000 characters; about a BCC recipient, every address in it masked.' }),
  complaintType: Nullable(Type.String({ description: 'ARF Feedback-Type (abuse, fraud, …) for a complaint.' })),
  occurredAt: Instant,
});
export type RecipientReported = { type: 'RecipientReported'; data: Static<typeof RecipientReportedDataSchema> };

/**
 * A report that said nothing new about its recipient (the same outcome again, a delay after a
 * delay): counted, never shown as an entry of its own nor sent as a webhook.
 */
export const RecipientReportRepeatedDataSchema = Type.Object({
  reportId: Type.String({ description: ReportIdDescription }),
  recipientIndex: RecipientIndex,
  address: Nullable(Type.String({ description: 'Null for a BCC recipient.' })),
  outcome: Type.Union(REPORT_OUTCOMES.map((o) => Type.Literal(o))),
  occurredAt: Instant,
});
export type RecipientReportRepeated = { type: 'RecipientReportRepeated'; data: Static<typeof RecipientReportRepeatedDataSchema> };

export type EmailEvent =
  | EmailAccepted | EmailSuppressed | DeliveryClaimed | DeliveryTransactionStarted | DeliveryAttempted | DeliveryFailed | RecipientReported | RecipientReportRepeated;
export type EmailEventType = EmailEvent['type'];

/** The data schema of each event type of an email stream: the source of the types above and of the event catalog. */
export const EMAIL_EVENT_DATA: { [K in EmailEventType]: TSchema } = {
  EmailAccepted: AdmittedMessageSchema,
  EmailSuppressed: EmailSuppressedDataSchema,
  DeliveryClaimed: DeliveryClaimedDataSchema,
  DeliveryTransactionStarted: DeliveryTransactionStartedDataSchema,
  DeliveryAttempted: DeliveryAttemptedDataSchema,
  DeliveryFailed: DeliveryFailedDataSchema,
  RecipientReported: RecipientReportedDataSchema,
  RecipientReportRepeated: RecipientReportRepeatedDataSchema,
};

/** An event of a type this version does not know (written by a newer one): skipped, never guessed at. */
export type UnrecognizedEvent = { type: 'UnrecognizedEvent'; data: { type: string; schemaVersion?: number } };

/** An event as read back (through upcastEmailEvent): what deciders, projections and processors receive. */
export type RecordedEmailEvent = (EmailEvent | UnrecognizedEvent) & {
  id: string;
  streamId: string;
  revision: number;
};

/** When a recorded event happened; null for one this version cannot read. */
export const occurredAtOf = (event: RecordedEmailEvent): string | null => (event.type === 'UnrecognizedEvent' ? null : event.data.occurredAt);
