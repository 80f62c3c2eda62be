// The rules of a send request that a JSON schema cannot say: mailbox forms, the 50-recipient
// total, at least one body, reserved headers. Pure; every failure names its field.
import { RelayError } from '../errors.ts';
import { parseMailbox, type Mailbox } from '../mailbox.ts';
import { characterCount } from '../text.ts';

export const MAX_RECIPIENTS = 50;
export const MAX_SUBJECT_LENGTH = 998;
export const MAX_HEADER_VALUE_LENGTH = 998;
export const MAX_TAGS = 20;

/** Header names a client may not set: the message's own structure and trace headers. */
export const RESERVED_HEADER_PREFIXES = [
  'from', 'to', 'cc', 'bcc', 'subject', 'content-', 'mime-', 'reply-to', 'return-path', 'received', 'dkim-', 'authorization',
] as const;

export interface SendRequestBody {
  from: string;
  to: string | string[];
  cc?: string | string[];
  bcc?: string | string[];
  reply_to?: string;
  subject: string;
  html?: string;
  text?: string;
  headers?: Record<string, string>;
  tags?: Record<string, string>;
  metadata?: Record<string, unknown>;
}

export interface NormalizedSend {
  from: Mailbox;
  to: Mailbox[];
  cc: Mailbox[];
  bcc: Mailbox[];
  replyTo: Mailbox | null;
  subject: string;
  html: string | null;
  text: string | null;
  headers: Record<string, string>;
  tags: Record<string, string>;
  metadata: Record<string, unknown>;
}

const invalid = (field: string, reason: string) => new RelayError('validation_error', `body.${field}: ${reason}`);

function mailbox(field: string, value: string): Mailbox {
  const parsed = parseMailbox(value);
  if (!parsed.ok) throw invalid(field, parsed.reason);
  return parsed.value;
}

function mailboxes(field: string, value: string | string[] | undefined): Mailbox[] {
  if (value === undefined) return [];
  if (typeof value === 'string') return [mailbox(field, value)];
  return value.map((v, i) => mailbox(`${field}[${i}]`, v));
}

export function isReservedHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return RESERVED_HEADER_PREFIXES.some((prefix) => lower.startsWith(prefix));
}

export function checkHeaders(headers: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (!/^[A-Za-z0-9-]+$/.test(name)) throw invalid(`headers.${name}`, 'header names may only hold letters, digits and hyphens');
    if (isReservedHeader(name)) throw invalid(`headers.${name}`, 'is a reserved header name');
    if (typeof value !== 'string') throw invalid(`headers.${name}`, 'must be a string');
    if (/[\r\n]/.test(value)) throw invalid(`headers.${name}`, 'must not contain CR or LF');
    if (characterCount(value) > MAX_HEADER_VALUE_LENGTH) throw invalid(`headers.${name}`, `must be at most ${MAX_HEADER_VALUE_LENGTH} characters`);
    out[name] = value;
  }
  return out;
}

export function checkTags(tags: Record<string, string> | undefined): Record<string, string> {
  const entries = Object.entries(tags ?? {});
  if (entries.length > MAX_TAGS) throw invalid('tags', `at most ${MAX_TAGS} tags are allowed`);
  for (const [name, value] of entries) {
    if (name.length < 1 || name.length > 128 || !/^[A-Za-z0-9_-]+$/.test(name)) throw invalid(`tags.${name}`, 'tag names are 1 to 128 characters of letters, digits, _ and -');
    if (name.startsWith('rr_')) throw invalid(`tags.${name}`, 'tag names must not begin with rr_');
    if (typeof value !== 'string' || value.length > 256 || !/^[A-Za-z0-9_-]*$/.test(value)) throw invalid(`tags.${name}`, 'tag values are up to 256 characters of letters, digits, _ and -');
  }
  return Object.fromEntries(entries);
}

export function checkSubject(subject: string, field = 'subject'): string {
  const length = characterCount(subject);
  if (length < 1 || length > MAX_SUBJECT_LENGTH) throw invalid(field, `must be 1 to ${MAX_SUBJECT_LENGTH} characters`);
  if (/[\r\n]/.test(subject)) throw invalid(field, 'must not contain CR or LF');
  return subject;
}

/** Recipient lists and sender of any send, direct or template. */
export function normalizeEnvelope(body: Pick<SendRequestBody, 'from' | 'to' | 'cc' | 'bcc' | 'reply_to'>) {
  const from = mailbox('from', body.from);
  const to = mailboxes('to', body.to);
  const cc = mailboxes('cc', body.cc);
  const bcc = mailboxes('bcc', body.bcc);
  for (const [field, list] of [['to', to], ['cc', cc], ['bcc', bcc]] as const) {
    if (Array.isArray(body[field]) && (list.length < 1 || list.length > MAX_RECIPIENTS)) {
      throw invalid(field, `must hold 1 to ${MAX_RECIPIENTS} recipients`);
    }
  }
  if (to.length === 0) throw invalid('to', 'at least one recipient is required');
  const total = to.length + cc.length + bcc.length;
  if (total > MAX_RECIPIENTS) throw invalid('to', `at most ${MAX_RECIPIENTS} recipients in total across to, cc and bcc (got ${total})`);
  const replyTo = body.reply_to === undefined ? null : mailbox('reply_to', body.reply_to);
  return { from, to, cc, bcc, replyTo };
}

export function normalizeSendRequest(body: SendRequestBody): NormalizedSend {
  const envelope = normalizeEnvelope(body);
  const subject = checkSubject(body.subject);
  const html = body.html ?? null;
  const text = body.text ?? null;
  if (!html && !text) throw invalid('html', 'at least one of html or text must be present and nonempty');
  return {
    ...envelope,
    subject,
    html: html || null,
    text: text || null,
    headers: checkHeaders(body.headers),
    tags: checkTags(body.tags),
    metadata: body.metadata ?? {},
  };
}

/** Every recipient once, normalized: for suppression checks and quota charges. */
export function allRecipientAddresses(send: Pick<NormalizedSend, 'to' | 'cc' | 'bcc'>): string[] {
  return [...new Set([...send.to, ...send.cc, ...send.bcc].map((m) => m.normalized))];
}
