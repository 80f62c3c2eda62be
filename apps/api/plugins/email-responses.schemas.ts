// What the email endpoints answer (spec: SendResult, EmailSummary, EmailDetail), for the OpenAPI
// document (apps/api/openapi.ts). They document, they do not serialize: the handlers build these
// bodies (apps/api/plugins/emails.ts), and test/openapi.int.test.ts checks real answers against
// them so the two cannot drift apart.
import { Type, type TString } from '@sinclair/typebox';
import { STATUSES } from '../../../domain/email/status.ts';

const Status = Type.Union(STATUSES.map((s) => Type.Literal(s)));
const DateTime = Type.String({ format: 'date-time' });
const OrNull = (schema: TString) => Type.Union([schema, Type.Null()]);

export const SendResult = Type.Object({
  id: Type.String({ description: 'The email\'s id (em_…).' }),
  status: Type.Union([Type.Literal('queued'), Type.Literal('suppressed')]),
  test_mode: Type.Boolean({ description: 'True for a development key: the email is processed but not delivered to the internet.' }),
  reason: Type.Optional(Type.String({ description: 'Why the email was suppressed.' })),
}, { additionalProperties: false });

export const EmailSummary = Type.Object({
  id: Type.String(),
  fromAddress: Type.String(),
  toAddresses: Type.Array(Type.String()),
  subject: Type.String(),
  status: Status,
  testMode: Type.Boolean(),
  failureCode: OrNull(Type.String()),
  createdAt: DateTime,
  sentAt: OrNull(DateTime),
}, { additionalProperties: false });

export const EmailList = Type.Object({
  emails: Type.Array(EmailSummary),
  next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as `cursor` for the next page; null on the last.' }),
}, { additionalProperties: false });

const WebhookAttemptLog = Type.Object({
  number: Type.Integer(),
  httpStatus: Type.Union([Type.Integer(), Type.Null()]),
  errorCode: OrNull(Type.String()),
  durationMs: Type.Integer(),
  createdAt: DateTime,
}, { additionalProperties: false });

export const EmailDetail = Type.Object({
  id: Type.String(),
  fromAddress: Type.String(),
  subject: Type.String(),
  status: Status,
  testMode: Type.Boolean(),
  failureCode: OrNull(Type.String()),
  createdAt: DateTime,
  sentAt: OrNull(DateTime),
  deliveredAt: OrNull(DateTime),
  to: Type.Array(Type.String()),
  cc: Type.Array(Type.String()),
  reply_to: OrNull(Type.String()),
  providerMessageId: OrNull(Type.String()),
  recipients: Type.Array(Type.Object({ address: Type.String(), status: Status, occurredAt: DateTime }, { additionalProperties: false }), {
    description: 'To and CC recipients (BCC recipients are not shown).',
  }),
  webhookDeliveries: Type.Array(Type.Object({
    id: Type.String(),
    eventId: Type.String(),
    status: Type.String(),
    nextAttemptAt: OrNull(DateTime),
    attemptLogs: Type.Array(WebhookAttemptLog),
  }, { additionalProperties: false }), { maxItems: 100, description: 'Newest first.' }),
  metadata: Type.Record(Type.String(), Type.Unknown()),
  tags: Type.Record(Type.String(), Type.String()),
  events: Type.Array(Type.Object({ id: Type.String(), type: Type.String(), occurredAt: DateTime, payload: Type.Record(Type.String(), Type.Unknown()) }, { additionalProperties: false }), {
    description: 'The email\'s timeline.',
  }),
}, { additionalProperties: false });

export const EmailMessage = Type.Object({
  id: Type.String(),
  from: Type.String(),
  to: Type.Array(Type.String()),
  cc: Type.Array(Type.String()),
  replyTo: OrNull(Type.String()),
  subject: Type.String(),
  headers: Type.Record(Type.String(), Type.String(), { description: 'The headers the sender gave; Relay adds its own (Message-ID, DKIM-Signature, …) when it composes.' }),
  html: OrNull(Type.String()),
  text: OrNull(Type.String()),
  retainedUntil: Type.String({ format: 'date-time', description: 'When the bodies are destroyed (seven days after admission).' }),
}, { additionalProperties: false });
