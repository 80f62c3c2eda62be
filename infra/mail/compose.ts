// The message on the wire: nodemailer's MailComposer writes the MIME (RFC 2047 words for
// non-ASCII headers, quoted-printable or base64 bodies, folded lines), mime-bytes.ts joins its
// parts in one pass, dkim-sign.ts prepends a DKIM-Signature (rsa-sha256, relaxed/relaxed, From
// and the other single fields over-signed).
// The bytes returned are exactly what every transport sends, so retries and the outbox see
// the same message: every line break CRLF (bodies' line ends are made so before composing, and
// the signed message is checked), every line at most 998 characters.
//
// BCC recipients are not an input: they travel only in the SMTP envelope, never in a header.
import { createPrivateKey, type KeyObject } from 'node:crypto';
import MailComposer from 'nodemailer/lib/mail-composer';
import * as mimeFuncs from 'nodemailer/lib/mime-funcs';
import type MimeNode from 'nodemailer/lib/mime-node';
import { FOLDED_LINE_LENGTH, structuredHeader, uriListSentAsWritten, type StructuredHeader } from '../../domain/email/send-request.ts';
import { parseMailbox } from '../../domain/mailbox.ts';
import { normalizeDomainName } from '../../domain/sending-domain.ts';
import { pooledRandomBytes } from '../secrets/random-pool.ts';
import { dkimSign } from './dkim-sign.ts';
import { bareLineBreakAt, messageBytes } from './mime-bytes.ts';

export interface DkimSigningKey {
  /** The d= domain: the sending domain, so the signature aligns with From for DMARC. */
  domainName: string;
  keySelector: string;
  /** PKCS#8 PEM (infra/dns/dkim-keys.ts). */
  privateKey: string;
}

export interface ComposeInput {
  /** The mailbox as admitted, e.g. 'Acme <hello@example.com>'. */
  from: string;
  to: string[];
  cc: string[];
  replyTo: string | null;
  subject: string;
  html: string | null;
  text: string | null;
  /** Customer headers (already checked by domain/email/send-request.ts). */
  headers: Record<string, string>;
  /** Without angle brackets; see newMessageId. */
  messageId: string;
  date: Date;
  dkim: DkimSigningKey;
}

export interface ComposedMessage {
  /** CRLF line ends, DKIM-Signature first. */
  raw: Buffer;
  /** Without angle brackets. */
  messageId: string;
}

// RFC 4871 5.5's list plus List-Unsubscribe-Post, which RFC 8058 3.1 requires to be signed for
// one-click unsubscribe to be honoured.
const SIGNED_HEADERS = [
  'From', 'Sender', 'Reply-To', 'Subject', 'Date', 'Message-ID', 'To', 'Cc', 'MIME-Version',
  'Content-Type', 'Content-Transfer-Encoding', 'Content-ID', 'Content-Description',
  'Resent-Date', 'Resent-From', 'Resent-Sender', 'Resent-To', 'Resent-Cc', 'Resent-Message-ID',
  'In-Reply-To', 'References', 'List-Id', 'List-Help', 'List-Unsubscribe', 'List-Unsubscribe-Post',
  'List-Subscribe', 'List-Post', 'List-Owner', 'List-Archive', 'Archived-At',
];
// Over-signed (RFC 6376 8.15): the fields a message has at most once (RFC 5322 3.6) and that a
// reader sees or a filter decides on. A copy added in transit, above the signed one, would
// otherwise be shown while the signature still verifies.
const OVERSIGNED_HEADERS = ['From', 'Sender', 'Reply-To', 'Subject', 'Date', 'Message-ID', 'To', 'Cc', 'MIME-Version', 'Content-Type', 'Content-Transfer-Encoding'];

/**
 * Headers the composer writes itself. Admission refuses most of them; the rest (Message-ID,
 * Date) would contradict the stable id retries rely on, so a customer value is dropped.
 */
function isComposerOwned(name: string): boolean {
  const lower = name.toLowerCase();
  return ['from', 'to', 'cc', 'bcc', 'reply-to', 'subject', 'date', 'message-id', 'mime-version', 'return-path', 'dkim-signature']
    .includes(lower) || lower.startsWith('content-');
}

/**
 * Stable for one email, so every retry sends the same Message-ID and receivers can tell a
 * resend from a new message. The email id is unique per Relay; the domain is the sender's.
 */
