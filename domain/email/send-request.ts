// The rules of a send request that a JSON schema cannot say: mailbox forms, the 50-recipient
// total, at least one body, reserved headers, the characters a header-bound field may hold and
// the bounds of headers and metadata. Pure; every failure names its field.
import { RelayError } from '../errors.ts';
import { parseMailbox, type Mailbox } from '../mailbox.ts';
import { characterCount, hasCharacterCountWithin } from '../text.ts';

export const MAX_RECIPIENTS = 50;
export const MAX_SUBJECT_LENGTH = 998;
export const MAX_HEADER_VALUE_LENGTH = 998;
export const MAX_TAGS = 20;

/** Custom headers: how many, how long a name, and names plus values together (characters). */
export const MAX_HEADERS = 50;
export const MAX_HEADER_NAME_LENGTH = 128;
export const MAX_HEADERS_TOTAL_LENGTH = 16_384;

/**
 * Metadata bounds (INTERFACE-DECISIONS "Limits of headers and metadata"). The metadata object
 * itself is level 1; members are object keys and array items at every level together; bytes
 * are those of its JSON (UTF-8), as stored in the event and the read model.
 */
export const METADATA_LIMITS = {
  depth: 10,
  members: 1_000,
  bytes: 65_536,
  keyLength: 256,
  stringLength: 2_048,
} as const;

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

/**
 * What no header-bound field (mailboxes, subject, header values, rendered subjects) may hold:
 * C0 controls but TAB (CR and LF have their own message), DEL, C1 controls (NEL among them),
 * the line and paragraph separators, lone surrogates, and, by decision, the byte order mark and
 * the bidirectional embeddings, overrides and isolates (U+202A to U+202E, U+2066 to U+2069),
 * which make a sender or subject read differently from what it is.
 */
