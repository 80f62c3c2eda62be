// Request schemas of the email endpoints (spec: Mailbox, SendEmail, TemplateSend, list query),
// compiled once at start. What a JSON schema cannot say (the address grammar, the 50-recipient
// total, html-or-text) is checked after it by domain/email/send-request.ts; both name the field.
import { Type, type Static } from '@sinclair/typebox';
import { MAX_HEADERS, MAX_RECIPIENTS, MAX_TAGS, METADATA_LIMITS, RESERVED_HEADER_PREFIXES } from '../../../domain/email/send-request.ts';
import { MAX_VARIABLES } from '../../../domain/templates/variables.ts';
import { MAX_MAILBOX_LENGTH } from '../../../domain/mailbox.ts';
import { STATUSES } from '../../../domain/email/status.ts';
import { Text } from './text.schemas.ts';

/** Case-insensitive regex source for a literal, for patterns that cannot carry the i flag. */
const anyCase = (literal: string) => [...literal].map((c) => (/[a-z]/i.test(c) ? `[${c.toLowerCase()}${c.toUpperCase()}]` : c)).join('');

const NO_CR_LF = '^[^\\r\\n]*$';

/**
 * A mailbox of 1 to 320 characters once surrounding whitespace is trimmed, without CR or LF.
 * (The 254-character bare address and the address grammar are the domain's.)
 */
const Mailbox = Text({
  minLength: 1,
  maxLength: MAX_MAILBOX_LENGTH,
  lengthAfterTrim: true,
  pattern: NO_CR_LF,
  errorMessage: `must be a mailbox ("address" or "Name <address>") of at most ${MAX_MAILBOX_LENGTH} characters without CR or LF`,
});
const MailboxOrList = Type.Union([Mailbox, Type.Array(Mailbox, { minItems: 1, maxItems: 50 })], {
  errorMessage: `must be a mailbox or an array of 1 to 50 mailboxes (each at most ${MAX_MAILBOX_LENGTH} characters, without CR or LF)`,
});

// Counts are bounded here, before TypeBox looks at any member (it compares the number of
// properties first), so a body of 200,000 headers or 400,000 metadata keys is refused without
// a walk over them; the rest of the bounds (lengths, total sizes, metadata depth and bytes,
// characters) are domain/email/send-request.ts's, which names the member at fault.
export const HEADER_NAME_PATTERN = `^(?!(?:${RESERVED_HEADER_PREFIXES.map(anyCase).join('|')}))[A-Za-z0-9-]+$`;
export const Headers = Type.Record(
  Type.String({ pattern: HEADER_NAME_PATTERN }),
  Text({ maxLength: 998, pattern: NO_CR_LF, errorMessage: 'header values are strings of at most 998 characters without CR or LF' }),
  {
    maxProperties: MAX_HEADERS,
    additionalProperties: false,
    errorMessage: `must be an object of at most ${MAX_HEADERS} headers whose names are letters, digits and hyphens and do not begin with ${RESERVED_HEADER_PREFIXES.join(', ')} (in any case)`,
  },
);

export const TAG_NAME_PATTERN = '^(?!rr_)[A-Za-z0-9_-]{1,128}$';
export const Tags = Type.Record(
  Type.String({ pattern: TAG_NAME_PATTERN }),
  Type.String({ maxLength: 256, pattern: '^[A-Za-z0-9_-]*$', errorMessage: 'tag values are at most 256 letters, digits, _ and - (may be empty)' }),
  {
    maxProperties: 20,
    additionalProperties: false,
    errorMessage: 'tags are at most 20; names are 1 to 128 letters, digits, _ and - and must not begin with rr_',
  },
);
export const Metadata = Type.Record(Type.String(), Type.Unknown(), {
  maxProperties: METADATA_LIMITS.members,
  errorMessage: `must be an object of at most ${METADATA_LIMITS.members.toLocaleString('en-US')} keys in all, ${METADATA_LIMITS.depth} levels deep and ${METADATA_LIMITS.bytes.toLocaleString('en-US')} bytes as JSON`,
});

const Subject = Text({ minLength: 1, maxLength: 998, pattern: NO_CR_LF, errorMessage: 'must be 1 to 998 characters without CR or LF' });
const Body = Text({ maxLength: 10_000_000, errorMessage: 'must be a string of at most 10,000,000 characters' });

