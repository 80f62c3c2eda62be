// What the smtp and mx transports share: reading SMTP replies (codes, enhanced status codes,
// queue ids) and turning nodemailer's errors into per-recipient outcomes.
import type { RecipientOutcome, RecipientResult } from '../ports/mail-transport.ts';

export interface SmtpReply {
  /** The three-digit reply code; null when the text does not start with one. */
  code: number | null;
  /** RFC 3463 enhanced status code (e.g. "5.1.1") when the reply carries one. */
  enhancedCode: string | null;
  /** The whole reply, continuation lines joined with a space. */
  text: string;
}

const REPLY = /^(\d{3})(?:[ -]|$)(?:([245]\.\d{1,3}\.\d{1,3})(?=\s|$))?/;

export function parseSmtpReply(reply: string): SmtpReply {
  const text = reply.trim().replace(/\s*\r?\n\s*/g, ' ');
  const match = REPLY.exec(text);
  return { code: match ? Number(match[1]) : null, enhancedCode: match?.[2] ?? null, text };
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
 * The result a reply code means for a recipient. 503 ("bad sequence of commands") says the
 * session was in the wrong state, not that the message was refused, so it is retried like a 4xx.
 */
export function resultOfCode(code: number | null | undefined): RecipientResult {
  if (code && code >= 500 && code < 600 && code !== 503) return 'rejected';
  return 'deferred';
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
  if (error.response) return replyOutcome(address, stage === 'connection' ? 'deferred' : resultOfCode(error.responseCode), error.response, stage);
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
