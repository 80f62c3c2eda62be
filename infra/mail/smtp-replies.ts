// What the smtp and mx transports share: reading SMTP replies (codes, enhanced status codes,
// queue ids) and turning nodemailer's errors into per-recipient outcomes.
import type { RecipientOutcome, RecipientResult } from '../ports/mail-transport.ts';
import { cutText } from '../../domain/text.ts';

export interface SmtpReply {
  /** The three-digit reply code; null when the text does not start with one. */
  code: number | null;
  /** RFC 3463 enhanced status code (e.g. "5.1.1") when the reply carries one. */
  enhancedCode: string | null;
  /** The reply (its first REPLY_TEXT_CHARS characters), its lines trimmed and joined with a space. */
  text: string;
}

const REPLY = /^(\d{3})(?:[ -]|$)(?:([245]\.\d{1,3}\.\d{1,3})(?=\s|$))?/;

/**
 * The largest reply a connection of the smtp and mx transports takes (nodemailer's
 * maxResponseSize, in bytes); a longer one ends the connection, a temporary failure (a reply to
 * the dot: the message's fate unknown). Real replies are a few hundred bytes, an EHLO reply a few
 * KB; nodemailer's own limit (1 MiB) would let any server Relay connects to make it buffer that
 * much for each command. nodemailer measures a reply as its pieces arrive, so a line may pass
 * the limit by about one socket read: parseSmtpReply bounds its own work regardless.
 */
export const MAX_REPLY_BYTES = 64 * 1024;

/**
 * How much of a reply is read: well past the 1,000 characters of it an outcome keeps
 * (apps/services/delivery/attempt.ts), with room for the line breaks and indents folded away.
 * The rest is never looked at, so no reply costs more than this to read, whatever its shape.
 */
const REPLY_TEXT_CHARS = 4096;

/** The reply's lines, each trimmed, blank ones left out, joined with a space: linear in the reply. */
function foldLines(reply: string): string {
  const kept: string[] = [];
  for (const line of reply.split('\n')) {
    const trimmed = line.trim();
    if (trimmed) kept.push(trimmed);
  }
  return kept.join(' ');
}

export function parseSmtpReply(reply: string): SmtpReply {
  const text = foldLines(reply.length > REPLY_TEXT_CHARS ? reply.slice(0, REPLY_TEXT_CHARS) : reply);
  const match = REPLY.exec(text);
  return { code: match ? Number(match[1]) : null, enhancedCode: match?.[2] ?? null, text };
}

/** How much of a peer's text goes into one log field, unless the caller says. */
const PEER_TEXT_LOG_CHARS = 300;

/**
 * A remote server's text (a reply, or an error quoting one) made fit for a log field: cut to
 * PEER_TEXT_LOG_CHARS with an ellipsis, and every control character (line breaks, ESC, C1, the
 * Unicode line separators and bidi overrides) a space, so that the peer can neither fill the
 * log nor write lines or terminal sequences of its own into it. Never interpolate it into a
 * log message; give it a field.
 */
export function peerTextForLog(text: string, maxChars = PEER_TEXT_LOG_CHARS): string {
  const cut = cutText(text, maxChars);
  const clean = cut.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g, ' ');
  return cut.length < text.length ? `${clean}…` : clean;
}

// The forms smarthosts commonly use to name their queue id in the final 250 reply; the first
// that matches wins. A reply naming none (e.g. smtp-server's "250 OK: message queued") gives null.
const QUEUE_ID_FORMS: RegExp[] = [
  // Postfix: "250 2.0.0 Ok: queued as 4F2A1B"
  /\bqueued as ([A-Za-z0-9._-]+)/i,
  // Exim: "250 OK id=1rABCD-0004xY-1Z"
  /\bid=([A-Za-z0-9._-]+)/,
  // Microsoft, Mailgun and others: "250 2.0.0 <id> Message accepted for delivery",
  // Outlook: "250 2.0.0 OK <id@host.prod.outlook.com> [Hostname=…]"
  /^250[ -](?:\d\.\d{1,3}\.\d{1,3} )?(?:OK )?<([^<>\s]+)>/i,
  // Sendmail: "250 2.0.0 u7SKj3Gx012345 Message accepted for delivery"
  /^250[ -](?:\d\.\d{1,3}\.\d{1,3} )?([A-Za-z0-9._-]+) Message accepted/i,
  // Amazon SES and others: "250 Ok 0100018b5c3c0a4f-…-000000"
  /^250[ -](?:\d\.\d{1,3}\.\d{1,3} )?Ok ([0-9a-f]+(?:-[0-9a-f]+)+)$/i,
];

/** The queue id a smarthost's final 250 reply names, or null. */
export function parseQueueId(reply: string): string | null {
  const text = parseSmtpReply(reply).text;
  if (!text.startsWith('250')) return null;
  for (const form of QUEUE_ID_FORMS) {
    const id = form.exec(text)?.[1];
    if (id) return id;
  }
  return null;
}

/** The fields nodemailer puts on the errors of SMTPConnection and its transports. */
export interface NodemailerError extends Error {
  code?: string;
  response?: string;
  responseCode?: number;
  command?: string;
  recipient?: string;
  rejected?: string[];
  rejectedErrors?: NodemailerError[];
}

export function asNodemailerError(error: unknown): NodemailerError {
  return error instanceof Error ? (error as NodemailerError) : new Error(String(error));
}