export function newMessageId(emailId: string, domain: string): string {
  if (!/^[A-Za-z0-9_-]+$/.test(emailId)) throw new Error(`not an email id: ${JSON.stringify(emailId)}`);
  return `${emailId}@${normalizeDomainName(domain)}`;
}

/**
 * Addresses go to MailComposer as {name, address}: handing it the mailbox string would let
 * its address parser split an unquoted display name such as `Doe, Jane <j@example.com>`.
 */
function address(mailbox: string, field: string): { name: string; address: string } {
  const parsed = parseMailbox(mailbox);
  if (!parsed.ok) throw new Error(`${field}: ${JSON.stringify(mailbox)} ${parsed.reason}`);
  return { name: parsed.value.displayName ?? '', address: parsed.value.address };
}

/** RFC 5322 2.1.1: at most 998 characters on a line, CRLF excluded. */
const MAX_LINE_LENGTH = 998;

/**
 * Fields nodemailer (MimeNode.encodeHeaderValue) does not write as unstructured text: address
 * lists, msg-ids, the structured OTP-Token, its own Date and content fields. URI lists are
 * written as given (send-request.ts URI_LIST_HEADERS), List-Id and the other mailbox lists with
 * only their phrase or display names encoded (structuredHeader). Every other field is text,
 * RFC 2047 encoded where it needs to be.
 */
const NOT_TEXT_FIELDS = new Set([
  'from', 'sender', 'to', 'cc', 'bcc', 'reply-to', 'message-id', 'in-reply-to', 'content-id', 'otp-token', 'references',
  'date', 'content-type', 'content-disposition',
]);

/**
 * Header text (a subject, a display name, a custom text field's value) as RFC 2047 encoded
 * words when nodemailer would write it so that a reader sees other text or none, or a line is
 * too long or only whitespace, else null (nodemailer's own encoding is right):
 *  - text holding "=?": nodemailer keeps what is already a valid encoded word as it is, and
 *    every reader decodes it, so `=?UTF-8?Q?=E2=80=AE?=` would show the U+202E that admission
 *    refuses in header text (send-request.ts headerTextProblem). Encoded, it reads as written;
 *  - a word that, with what goes before it on its line (the field name and ": ", or the
 *    fold's whitespace), is longer than a line: nodemailer folds only at whitespace. Encoded
 *    words are at most 52 characters and fold between them;
 *  - a run of whitespace that a fold would leave alone on a line (foldsToBlankLine): encoded
 *    words hold the spaces and fold between words;
 *  - text of only whitespace, which admission accepts (a subject is 1 to 998 characters):
 *    nodemailer leaves out a field whose value trims to nothing. Encoded, the field is there
 *    and reads as given. (An empty value cannot be an encoded word and stays left out.)
 * Mailboxes are at most 320 characters, so for a display name the second cannot apply.
 */
function forcedEncodedWords(fieldName: string, text: string): string | null {
  const blank = text !== '' && text.trim() === '';
  if (!text.includes('=?') && !blank && fitsLines(fieldName, text) && !foldsToBlankLine(fieldName, text)) return null;
  return encodedWords(text);
}

/** Whether `text`, folded only at its whitespace, is no line longer than RFC 5322 allows after "<fieldName>: ". */
function fitsLines(fieldName: string, text: string): boolean {
  let longest = 0;
  for (const [word] of text.matchAll(/\s*\S+/g)) longest = Math.max(longest, word.length);
  return fieldName.length + 2 + longest <= MAX_LINE_LENGTH;
}

const LINE_OF_WHITESPACE = new RegExp(`\\s{${FOLDED_LINE_LENGTH},}`);

/**
 * Whether nodemailer, folding "<fieldName>: <text>" at whitespace into lines of FOLDED_LINE_LENGTH
 * (mimeFuncs.foldLines), could write a line of only whitespace: obs-FWS (RFC 5322 4.2), which
 * must not be generated. A fold goes before a run of whitespace, so the run starts the next
 * line: alone on it when the run fills the line, or ends the text.
 */
function foldsToBlankLine(fieldName: string, text: string): boolean {
  if (LINE_OF_WHITESPACE.test(text)) return true;
  return /\s$/.test(text) && fieldName.length + 2 + text.length >= FOLDED_LINE_LENGTH;
}