export const SendEmailBody = Type.Object(
  {
    from: Mailbox,
    to: MailboxOrList,
    cc: Type.Optional(MailboxOrList),
    bcc: Type.Optional(MailboxOrList),
    reply_to: Type.Optional(Mailbox),
    subject: Subject,
    html: Type.Optional(Body),
    text: Type.Optional(Body),
    headers: Type.Optional(Headers),
    tags: Type.Optional(Tags),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);
export type SendEmailBody = Static<typeof SendEmailBody>;

/**
 * The rule "at least one of html or text is a nonempty string" in JSON Schema, for the document:
 * the handlers check it after the schema (domain/email/send-request.ts, domain/templates/content.ts),
 * with a message of their own, so the validated schemas leave it out.
 */
export const HTML_OR_TEXT = [
  { required: ['html'], properties: { html: { type: 'string', minLength: 1 } } },
  { required: ['text'], properties: { text: { type: 'string', minLength: 1 } } },
];

/** SendEmail as the OpenAPI document shows it (config.openapi.body): the validated schema and html-or-text. */
export const DocumentedSendEmailBody = Type.Object(SendEmailBody.properties, {
  additionalProperties: false,
  anyOf: HTML_OR_TEXT,
  description: 'A direct send. At least one of html or text must be present and nonempty.',
});

export const IdParam = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9_-]+$', errorMessage: 'must be 1 to 64 characters of letters, digits, _ and -' }),
});

export const ListEmailsQuery = Type.Object(
  {
    // The spec limits neither: a value that cannot be an address or a domain just matches nothing.
    sender: Type.Optional(Type.String({ errorMessage: 'must be a single address' })),
    domain: Type.Optional(Type.String({ errorMessage: 'must be a single domain name' })),
    after: Type.Optional(Type.String({ format: 'date-time', errorMessage: 'must be an RFC 3339 date-time' })),
    before: Type.Optional(Type.String({ format: 'date-time', errorMessage: 'must be an RFC 3339 date-time' })),
    // Digits only: a lenient number conversion would take "1.5" or "1e1" for a page size.
    limit: Type.Optional(Type.String({ pattern: '^(?:[1-9][0-9]?|100)$', errorMessage: 'must be an integer from 1 to 100' })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9_-]+$', errorMessage: 'must be 1 to 64 characters of letters, digits, _ and -' })),
    status: Type.Optional(Type.Union(STATUSES.map((s) => Type.Literal(s)), { errorMessage: `must be one of ${STATUSES.join(', ')}` })),
    recipient: Type.Optional(Text({ maxLength: 254, errorMessage: 'must be an address of at most 254 characters' })),
  },
  { additionalProperties: false },
);
export type ListEmailsQuery = Static<typeof ListEmailsQuery>;

/**
 * The list query as the document shows it (config.openapi.query): `limit` is an integer, as on
 * the other lists. The validated schema takes it as its digits (the same values pass).
 */
export const DocumentedListEmailsQuery = Type.Object(
  { ...ListEmailsQuery.properties, limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: 'An integer from 1 to 100 (default 50).' })) },
  { additionalProperties: false },
);

/**
 * What no valid send body (direct or template) can exceed, for the scan before JSON.parse
 * (apps/api/json-body.ts): metadata's 10 levels under the body's own, and every member the
 * limits allow: the body's properties, three recipient lists of up to 50, headers, tags,
 * variables and metadata. A body past these is refused without being parsed.
 */
export const SEND_BODY_BOUNDS = {
  maxDepth: METADATA_LIMITS.depth + 1,
  maxMembers: 13 + 3 * MAX_RECIPIENTS + MAX_HEADERS + MAX_TAGS + MAX_VARIABLES + METADATA_LIMITS.members,
  note: `metadata nests at most ${METADATA_LIMITS.depth} levels and holds at most ${METADATA_LIMITS.members.toLocaleString('en-US')} keys in all; at most ${MAX_HEADERS} headers`,
};

/** Spec: 1 to 128 printable ASCII characters (space to tilde). */
export const IDEMPOTENCY_KEY = /^[\x20-\x7e]{1,128}$/;