const FORBIDDEN_IN_HEADER = /[\x00-\x08\x0B-\x1F\x7F-\x9F\u2028\u2029\u202A-\u202E\u2066-\u2069\uFEFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function kindOf(unit: number): string {
  if (unit < 0x20 || unit === 0x7f) return 'a control character';
  if (unit === 0x85) return 'NEL, a C1 control character';
  if (unit <= 0x9f) return 'a C1 control character';
  if (unit === 0x2028) return 'the line separator';
  if (unit === 0x2029) return 'the paragraph separator';
  if (unit === 0xfeff) return 'the byte order mark';
  if (unit >= 0xd800 && unit <= 0xdfff) return 'a lone surrogate';
  return 'a bidirectional formatting character';
}

/**
 * Why `value` may not go into a message header, or null when it may: "must not contain CR or
 * LF", or "must not contain U+001B (a control character)". Never echoes the character.
 */
export function headerTextProblem(value: string): string | null {
  if (/[\r\n]/.test(value)) return 'must not contain CR or LF';
  const found = FORBIDDEN_IN_HEADER.exec(value);
  if (!found) return null;
  const unit = found[0].charCodeAt(0);
  return `must not contain U+${unit.toString(16).toUpperCase().padStart(4, '0')} (${kindOf(unit)})`;
}

function mailbox(field: string, value: string): Mailbox {
  const problem = headerTextProblem(value);
  if (problem) throw invalid(field, problem);
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

/** A header name as it may appear in a message: long ones are cut, so an error never echoes megabytes. */
const shown = (name: string) => (name.length > 64 ? `${name.slice(0, 64)}…` : name);

/**
 * Custom headers (lower-cased names) that the composer, nodemailer's MimeNode.encodeHeaderValue,
 * writes as given instead of RFC 2047 encoding them: the msg-id lists In-Reply-To and References
 * and the RFC 9651 structured OTP-Token, where an encoded word would change what they say. Its
 * other unencoded fields are Relay's own (Message-ID, Date) or reserved (Content-ID,
 * Content-Type, Content-Disposition, and the address fields but Sender, checked as a mailbox).
 * Their values must be ASCII: 8-bit header bytes need SMTPUTF8 (RFC 6531 3.4), which Relay does
 * not ask for. Nor can a word of them be folded, so none may be too long for a line with the
 * angle brackets nodemailer adds to an id and the space of the fold (RFC 5322 2.1.1).
 */
export const UNENCODED_HEADERS: readonly string[] = ['in-reply-to', 'references', 'otp-token'];
/** A line's 998 characters (RFC 5322 2.1.1) less the fold's space and an id's "<" and ">". */
const MAX_UNENCODED_WORD_LENGTH = 995;

/** The longest stretch of an unencoded header a line must hold: whitespace and the word after it (References joins what is inside <…>). */
function longestUnencodedWord(value: string): number {
  const joined = value.replace(/<[^>]*>/g, (id) => id.replace(/\s+/g, ''));
  let longest = 0;
  for (const [word] of joined.matchAll(/\s*\S+/g)) longest = Math.max(longest, word.length);
  return longest;
}

/**
 * Custom headers (lower-cased names) whose value is a list of <URI>: RFC 2369's List-Help,
 * List-Unsubscribe, List-Subscribe, List-Post, List-Owner and List-Archive, and RFC 5064's
 * Archived-At. They are structured fields, where RFC 2047 5 allows no encoded word: a receiver
 * reads an encoded List-Unsubscribe as no URI at all, and one-click unsubscribe (RFC 8058) is
 * lost. So the composer writes them as given (uriListSentAsWritten) and admission holds them to
 * what that needs, as it does UNENCODED_HEADERS: ASCII, and no word too long for a line.
 * List-Id is not among them: its phrase may be encoded (LIST_ID_HEADER).
 */
export const URI_LIST_HEADERS: readonly string[] = ['list-help', 'list-unsubscribe', 'list-subscribe', 'list-post', 'list-owner', 'list-archive', 'archived-at'];

/** A line's 998 characters (RFC 5322 2.1.1). */
const MAX_LINE_LENGTH = 998;

/**
 * The length of the lines nodemailer folds header fields into, at whitespace (foldLines): a
 * run of whitespace that fills such a line is folded inside, into lines of only whitespace,
 * obs-FWS that RFC 5322 4 says must not be generated. The composer writes such text as encoded
 * words; a header sent as written may hold no such run (whitespaceRunProblem).
 */
export const FOLDED_LINE_LENGTH = 76;

/**
 * Why a header sent as written and folded as it is (a URI list, In-Reply-To, OTP-Token) cannot
 * hold `value`, or null. References is not folded as written: nodemailer joins its ids with one
 * space.
 */
function whitespaceRunProblem(value: string): string | null {
  let longest = 0;
  for (const [run] of value.matchAll(/\s+/g)) longest = Math.max(longest, run.length);
  if (longest < FOLDED_LINE_LENGTH) return null;
  return `must not hold a run of more than ${FOLDED_LINE_LENGTH - 1} whitespace characters: this header is sent as written, folded at its whitespace into lines of ${FOLDED_LINE_LENGTH}, and a line of only whitespace must not be generated (RFC 5322 4.2)`;
}

/**
 * Why a URI-list header's value cannot be sent as written, or null. It is folded only at the
 * whitespace the client wrote (between entries, after ", "), never inside <…>: RFC 2369 2 asks
 * readers to ignore whitespace there, but one that does not would read a URI with a space in it,
 * and one-click unsubscribe would fail where it cannot be seen. A value is at most 998
 * characters, so all this refuses is a word of 998 (a URI as long as the whole value, or entries
 * without whitespace between them): a line holds the fold's space and 997 more.
 */
export function uriListProblem(value: string): string | null {
  if (/[^\x00-\x7f]/.test(value)) return 'must hold only ASCII characters: this header is sent as written, not RFC 2047 encoded';
  // A first word too long for the field name's line is folded at the space after "Name:".
  let longest = 0;
  for (const [line] of ` ${value}`.matchAll(/\s*\S+/g)) longest = Math.max(longest, line.length);
  if (longest > MAX_LINE_LENGTH) {
    return `must not hold a word longer than ${MAX_LINE_LENGTH - 1} characters: this header is a list of <URI> sent as written, folded only at the whitespace between its entries`;
  }
  return null;
}

/**
 * Whether the composer writes this custom header as given: a URI list as admission takes it now.
 * One admitted before these rules goes as it went then, encoded where nodemailer would.
 */
export function uriListSentAsWritten(name: string, value: string): boolean {
  return URI_LIST_HEADERS.includes(name.toLowerCase()) && (headerTextProblem(value) ?? uriListProblem(value)) === null;
}

/**
 * RFC 2919's List-Id, `[phrase] <list-id>`: structured, as the URI lists are, but with a phrase
 * that may be any text. RFC 2047 5 allows encoded words in the phrase and nowhere else, and
 * nodemailer would encode the whole value once it holds a '"' or a non-ASCII character (RFC
 * 2919's own example quotes its phrase), so the composer writes the <list-id> as given and
 * encodes only the phrase (structuredHeader). Admission holds the list-id to what it must be.
 */
export const LIST_ID_HEADER = 'list-id';
/** RFC 2919 2: a list-id is at most 255 characters. */
const MAX_LIST_ID_LENGTH = 255;
/** RFC 2919 2: list-label "." list-id-namespace, each a dot-atom-text (RFC 5322 3.2.3), so ASCII. */
const LIST_ID = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)+$/;

/**
 * Custom headers (lower-cased names) whose value is a list of mailboxes: RFC 5322's resent
 * address fields, RFC 8098's Disposition-Notification-To, and Return-Receipt-To, Errors-To,
 * Mail-Followup-To and Mail-Reply-To, which mail programs read as addresses though no standard
 * defines them. RFC 2047 5 allows an encoded word in a display name but never in an address,
 * and nodemailer would encode the whole value once it holds a '"' or a non-ASCII character: a
 * receiver would read no address at all. So the composer writes each address as given and
 * encodes only the display names (structuredHeader), as it does Sender's, and admission holds
 * them to what that needs: mailboxes as domain/mailbox.ts reads them, separated by commas.
 * Resent-Sender is one mailbox (RFC 5322 3.6.6).
 */
export const MAILBOX_LIST_HEADERS: readonly string[] = [
  'resent-from', 'resent-sender', 'resent-to', 'resent-cc', 'resent-bcc',
  'disposition-notification-to', 'return-receipt-to', 'errors-to', 'mail-followup-to', 'mail-reply-to',
];

/**
 * Every custom header (lower-cased names) the composer writes as a structured field, never as
 * text: Sender, List-Id and the mailbox lists, the URI lists, and UNENCODED_HEADERS.
 */
const STRUCTURED_HEADERS: ReadonlySet<string> = new Set(['sender', LIST_ID_HEADER, ...MAILBOX_LIST_HEADERS, ...URI_LIST_HEADERS, ...UNENCODED_HEADERS]);

/**
 * How the composer writes a structured custom header: left out, or with only the phrase or
 * display names encoded.
 */
export type StructuredHeader =
  | { kind: 'left-out' }
  | { kind: 'mailboxes'; mailboxes: Mailbox[] }
  | { kind: 'list-id'; phrase: string | null; listId: string };

type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

/** A phrase as written: the text of a quoted-string, else the words themselves. */
const phraseText = (phrase: string) => (/^".*"$/.test(phrase) ? phrase.slice(1, -1).replace(/\\(.)/g, '$1') : phrase);

function parseListId(value: string): Parsed<{ phrase: string | null; listId: string }> {
  const angle = /^(.*?)\s*<([^<>]*)>$/.exec(value.trim());
  const usage = 'must be "<list-id>" or "phrase <list-id>" (RFC 2919)';
  if (!angle) return { ok: false, reason: `${usage}: it is sent as a list-id, only the phrase RFC 2047 encoded` };
  const phrase = angle[1].trim();
  if (/[<>]/.test(phrase) && !/^".*"$/.test(phrase)) return { ok: false, reason: `${usage}: a phrase holding "<" or ">" must be quoted` };
  const listId = angle[2].trim();
  if (listId.length > MAX_LIST_ID_LENGTH || !LIST_ID.test(listId)) {
    return {
      ok: false,
      reason: `${usage}, the list-id at most ${MAX_LIST_ID_LENGTH} ASCII characters: a label, a dot and a domain, e.g. <news.example.com> (it is sent as written, never RFC 2047 encoded)`,
    };
  }
  return { ok: true, value: { phrase: phrase === '' ? null : phraseText(phrase), listId } };
}

/** The entries of a comma-separated list: split at the commas outside quoted strings and angle brackets. */
function listEntries(value: string): string[] {
  const entries: string[] = [];
  let quoted = false;
  let angled = false;
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (quoted) {
      if (c === '\\') i++;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === '<') angled = true;
    else if (c === '>') angled = false;
    else if (c === ',' && !angled) {
      entries.push(value.slice(start, i));
      start = i + 1;
    }
  }
  entries.push(value.slice(start));
  return entries;
}