function encodedWords(text: string): string {
  // Q for mostly Latin text, else B: nodemailer's choice (MimeNode._getTextEncoding).
  const latin = text.match(/[A-Za-z]/g)?.length ?? 0;
  const other = text.match(/[^\x00-\x7f]/g)?.length ?? 0;
  return mimeFuncs.encodeWord(text, other < latin ? 'Q' : 'B', 52);
}

/** Encoded words, or a value written as given, folded by nodemailer at the whitespace it holds. */
const prepared = (value: string) => ({ prepared: true, foldLines: true, value });

/**
 * nodemailer writes a display name bare, quoted or, when it is not ASCII, as encoded words
 * (MimeNode._encodeAddressName, on the node whose headers are built); a quoted-string holding
 * an encoded word is decoded by most readers all the same (postal-mime does). It has no option
 * for a name, so the root node's is wrapped: names forcedEncodedWords picks are encoded whole.
 * Returns the wrapped encoder, for List-Id's phrase.
 */
function encodeDisplayNames(root: MimeNode): (name: string) => string {
  const node = root as unknown as { _encodeAddressName?: (name: string) => string };
  const own = node._encodeAddressName;
  if (typeof own !== 'function') throw new Error('nodemailer\'s MimeNode has no _encodeAddressName any more: compose.ts cannot encode display names');
  const encode = (name: string) => forcedEncodedWords('Reply-To', name) ?? own.call(root, name);
  node._encodeAddressName = encode;
  return encode;
}

/**
 * A List-Id or mailbox list as structured text: each <list-id> and address as admitted, only
 * the phrase and display names encoded, by the same rules as From's (the root's encoder).
 * Mailboxes are at most 320 characters, so a line is too long only for a long List-Id phrase
 * that needs quotes: it goes as encoded words.
 */
function structuredValue(root: MimeNode, fieldName: string, header: Exclude<StructuredHeader, { kind: 'left-out' }>, displayName: (name: string) => string): string {
  if (header.kind === 'mailboxes') {
    return root.encodeHeaderValue('To', header.mailboxes.map((m) => ({ name: m.displayName ?? '', address: m.address })));
  }
  if (header.phrase === null) return `<${header.listId}>`;
  const phrase = displayName(header.phrase);
  return `${fitsLines(fieldName, phrase) ? phrase : encodedWords(header.phrase)} <${header.listId}>`;
}

/**
 * A custom Sender as an address object, as From is (admission holds it to one mailbox, whose
 * display name may hold a comma). One admitted before that rule goes as it was given.
 */
function sender(value: string): string | { name: string; address: string } {
  const parsed = parseMailbox(value);
  return parsed.ok ? { name: parsed.value.displayName ?? '', address: parsed.value.address } : value;
}

/**
 * A body in the canonical form of text, every line break CRLF (RFC 2046 4.1.1), before it is
 * encoded (RFC 2045 6.8): base64, nodemailer's choice for mostly non-Latin text, encodes the
 * line breaks as they are, while 7bit and quoted-printable keep CRLF as a line break. A bare CR
 * would also be signed as it is (mime-bytes.ts and nodemailer repair only bare LF, and
 * quoted-printable keeps a CR), while an SMTP client sends it as CRLF: the receiver would hash
 * other bytes than were signed, and DKIM would fail.
 */
const withCrlfLineEnds = (body: string | null) => (body === null ? undefined : body.replace(/\r\n|\r|\n/g, '\r\n'));

/**
 * In-Reply-To as a list of msg-ids (RFC 5322 3.6.4), written by References' rule (each id in
 * <…>, one space between them): nodemailer brackets an In-Reply-To as one id, so two ids
 * written without brackets would become one holding a space.
 */
const msgIdList = (root: MimeNode, value: string) => root.encodeHeaderValue('References', value);

