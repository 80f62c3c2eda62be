// Request schemas of the email endpoints (spec: SendEmail, TemplateSend, list query).
import { Type, type Static } from '@sinclair/typebox';
import { STATUSES } from '../../../domain/email/status.ts';

const Mailbox = Type.String({ errorMessage: 'must be a mailbox string' });
const MailboxOrList = Type.Union([Mailbox, Type.Array(Mailbox, { minItems: 1, maxItems: 50 })], {
  errorMessage: 'must be a mailbox or an array of 1 to 50 mailboxes',
});
const NoCrLf = '^[^\\r\\n]*$';

export const Headers = Type.Record(Type.String(), Type.String({ maxLength: 998 }), {
  errorMessage: 'must be an object of string header values of at most 998 characters',
});
export const Tags = Type.Record(Type.String(), Type.String({ maxLength: 256 }), {
  maxProperties: 20,
  errorMessage: 'must be an object of at most 20 string tags',
});
export const Metadata = Type.Record(Type.String(), Type.Unknown(), { errorMessage: 'must be an object' });

export const SendEmailBody = Type.Object(
  {
    from: Mailbox,
    to: MailboxOrList,
    cc: Type.Optional(MailboxOrList),
    bcc: Type.Optional(MailboxOrList),
    reply_to: Type.Optional(Mailbox),
    subject: Type.String({ minLength: 1, maxLength: 998, pattern: NoCrLf, errorMessage: 'must be 1 to 998 characters without CR or LF' }),
    html: Type.Optional(Type.String({ maxLength: 10_000_000 })),
    text: Type.Optional(Type.String({ maxLength: 10_000_000 })),
    headers: Type.Optional(Headers),
    tags: Type.Optional(Tags),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);
export type SendEmailBody = Static<typeof SendEmailBody>;

export const IdParam = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9_-]+$', errorMessage: 'must be 1 to 64 characters of letters, digits, _ and -' }),
});

export const ListEmailsQuery = Type.Object(
  {
    sender: Type.Optional(Type.String({ minLength: 1, maxLength: 254 })),
    domain: Type.Optional(Type.String({ minLength: 1, maxLength: 253 })),
    after: Type.Optional(Type.String({ format: 'date-time', errorMessage: 'must be an RFC 3339 date-time' })),
    before: Type.Optional(Type.String({ format: 'date-time', errorMessage: 'must be an RFC 3339 date-time' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, errorMessage: 'must be an integer from 1 to 100' })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9_-]+$', errorMessage: 'must be 1 to 64 characters of letters, digits, _ and -' })),
    status: Type.Optional(Type.Union(STATUSES.map((s) => Type.Literal(s)), { errorMessage: `must be one of ${STATUSES.join(', ')}` })),
    recipient: Type.Optional(Type.String({ minLength: 1, maxLength: 254 })),
  },
  { additionalProperties: false },
);
export type ListEmailsQuery = Static<typeof ListEmailsQuery>;

/** Spec: 1 to 128 printable ASCII characters (space to tilde). */
export const IDEMPOTENCY_KEY = /^[\x20-\x7e]{1,128}$/;