function parseMailboxList(lower: string, value: string): Parsed<Mailbox[]> {
  const entries = listEntries(value);
  const one = lower === 'resent-sender';
  const usage = one
    ? 'must be one mailbox, "address" or "Name <address>", whose address is ASCII: it is sent as an address, only the display name RFC 2047 encoded'
    : 'must be mailboxes, "address" or "Name <address>" separated by commas, whose addresses are ASCII: it is sent as addresses, only display names RFC 2047 encoded';
  if (one && entries.length > 1) return { ok: false, reason: `${usage} (it holds ${entries.length}: a display name holding a comma must be quoted)` };
  const mailboxes: Mailbox[] = [];
  for (const [i, entry] of entries.entries()) {
    const parsed = parseMailbox(entry);
    if (!parsed.ok && entries.length === 1) return { ok: false, reason: `${usage} (${parsed.reason})` };
    if (!parsed.ok) return { ok: false, reason: `${usage} (entry ${i + 1} ${parsed.reason}; a display name holding a comma must be quoted)` };
    mailboxes.push(parsed.value);
  }
  return { ok: true, value: mailboxes };
}

/** The structured form of a List-Id or mailbox-list header as admission reads it, or why it cannot be sent so. */
function parseStructured(lower: string, value: string): Parsed<StructuredHeader> | null {
  // Blank, it is left out of the message (structuredHeader).
  if (value.trim() === '') return null;
  if (lower === LIST_ID_HEADER) {
    const parsed = parseListId(value);
    return parsed.ok ? { ok: true, value: { kind: 'list-id', ...parsed.value } } : parsed;
  }
  if (!MAILBOX_LIST_HEADERS.includes(lower)) return null;
  const parsed = parseMailboxList(lower, value);
  return parsed.ok ? { ok: true, value: { kind: 'mailboxes', mailboxes: parsed.value } } : parsed;
}