export async function composeMessage(input: ComposeInput): Promise<ComposedMessage> {
  if (input.to.length + input.cc.length === 0) throw new Error('a message needs at least one To or Cc recipient');
  const messageId = input.messageId.replace(/^<(.*)>$/, '$1');
  const composer = new MailComposer({
    from: address(input.from, 'from'),
    to: input.to.map((m, i) => address(m, `to[${i}]`)),
    cc: input.cc.length > 0 ? input.cc.map((m, i) => address(m, `cc[${i}]`)) : undefined,
    replyTo: input.replyTo === null ? undefined : address(input.replyTo, 'replyTo'),
    subject: input.subject,
    text: withCrlfLineEnds(input.text),
    html: withCrlfLineEnds(input.html),
    messageId: `<${messageId}>`,
    date: input.date,
    newline: 'win',
    // Given, or each part of the message draws its own from the CSPRNG.
    baseBoundary: pooledRandomBytes(8).toString('hex'),
    // Bodies are strings already in hand; nothing may make the composer read a file or URL.
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  const root = composer.compile();
  const displayName = encodeDisplayNames(root);
  const subject = forcedEncodedWords('Subject', input.subject);
  if (subject !== null) root.setHeader('Subject', prepared(subject));
  // Added after compiling so they follow the standard headers instead of preceding them.
  for (const [name, value] of Object.entries(input.headers)) {
    if (isComposerOwned(name)) continue;
    const structured = structuredHeader(name, value);
    if (structured?.kind === 'left-out') continue;
    // A list of <URI> (List-Unsubscribe and kin) is structured: no encoded word, neither ours
    // nor nodemailer's (it encodes text holding '"' or an encoded word look-alike such as "=?4f").
    // Whitespace around a structured value (this, In-Reply-To, OTP-Token) is no part of it, and
    // a fold before whitespace that ends the field would leave it alone on a line: trimmed.
    if (uriListSentAsWritten(name, value)) {
      root.addHeader(name, prepared(value.trim()));
      continue;
    }
    // List-Id and the address fields are structured too, but for a phrase or display names.
    if (structured !== null) {
      root.addHeader(name, prepared(structuredValue(root, name, structured, displayName)));
      continue;
    }
    const lower = name.toLowerCase();
    if (lower === 'sender') {
      root.addHeader(name, sender(value));
    } else if (lower === 'in-reply-to') {
      root.addHeader(name, prepared(msgIdList(root, value)));
    } else if (NOT_TEXT_FIELDS.has(lower)) {
      root.addHeader(name, value.trim());
    } else {
      const encoded = forcedEncodedWords(name, value);
      root.addHeader(name, encoded === null ? value : prepared(encoded));
    }
  }
  const unsigned = messageBytes(root) ?? await root.build();

  const domainName = normalizeDomainName(input.dkim.domainName);
  let raw: Buffer;
  try {
    raw = dkimSign(unsigned, {
      domainName,
      keySelector: input.dkim.keySelector,
      privateKey: signingKey(input.dkim),
      headerFieldNames: SIGNED_HEADERS,
      oversigned: OVERSIGNED_HEADERS,
    });
  } catch (error) {
    throw new Error(`DKIM signing failed for d=${input.dkim.domainName} s=${input.dkim.keySelector}: the private key is unusable`, { cause: error });
  }
  // A transport would turn a bare CR or LF into CRLF after it was signed: never send one.
  const bare = bareLineBreakAt(raw);
  if (bare >= 0) {
    throw new Error(`internal error: the composed message holds a bare ${raw[bare] === 0x0d ? 'CR' : 'LF'} at byte ${bare}; every line break must be CRLF (a transport would change the signed bytes)`);
  }
  return { raw, messageId };
}

/**
 * The parsed form of a PEM key, kept for the next message of the domain: given the PEM, every
 * signature parsed it again (1.47 ms of CPU per RSA-2048 signature instead of 0.90 on the
 * benchmark machine). Keyed by the PEM itself, so a rotated key is simply another entry; at
 * most MAX_CACHED_KEYS, the least recently used going first. A PEM that does not parse is
 * handed to nodemailer as it is, which then leaves the signature out (refused below).
 */
const cachedKeys = new Map<string, KeyObject>();
const MAX_CACHED_KEYS = 256;

function signingKey(key: DkimSigningKey): KeyObject | string {
  let parsed = cachedKeys.get(key.privateKey);
  if (parsed) {
    cachedKeys.delete(key.privateKey);
  } else {
    try {
      parsed = createPrivateKey(key.privateKey);
    } catch {
      return key.privateKey;
    }
    if (cachedKeys.size >= MAX_CACHED_KEYS) cachedKeys.delete(cachedKeys.keys().next().value!);
  }
  cachedKeys.set(key.privateKey, parsed);
  return parsed;
}