/** Errors that ended the connection rather than refused what was sent over it. */
export function isConnectionLevel(error: NodemailerError): boolean {
  if (error.code === 'EENVELOPE' || error.code === 'EMESSAGE') return error.responseCode === 421;
  return true;
}

/**
 * A failed TLS handshake or certificate check. nodemailer reports those seen on the socket as
 * ESOCKET; node's own code (kept as originalCode) tells them apart.
 */
export function isTlsFailure(error: NodemailerError): boolean {
  if (error.code === 'ETLS' || error.command === 'STARTTLS') return true;
  const original = (error as { originalCode?: unknown }).originalCode;
  return typeof original === 'string' && /CERT|SSL|TLS|UNABLE_TO_/.test(original);
}

/** Which stage of the port an error belongs to. */
export function stageOf(error: NodemailerError): string {
  if (isTlsFailure(error)) return 'tls';
  switch (error.command) {
    case 'MAIL FROM': return 'mail_from';
    case 'RCPT TO': return 'rcpt_to';
    case 'DATA': return 'data';
    default: return 'connection';
  }
}

/**
 * The result a reply code means for a recipient, at `stage` (stageOf). 503 ("bad sequence of
 * commands") says the session was in the wrong state, not that the message was refused, so it is
 * retried like a 4xx. So is 552 to RCPT TO: RFC 821 gave it for "too many recipients", and RFC
 * 5321 (4.5.3.1.10) says to treat it as temporary there, as Postfix does; a lasting one (a full
 * mailbox) ends when the retry window closes.
 */
export function resultOfCode(code: number | null | undefined, stage?: string): RecipientResult {
  if (!code || code < 500 || code >= 600 || code === 503) return 'deferred';
  if (code === 552 && stage === 'rcpt_to') return 'deferred';
  return 'rejected';
}

export function replyOutcome(address: string, result: RecipientResult, reply: string, stage?: string): RecipientOutcome {
  const parsed = parseSmtpReply(reply);
  const outcome: RecipientOutcome = { address, result, smtpCode: parsed.code, enhancedCode: parsed.enhancedCode, response: parsed.text };
  if (stage && (result === 'rejected' || result === 'deferred')) outcome.stage = stage;
  return outcome;
}

/**
 * The outcome an error from nodemailer means for one recipient. `bodySent`: every byte of the
 * message, and so the end-of-data dot, was handed to the connection; losing the connection (or
 * timing out) after that without a reply may have delivered the message, so it is `unknown`,
 * never `deferred`. A reply after the dot (even 421 before closing) still decides.
 */
export function errorOutcome(address: string, error: NodemailerError, bodySent: boolean): RecipientOutcome {
  if (error.code === 'EENVELOPE' && error.command === 'API') {
    // nodemailer refused the address itself (CR/LF, angle brackets): no retry can help.
    const stage = /sender/i.test(error.message) ? 'mail_from' : 'rcpt_to';
    return { address, result: 'rejected', smtpCode: null, enhancedCode: stage === 'mail_from' ? '5.1.7' : '5.1.3', response: error.message, stage };
  }
  const stage = stageOf(error);
  if (bodySent && !error.responseCode) {
    return { address, result: 'unknown', smtpCode: null, enhancedCode: null, response: `connection lost after the message was sent, before the reply: ${error.message}` };
  }
  if (bodySent && error.responseCode !== undefined && error.responseCode < 400) {
    // Not an answer to the dot (a 354 there means the replies are out of step with the
    // commands): the server may have taken the message, and a retry could send it twice.
    return { ...replyOutcome(address, 'unknown', error.response ?? String(error.responseCode)), response: `a reply out of step after the message was sent: ${error.response ?? error.responseCode}` };
  }
  if (stage === 'tls') {
    // Not the recipient's fault, whatever the code: a refused STARTTLS is retried like a 4xx.
    const reply = error.response ? parseSmtpReply(error.response) : null;
    return { address, result: 'deferred', smtpCode: reply?.code ?? null, enhancedCode: reply?.enhancedCode ?? null, response: `TLS failed: ${error.message}`, stage };
  }
  // A 5xx to the greeting, EHLO or AUTH refuses us (blocklist, credentials), not the recipient.
  if (error.response) return replyOutcome(address, stage === 'connection' ? 'deferred' : resultOfCode(error.responseCode, stage), error.response, stage);
  return { address, result: 'deferred', smtpCode: null, enhancedCode: null, response: error.message, stage };
}

/** Outcomes for an envelope nodemailer answered without an error, or with per-recipient errors. */
export function envelopeOutcomes(
  recipients: string[],
  accepted: string[],
  rejectedErrors: NodemailerError[],
  acceptedOutcome: (address: string) => RecipientOutcome,
): RecipientOutcome[] {
  const refused = new Map<string, NodemailerError>();
  for (const error of rejectedErrors) if (error.recipient) refused.set(error.recipient, error);
  const acceptedSet = new Set(accepted);
  return recipients.map((address) => {
    const error = refused.get(address);
    if (error) return errorOutcome(address, { ...error, message: error.message, command: 'RCPT TO' }, false);
    if (acceptedSet.has(address)) return acceptedOutcome(address);
    return { address, result: 'deferred', smtpCode: null, enhancedCode: null, response: 'no reply to RCPT TO', stage: 'rcpt_to' };
  });
}