/**
 * How the composer writes this custom header: left out when it is structured (STRUCTURED_HEADERS)
 * and its value, which admission accepts, is empty or only whitespace ("an empty value leaves
 * the header out"): such a field says nothing, and none of them may hold the encoded word a text
 * field of only whitespace is sent as (RFC 2047 5). Otherwise a List-Id or a list of mailboxes
 * as admission takes them now; null for any other. One admitted before these rules goes as it
 * went then, encoded where nodemailer would.
 */
export function structuredHeader(name: string, value: string): StructuredHeader | null {
  const lower = name.toLowerCase();
  if (value.trim() === '' && STRUCTURED_HEADERS.has(lower)) return { kind: 'left-out' };
  if (headerTextProblem(value) !== null) return null;
  const parsed = parseStructured(lower, value);
  return parsed?.ok ? parsed.value : null;
}

/** Why a custom header of this (lower-cased) name may not hold `value` as the message would carry it, or null. */
function headerValueProblem(lower: string, value: string): string | null {
  const structured = parseStructured(lower, value);
  if (structured && !structured.ok) return structured.reason;
  if (lower === 'sender') {
    // Empty, the composer leaves it out. A display name is RFC 2047 encoded; the address is not.
    const parsed = value.trim() === '' ? null : parseMailbox(value);
    return parsed === null || parsed.ok ? null : `must be one mailbox, "address" or "Name <address>", whose address is ASCII (${parsed.reason})`;
  }
  if (URI_LIST_HEADERS.includes(lower)) return uriListProblem(value) ?? whitespaceRunProblem(value);
  if (!UNENCODED_HEADERS.includes(lower)) return null;
  if (/[^\x00-\x7f]/.test(value)) return 'must hold only ASCII characters: this header is sent as written, not RFC 2047 encoded';
  if (longestUnencodedWord(value) > MAX_UNENCODED_WORD_LENGTH) return `must not hold a word longer than ${MAX_UNENCODED_WORD_LENGTH} characters: this header is sent as written and a word cannot be folded`;
  return lower === 'references' ? null : whitespaceRunProblem(value);
}

export function checkHeaders(headers: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  const names = Object.keys(headers ?? {});
  if (names.length > MAX_HEADERS) throw invalid('headers', `at most ${MAX_HEADERS} custom headers are allowed (got ${names.length})`);
  let total = 0;
  /** Lower-cased name → the name as first given: RFC 5322 field names are case-insensitive. */
  const seen = new Map<string, string>();
  for (const name of names) {
    const value = headers![name];
    if (name.length > MAX_HEADER_NAME_LENGTH) throw invalid(`headers.${shown(name)}`, `header names are at most ${MAX_HEADER_NAME_LENGTH} characters`);
    if (!/^[A-Za-z0-9-]+$/.test(name)) throw invalid(`headers.${name}`, 'header names may only hold letters, digits and hyphens');
    if (isReservedHeader(name)) throw invalid(`headers.${name}`, 'is a reserved header name');
    if (typeof value !== 'string') throw invalid(`headers.${name}`, 'must be a string');
    if (!hasCharacterCountWithin(value, 0, MAX_HEADER_VALUE_LENGTH)) throw invalid(`headers.${name}`, `must be at most ${MAX_HEADER_VALUE_LENGTH} characters`);
    const lower = name.toLowerCase();
    const first = seen.get(lower);
    if (first !== undefined) throw invalid(`headers.${name}`, `repeats the header ${first}: header names are compared case-insensitively, so each may be given once`);
    seen.set(lower, name);
    const problem = headerTextProblem(value) ?? headerValueProblem(lower, value);
    if (problem) throw invalid(`headers.${name}`, problem);
    total += name.length + characterCount(value);
    if (total > MAX_HEADERS_TOTAL_LENGTH) {
      throw invalid('headers', `custom headers are at most ${MAX_HEADERS_TOTAL_LENGTH.toLocaleString('en-US')} characters in all, names and values together`);
    }
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
  const problem = headerTextProblem(subject);
  if (problem) throw invalid(field, problem);
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
    metadata: checkMetadata(body.metadata),
  };
}

/** Bytes of `value` as a JSON string literal in UTF-8 (JSON.stringify's escapes), counted up to `budget`. */
function jsonStringBytes(value: string, budget: number): number {
  let bytes = 2;
  for (let i = 0; i < value.length && bytes <= budget; i++) {
    const unit = value.charCodeAt(i);
    if (unit === 0x22 || unit === 0x5c || unit === 0x08 || unit === 0x09 || unit === 0x0a || unit === 0x0c || unit === 0x0d) bytes += 2;
    else if (unit < 0x20) bytes += 6;
    else if (unit < 0x80) bytes += 1;
    else if (unit < 0x800) bytes += 2;
    else if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < value.length && value.charCodeAt(i + 1) >= 0xdc00 && value.charCodeAt(i + 1) <= 0xdfff) {
      bytes += 4;
      i++;
    } else if (unit >= 0xd800 && unit <= 0xdfff) bytes += 6;
    else bytes += 3;
  }
  return bytes;
}

type JsonContainer = Record<string, unknown> | unknown[];

/**
 * Bounds the free-form metadata (METADATA_LIMITS) without recursion: an explicit stack, each
 * container counted before its members are looked at, and the walk stops at the first limit
 * passed, so a hostile body costs at most about as much as an allowed one. Numbers must be
 * finite and integers exact (within Number.MAX_SAFE_INTEGER). Returns the metadata itself.
 */
export function checkMetadata(metadata: unknown, field = 'metadata'): Record<string, unknown> {
  if (metadata === undefined) return {};
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) throw invalid(field, 'must be an object');
  const limits = METADATA_LIMITS;
  let members = 0;
  let bytes = 0;
  const spend = (n: number) => {
    bytes += n;
    if (bytes > limits.bytes) throw invalid(field, `metadata is at most ${limits.bytes.toLocaleString('en-US')} bytes as JSON`);
  };
  const count = (n: number) => {
    members += n;
    if (members > limits.members) throw invalid(field, `metadata holds at most ${limits.members.toLocaleString('en-US')} keys in all (object keys and array items, at every level)`);
  };
  const stack: Array<{ value: JsonContainer; path: string; depth: number }> = [{ value: metadata as JsonContainer, path: field, depth: 1 }];
  const member = (path: string, key: string | number) => (typeof key === 'number' ? `${path}[${key}]` : `${path}.${shown(key)}`);

  const visit = (path: string, key: string | number, value: unknown, depth: number) => {
    if (value === null) spend(4);
    else if (typeof value === 'boolean') spend(value ? 4 : 5);
    else if (typeof value === 'number') {
      if (!Number.isFinite(value)) throw invalid(member(path, key), 'numbers must be finite: this one is beyond the range of a double (±1.8e308); send it as a string');
      if (Number.isInteger(value) && !Number.isSafeInteger(value)) {
        throw invalid(member(path, key), 'integers are kept exactly only up to ±9,007,199,254,740,991 (2^53 - 1); send larger ones as strings');
      }
      spend(String(value).length);
    } else if (typeof value === 'string') {
      if (!hasCharacterCountWithin(value, 0, limits.stringLength)) {
        throw invalid(member(path, key), `strings in metadata are at most ${limits.stringLength.toLocaleString('en-US')} characters`);
      }
      spend(jsonStringBytes(value, limits.bytes - bytes));
    } else if (typeof value === 'object') {
      if (depth + 1 > limits.depth) throw invalid(member(path, key), `metadata nests at most ${limits.depth} levels (the metadata object is level 1)`);
      stack.push({ value: value as JsonContainer, path: member(path, key), depth: depth + 1 });
    } else {
      throw invalid(member(path, key), 'must be a JSON value');
    }
  };

  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!;
    if (Array.isArray(value)) {
      const length = value.length;
      count(length);
      spend(2 + Math.max(0, length - 1));
      for (let i = 0; i < length; i++) visit(path, i, value[i], depth);
    } else {
      const keys = Object.keys(value);
      count(keys.length);
      spend(2 + Math.max(0, keys.length - 1) + keys.length);
      for (const key of keys) {
        if (!hasCharacterCountWithin(key, 0, limits.keyLength)) throw invalid(member(path, key), `metadata keys are at most ${limits.keyLength} characters`);
        spend(jsonStringBytes(key, limits.bytes - bytes));
        visit(path, key, value[key], depth);
      }
    }
  }
  return metadata as Record<string, unknown>;
}
