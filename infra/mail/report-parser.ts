// Reads a report that came back to a Relay return path (domain/delivery/verp.ts): a delivery
// status notification (RFC 3464 multipart/report), a complaint (RFC 5965 ARF), or one of the
// plain-text bounces real MTAs still send (qmail, Exim, old Sendmail/Postfix, Exchange, Gmail,
// Yahoo, ...). MIME is postal-mime's job; what the fields and words mean is
// domain/feedback/classify.ts's.
//
// The input comes from anyone on the internet, so parseReport never throws and bounds its work:
// the input is cut at MAX_REPORT_BYTES, the MIME headers at MAX_MIME_HEADER_BYTES (beyond it
// postal-mime gives up and the report is garbage: kind 'text', no recipients), each part read
// at MAX_PART_BYTES, texts at MAX_TEXT_CHARS, a field at MAX_FIELD_CHARS, and at most
// MAX_RECIPIENTS recipients are reported.
//
// postal-mime, as used here: message/delivery-status, message/feedback-report, the returned
// message (message/rfc822, forced to an attachment) and text/rfc822-headers all arrive as
// attachments whose `content` is an ArrayBuffer; the human-readable part is `text` (or only
// `html`). Some reports carry the DSN fields in that text part instead of their own part
// (forwarded bounces, broken multiparts): the text is searched for them before the bounce rules.
import PostalMime from 'postal-mime';
import type { Attachment, Email } from 'postal-mime';
import {
  bounceReason,
  classifyDsnRecipient,
  classifyText,
  complaintOutcome,
  normalizeStatus,
  PHRASE_RULES,
  type Classification,
  type ReportOutcome,
} from '../../domain/feedback/classify.ts';
import { parseAddress } from '../../domain/mailbox.ts';
import { cutText } from '../../domain/text.ts';

export interface ParsedReportRecipient {
  /** Lower-cased bare address: Final-Recipient, else Original-Recipient; for texts, the address the text names. */
  address: string;
  /** A DSN's Original-Recipient when it differs (the address sent to, before forwarding made it `address`). */
  originalAddress?: string;
  /**
   * A complaint's recipient taken from the returned copy's To header, the feedback loop having
   * redacted Original-Rcpt-To: every recipient of the email shares that header, so it does not
   * say which one complained.
   */
  guessed?: true;
  outcome: ReportOutcome;
  /**
   * The enhanced status code ("5.1.1"), normalized, or null: never the report's own text (a
   * Status field's comment, or words where the code belongs, is only in `reason`).
   */
  status: string | null;
  action: string | null;
  diagnosticCode: string | null;
  reason: string;
}

export interface ParsedComplaint {
  feedbackType: string;
  userAgent: string | null;
  originalRecipient: string | null;
  originalMailFrom: string | null;
}

export interface ParsedReport {
  /** multipart/report with delivery-status; with feedback-report; anything else. */
  kind: 'dsn' | 'arf' | 'text';
  /** The report's own Message-ID, without angle brackets (the dedup key). */
  reportMessageId: string | null;
  /** Original-Envelope-Id: Relay sends ENVID = the email id. */
  envelopeId: string | null;
  /** Message-ID of the returned original, without angle brackets. */
  originalMessageId: string | null;
  recipients: ParsedReportRecipient[];
  complaint: ParsedComplaint | null;
}

export const MAX_REPORT_BYTES = 4 * 1024 * 1024;
export const MAX_MIME_HEADER_BYTES = 256 * 1024;
export const MAX_MIME_DEPTH = 16;
export const MAX_PART_BYTES = 256 * 1024;
export const MAX_TEXT_CHARS = 64 * 1024;
export const MAX_FIELD_CHARS = 2000;
export const MAX_FIELD_LINES = 4000;
export const MAX_RECIPIENTS = 100;

const DSN_TYPES = new Set(['message/delivery-status', 'message/global-delivery-status']);
const ARF_TYPES = new Set(['message/feedback-report']);
const ORIGINAL_TYPES = new Set(['message/rfc822', 'message/global', 'text/rfc822-headers', 'message/rfc822-headers', 'message/global-headers', 'text/rfc822-header']);

function emptyReport(kind: ParsedReport['kind'] = 'text'): ParsedReport {
  return { kind, reportMessageId: null, envelopeId: null, originalMessageId: null, recipients: [], complaint: null };
}

/** Never throws: anything unreadable is a 'text' report with no recipients. */
export async function parseReport(raw: Buffer | string): Promise<ParsedReport> {
  try {
    return await parse(raw);
  } catch {
    return emptyReport();
  }
}

async function parse(raw: Buffer | string): Promise<ParsedReport> {
  let bytes: Uint8Array = typeof raw === 'string' ? Buffer.from(raw.length > MAX_REPORT_BYTES ? raw.slice(0, MAX_REPORT_BYTES) : raw, 'utf8') : raw;
  if (!(bytes instanceof Uint8Array) || bytes.length === 0) return emptyReport();
  if (bytes.length > MAX_REPORT_BYTES) bytes = bytes.subarray(0, MAX_REPORT_BYTES);

  let email: Email;
  try {
    email = await PostalMime.parse(bytes, {
      forceRfc822Attachments: true,
      attachmentEncoding: 'arraybuffer',
      maxNestingDepth: MAX_MIME_DEPTH,
      maxHeadersSize: MAX_MIME_HEADER_BYTES,
    });
  } catch {
    return emptyReport();
  }

  const dsnParts = email.attachments.filter((a) => DSN_TYPES.has(a.mimeType));
  const arfParts = email.attachments.filter((a) => ARF_TYPES.has(a.mimeType));
  const originalPart = email.attachments.find((a) => ORIGINAL_TYPES.has(a.mimeType));
  const originalHeaders = originalPart ? parseFields(partText(originalPart), true).fields : null;

  const bodyText = humanText(email) || (email.attachments.length === 0 ? rawBody(bytes) : '');
  const { before, after: returned } = splitReturnedMessage(bodyText);
  const notice = unquote(before);

  const report = emptyReport(arfParts.length > 0 ? 'arf' : dsnParts.length > 0 ? 'dsn' : 'text');
  report.reportMessageId = bareMessageId(email.messageId);
  report.originalMessageId = bareMessageId(first(originalHeaders, 'message-id') ?? messageIdIn(returned));

  if (report.kind === 'arf') {
    readComplaint(report, partText(arfParts[0]), originalHeaders);
    return report;
  }

  const lines = notice.slice(0, MAX_TEXT_CHARS).split(/\r?\n|\r/).slice(0, MAX_FIELD_LINES);
  const own = ownAddresses(email);
  const mailFrom = new Set([...notice.slice(0, MAX_TEXT_CHARS).matchAll(MAIL_FROM)].map((m) => m[1].toLowerCase()));
  if (report.kind === 'dsn') {
    for (const part of dsnParts) {
      const dsn = parseDsnFields(partText(part));
      report.envelopeId ??= cleanField(first(dsn.perMessage, 'original-envelope-id'));
      addDsnRecipients(report, dsn, lines);
    }
  }
  if (report.recipients.length === 0) {
    // Forwarded bounces and broken multiparts carry the DSN fields in the text.
    const dsn = parseDsnFields(notice);
    if (dsn.recipients.length > 0) {
      report.envelopeId ??= cleanField(first(dsn.perMessage, 'original-envelope-id'));
      addDsnRecipients(report, dsn, lines);
    }
  }
  if (report.recipients.length === 0 && looksLikeBounce(email, notice)) {
    addTextRecipients(report, lines, mailFrom, senderAddresses(originalHeaders, returned), own);
  }
  return report;
}

// ---------------------------------------------------------------------------------------------
// Fields (RFC 5322 style, as DSN and ARF parts and returned headers are written)

type FieldMap = Map<string, string[]>;

interface FieldBlock {
  fields: FieldMap;
}

function first(fields: FieldMap | null | undefined, name: string): string | null {
  return fields?.get(name)?.[0] ?? null;
}

function cleanField(value: string | null): string | null {
  const cleaned = value?.replace(/\s+/g, ' ').trim();
  return cleaned ? cutText(cleaned, MAX_FIELD_CHARS) : null;
}

/** Logical lines: continuation lines unfolded, at most MAX_FIELD_LINES, each bounded. */
function logicalLines(text: string): string[] {
  const lines: string[] = [];
  let physical = 0;
  for (const line of text.split(/\r?\n|\r/)) {
    if (++physical > MAX_FIELD_LINES) break;
    if (/^[ \t]/.test(line) && line.trim() !== '' && lines.length > 0 && lines[lines.length - 1] !== '') {
      const previous = lines[lines.length - 1];
      if (previous.length < MAX_FIELD_CHARS) lines[lines.length - 1] = cutText(`${previous} ${line.trim()}`, MAX_FIELD_CHARS);
    } else {
      lines.push(line.trim() === '' ? '' : cutText(line, MAX_FIELD_CHARS));
    }
  }
  return lines;
}

const FIELD = /^([A-Za-z][A-Za-z0-9-]{0,76})[ \t]*:[ \t]*(.*)$/;

/** Fields up to the first blank line (headersOnly) or of the whole text, first block only. */
function parseFields(text: string, headersOnly: boolean): FieldBlock {
  const fields: FieldMap = new Map();
  for (const line of logicalLines(text)) {
    if (line === '') {
      if (headersOnly && fields.size > 0) break;
      continue;
    }
    const match = FIELD.exec(line);
    if (!match) continue;
    const name = match[1].toLowerCase();
    const list = fields.get(name) ?? [];
    if (list.length < MAX_RECIPIENTS) list.push(match[2].trim());
    fields.set(name, list);
  }
  return { fields };
}

// ---------------------------------------------------------------------------------------------
// DSN (RFC 3464)

interface DsnFields {
  perMessage: FieldMap;
  recipients: FieldMap[];
}

const RECIPIENT_FIELDS = new Set([
  'final-recipient', 'original-recipient', 'action', 'status', 'diagnostic-code', 'remote-mta',
  'last-attempt-date', 'will-retry-until', 'final-log-id', 'x-actual-recipient',
]);
const PER_MESSAGE_FIELDS = new Set(['reporting-mta', 'original-envelope-id', 'dsn-gateway', 'received-from-mta', 'arrival-date']);

/**
 * The per-message block and one field map per recipient. A recipient starts after a blank line,
 * or where a recipient field repeats without one (some MTAs leave the blank lines out).
 */
function parseDsnFields(text: string): DsnFields {
  const perMessage: FieldMap = new Map();
  const recipients: FieldMap[] = [];
  let current: FieldMap | null = null;
  const close = () => {
    if (current && (current.has('final-recipient') || current.has('original-recipient'))) recipients.push(current);
    current = null;
  };
  for (const line of logicalLines(text)) {
    if (line === '') {
      close();
      continue;
    }
    const match = FIELD.exec(line);
    if (!match) continue;
    const name = match[1].toLowerCase();
    const value = match[2].trim();
    if (RECIPIENT_FIELDS.has(name)) {
      const group: FieldMap | null = current;
      // Postfix writes Final- before Original-Recipient, RFC 3464 the other way round: only a
      // field seen twice starts the next recipient.
      const repeats = group !== null && group.has(name);
      if (repeats) close();
      if (!current) current = new Map();
      (current as FieldMap).set(name, [value]);
      if (recipients.length >= MAX_RECIPIENTS) break;
    } else if (!current && PER_MESSAGE_FIELDS.has(name) && !perMessage.has(name)) {
      perMessage.set(name, [value]);
    }
  }
  close();
  return { perMessage, recipients };
}

function addDsnRecipients(report: ParsedReport, dsn: DsnFields, noticeLines: string[]): void {
  for (const fields of dsn.recipients) {
    if (report.recipients.length >= MAX_RECIPIENTS) return;
    const address = typedAddress(first(fields, 'final-recipient')) ?? typedAddress(first(fields, 'original-recipient'));
    if (!address) continue;
    const original = typedAddress(first(fields, 'original-recipient'));
    const action = cleanField(first(fields, 'action'))?.toLowerCase() ?? null;
    const statusField = cleanField(first(fields, 'status'));
    const diagnosticCode = cleanField(first(fields, 'diagnostic-code'));
    const notice = noticeAbout(noticeLines, original && original !== address ? [address, original] : [address]);
    const verdict = classifyDsnRecipient({ action, status: statusField, diagnosticCode, notice });
    // The field as written (a comment after the code included) goes into the reason; the status
    // kept is the code alone: readers show it as a code, unmasked.
    const reason = bounceReason({ status: statusField, diagnosticCode: diagnosticCode ?? (notice ? diagnosticLine(notice, address) : null), action });
    const status = normalizeStatus(statusField);
    report.recipients.push({ address, ...(original && original !== address ? { originalAddress: original } : {}), outcome: verdict.outcome, status, action, diagnosticCode, reason });
  }
}

// ---------------------------------------------------------------------------------------------
// ARF (RFC 5965)

function readComplaint(report: ParsedReport, text: string, originalHeaders: FieldMap | null): void {
  const { fields } = parseFields(text, false);
  const feedbackType = (cleanField(first(fields, 'feedback-type')) ?? 'other').toLowerCase().slice(0, 100);
  // Removal-Recipient: the opt-out draft's name for the same thing.
  const rcptTo = [...(fields.get('original-rcpt-to') ?? []), ...(fields.get('removal-recipient') ?? [])]
    .map((v) => bareAddress(v))
    .filter((a): a is string => a !== null);
  const returnedTo = addressesIn(first(originalHeaders, 'to') ?? '').slice(0, 1);
  const recipients = [...new Set(rcptTo.length > 0 ? rcptTo : returnedTo)].slice(0, MAX_RECIPIENTS);
  report.envelopeId = cleanField(first(fields, 'original-envelope-id'));
  report.complaint = {
    feedbackType,
    userAgent: cleanField(first(fields, 'user-agent')),
    originalRecipient: recipients[0] ?? null,
    originalMailFrom: bareAddress(first(fields, 'original-mail-from') ?? ''),
  };
  const outcome = complaintOutcome(feedbackType);
  const agent = report.complaint.userAgent;
  for (const address of recipients) {
    report.recipients.push({
      address, ...(rcptTo.length > 0 ? {} : { guessed: true as const }), outcome, status: null, action: null, diagnosticCode: null,
      reason: `${feedbackType} report${agent ? ` (${agent.slice(0, 100)})` : ''}`,
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Plain-text bounces

const BOUNCE_SENDER = /^(?:mailer-daemon|mailer_daemon|mailerdaemon|mail-daemon|postmaster|mdaemon|mail\.delivery|maildelivery|mail-delivery|bounce|bounces|nobody)(?:[+.=-][^@]*)?@/i;
const BOUNCE_SUBJECT = /undeliver|undelivered|delivery (?:status|failure|failed|has failed|problem|report|notification|delayed)|returned mail|mail delivery (?:failed|failure|system)|failure notice|non-?deliver|not delivered|could not be delivered|delivery failure|mail failure|warning: could not send|delayed mail|mail system error|nondeliverable|rejected|returned to sender|bounced/i;
const FAILURE_STATEMENT = /(?:could not be delivered|couldn't be delivered|could not deliver|wasn't able to deliver|was not able to deliver|unable to deliver|not be delivered|failed permanently|delivery (?:has )?failed|did not reach|was not delivered|wasn't delivered|permanent (?:fatal )?error|following address(?:es|\(es\))? failed|delivery to the following|undeliverable|returned mail|could not be sent|has not yet been delivered|not yet been delivered|delivery has been delayed|will continue to try|(?:temporary|permanent) failure|message (?:was )?rejected|error has occurred while attempting to deliver|problem delivering|a message that you sent)/i;
const AUTO_REPLY_SUBJECT = /^(?:auto(?:matic)?[ -]?(?:reply|response|antwort)|out of (?:the )?office|away|vacation|abwesend|absence)/i;

function looksLikeBounce(email: Email, notice: string): boolean {
  const from = email.from?.address ?? '';
  const subject = email.subject ?? '';
  const failure = FAILURE_STATEMENT.test(notice.slice(0, MAX_TEXT_CHARS));
  if (AUTO_REPLY_SUBJECT.test(subject.trim()) && !failure) return false;
  return failure || BOUNCE_SENDER.test(from) || BOUNCE_SUBJECT.test(subject) || /^mail delivery/i.test(email.from?.name ?? '');
}

// Local parts as domain/mailbox.ts reads them (a dot-atom, or a quoted string whose quoted pairs
// may escape a quote), each part bounded; the quoted string's two alternatives share no first
// character, so no input makes it backtrack.
const LOCAL_PART_SOURCE = "(?:[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]{1,64}(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]{1,64}){0,16}|\"(?:[\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\x20-\\x7e]){0,62}\")";
const ADDRESS_SOURCE = `${LOCAL_PART_SOURCE}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?){1,16}`;
const ADDRESS = new RegExp(`(?<![\\w.+/=-])${ADDRESS_SOURCE}`, 'g');
/** Where bounce texts name the recipient: an address opening a line, in RCPT TO, or a transcript's "<a>...". */
const RECIPIENT_LINE = new RegExp(`^\\s{0,12}(?:"[^"]{0,100}"\\s*)?<?(${ADDRESS_SOURCE})>?(?:\\s*$|\\s*:|\\s+on\\s|\\s*\\(|\\s*<mailto:|\\s*\\.\\.\\.|\\s+[-–]\\s)`);
const RCPT_TO = new RegExp(`rcpt to:?\\s*<(${ADDRESS_SOURCE})>`, 'gi');
const TRANSCRIPT_RCPT = new RegExp(`^\\s{0,12}(?:<<<\\s*)?[45]\\d\\d[ -](?:[245]\\.\\d{1,3}\\.\\d{1,3}\\s+)?<(${ADDRESS_SOURCE})>\\.\\.\\.`);
const FAILED_TO = new RegExp(`(?:to the following (?:recipient|address)[^:\\n]{0,40}:|delivered to:|not delivered to)\\s*<?(${ADDRESS_SOURCE})`, 'gi');
const MAIL_FROM = new RegExp(`mail from:?\\s*<(${ADDRESS_SOURCE})>`, 'gi');
const DAEMON_LOCAL_PART = /^(?:mailer-daemon|mailer_daemon|mailerdaemon|mail-daemon)$/i;
/** Mailboxes a notice names for help ("please contact <support@isp>"); real recipients too, so only skipped when guessing. */
const SERVICE_LOCAL_PART = /^(?:postmaster|abuse|hostmaster|webmaster|noc|root|support|help|helpdesk|nobody|bounce|bounces|no-?reply)$/i;

/**
 * The recipients a bounce text names, in order of first naming: addresses opening a line, in
 * RCPT TO, in a transcript's "<a>...", after "delivered to:"; else, when the text follows no
 * layout these know, every address it names but the report's own (the return path it came to,
 * its sender) and help mailboxes. Never the original's sender, a transcript's MAIL FROM or a
 * mailer daemon.
 */
function namedRecipients(lines: string[], mailFrom: Set<string>, senders: Set<string>, ours: Set<string>): Array<{ address: string; line: number }> {
  const named: Array<{ address: string; line: number }> = [];
  const name = (raw: string, line: number, loose: boolean) => {
    const address = raw.toLowerCase();
    const local = address.split('@')[0];
    if (DAEMON_LOCAL_PART.test(local) || mailFrom.has(address) || senders.has(address)) return;
    if (loose && (ours.has(address) || SERVICE_LOCAL_PART.test(local))) return;
    if (!named.some((n) => n.address === address) && named.length < MAX_RECIPIENTS) named.push({ address, line });
  };
  lines.forEach((line, index) => {
    const atStart = RECIPIENT_LINE.exec(line) ?? TRANSCRIPT_RCPT.exec(line);
    if (atStart) name(atStart[1], index, false);
    for (const match of line.matchAll(RCPT_TO)) name(match[1], index, false);
    for (const match of line.matchAll(FAILED_TO)) name(match[1], index, false);
  });
  if (named.length === 0) {
    lines.forEach((line, index) => {
      for (const match of line.matchAll(ADDRESS)) name(match[0], index, true);
    });
  }
  return named.sort((a, b) => a.line - b.line);
}

/**
 * What a notice says about some addresses: the block from the line first naming one of them to
 * the next recipient's (at most 40 lines), and every other line naming one of them with the
 * transcript lines just before it (the ">>> DATA" before a "<<< 550 <a>...").
 */
function noticeAbout(lines: string[], addresses: string[], start?: number, end?: number): string | null {
  const mentions = (line: string) => {
    const lower = line.toLowerCase();
    return addresses.some((address) => lower.includes(address));
  };
  const from = start ?? lines.findIndex(mentions);
  if (from < 0) return null;
  let until = Math.min(end ?? lines.length, from + 40, lines.length);
  if (end === undefined) {
    // The block ends where the next address opens a line.
    for (let i = from + 1; i < until; i++) {
      const other = RECIPIENT_LINE.exec(lines[i]);
      if (other && !addresses.includes(other[1].toLowerCase())) {
        until = i;
        break;
      }
    }
  }
  const picked = new Set<number>();
  for (let i = from; i < Math.max(until, from + 1); i++) picked.add(i);
  lines.forEach((line, i) => {
    if (i >= from && i < until) return;
    if (!mentions(line)) return;
    picked.add(i);
    for (let j = i - 1; j >= Math.max(0, i - 2) && /^\s*(?:>>>|<<<)/.test(lines[j]); j--) picked.add(j);
  });
  return [...picked].sort((a, b) => a - b).map((i) => lines[i]).join('\n').slice(0, MAX_TEXT_CHARS);
}

function addTextRecipients(report: ParsedReport, lines: string[], mailFrom: Set<string>, senders: Set<string>, own: Set<string>): void {
  const named = namedRecipients(lines, mailFrom, senders, own);
  const whole = lines.join('\n');
  const wholeVerdict = classifyText(whole);
  named.forEach((entry, i) => {
    const context = noticeAbout(lines, [entry.address], entry.line, named[i + 1]?.line) ?? '';
    // The line naming the recipient often states its cause (a transcript's "554 <a>... Remote
    // protocol error"); the lines after it may already be the next recipient's.
    const own = classifyText(lines[entry.line]);
    // One recipient: the whole notice is about it. Several: each is read in its own block.
    let verdict: Classification =
      own.rule && PHRASE_RULE_NAMES.has(own.rule) ? own : classifyText(context, { notice: named.length === 1 ? whole : null });
    if (verdict.outcome === 'undetermined' && wholeVerdict.outcome !== 'undetermined') verdict = wholeVerdict;
    let outcome = verdict.outcome;
    if (wholeVerdict.rule === 'delay_notice') outcome = 'delayed';
    else if (outcome === 'delayed') outcome = 'soft_bounced';
    const diagnosticCode = diagnosticLine(context, entry.address);
    report.recipients.push({ address: entry.address, outcome, status: verdict.status, action: null, diagnosticCode, reason: bounceReason({ status: verdict.status, diagnosticCode }) });
  });
}

const PHRASE_RULE_NAMES = new Set(PHRASE_RULES.map((rule) => rule.name));

/** The line of the recipient's text that carries the remote reply, else the first one after the address. */
function diagnosticLine(context: string, address: string): string | null {
  const lines = context.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  const coded = lines.find((l) => /(?:^|[\s:;(\[#])[45]\d\d[\s-]|(?:^|[\s#(])[45]\.\d{1,3}\.\d{1,3}/.test(l));
  const after = lines.find((l, i) => i > 0 || !l.toLowerCase().endsWith(address)) ?? null;
  const line = coded ?? after;
  return line ? line.replace(/\s+/g, ' ').slice(0, 500) : null;
}

// ---------------------------------------------------------------------------------------------
// Texts, addresses, identifiers

const RETURNED_MARKER = /^\s*(?:[-=*_]{2,}.{0,40}(?:original message|copy of (?:the|your) message|below this line|returned message|unsent message|message (?:headers )?follows|original headers|undelivered message|headers of the original|message header)|[-=*_]{2,}\s*original message\s*[-=*_]{2,}|original message (?:headers|follows)|below is a copy of the (?:original )?message|the original message (?:headers )?(?:follows|(?:is|are) (?:below|attached|included))|(?:return-path|received|dkim-signature|x-received|authentication-results):\s)/i;

/** The notice before the returned original, and the returned original. */
function splitReturnedMessage(text: string): { before: string; after: string } {
  const lines = text.split(/\r?\n|\r/);
  let offset = 0;
  for (const line of lines) {
    const stripped = line.replace(/^(?:>\s?)+/, '');
    if (RETURNED_MARKER.test(stripped)) return { before: text.slice(0, offset), after: text.slice(offset, offset + MAX_TEXT_CHARS) };
    offset += line.length + 1;
    if (offset > MAX_TEXT_CHARS) break;
  }
  return { before: text.slice(0, MAX_TEXT_CHARS), after: '' };
}

/**
 * Quoted forwards ("> Final-Recipient: ...") read like the original: when most lines are
 * quoted, one level of quoting goes. Not line by line: a transcript's ">>> DATA" is no quote.
 */
function unquote(text: string): string {
  const lines = text.split('\n');
  const nonEmpty = lines.filter((l) => l.trim() !== '');
  const quoted = nonEmpty.filter((l) => l.startsWith('>')).length;
  if (nonEmpty.length === 0 || quoted * 2 < nonEmpty.length) return text;
  return lines.map((l) => l.replace(/^> ?/, '')).join('\n');
}

function humanText(email: Email): string {
  if (email.text) return email.text.slice(0, 2 * MAX_TEXT_CHARS);
  if (email.html) return htmlToText(email.html.slice(0, 4 * MAX_TEXT_CHARS));
  return '';
}

function htmlToText(html: string): string {
  return html
    .replace(/<(?:script|style)\b[^>]{0,500}>[\s\S]{0,100000}?<\/(?:script|style)>/gi, ' ')
    .replace(/<(?:br|\/p|\/div|\/tr|\/li|\/h\d|p|div|tr|li)\b[^>]{0,500}>/gi, '\n')
    .replace(/<[^>]{0,2000}>/g, ' ')
    .replace(/&nbsp;/gi, ' ')
    .replace(/&lt;/gi, '<')
    .replace(/&gt;/gi, '>')
    .replace(/&quot;/gi, '"')
    .replace(/&#39;|&apos;/gi, "'")
    .replace(/&amp;/gi, '&')
    .replace(/[ \t]+/g, ' ');
}

function partText(part: Attachment | undefined): string {
  if (!part) return '';
  const content = part.content;
  if (typeof content === 'string') return content.slice(0, MAX_PART_BYTES);
  const view = content instanceof Uint8Array ? content : new Uint8Array(content);
  return new TextDecoder('utf-8').decode(view.subarray(0, MAX_PART_BYTES));
}

/** "rfc822; <User@Example.COM>" -> "user@example.com"; other address types are not addresses. */
function typedAddress(value: string | null): string | null {
  if (!value) return null;
  const semicolon = value.indexOf(';');
  const type = semicolon >= 0 ? value.slice(0, semicolon).trim().toLowerCase() : 'rfc822';
  if (type !== 'rfc822' && type !== 'utf-8' && type !== '') return null;
  const raw = (semicolon >= 0 ? value.slice(semicolon + 1) : value).trim().replace(/^<|>$/g, '').trim();
  // DSN fields hold the address as given: as admission reads it (parseAddress, quoted pairs
  // included), or with odd dots or other characters admission refuses.
  if (parseAddress(raw).ok) return raw.toLowerCase();
  if (raw.length <= 320 && /^(?:"(?:[^"\\\r\n]|\\[^\r\n]){1,128}"|[^\s"@<>()]{1,128})@[A-Za-z0-9.-]{1,255}$/.test(raw) && /@[A-Za-z0-9]/.test(raw)) return raw.toLowerCase();
  return bareAddress(raw);
}

function bareAddress(value: string): string | null {
  const trimmed = value.trim().replace(/^<|>$/g, '').trim();
  const match = new RegExp(`^(?:"?[^"<]{0,200}"?\\s*<)?(${ADDRESS_SOURCE})>?$`).exec(trimmed.slice(0, 400));
  if (match) return match[1].toLowerCase();
  const anywhere = new RegExp(`<(${ADDRESS_SOURCE})>`).exec(trimmed.slice(0, 400));
  return anywhere ? anywhere[1].toLowerCase() : null;
}

function addressesIn(value: string): string[] {
  return [...value.slice(0, MAX_FIELD_CHARS).matchAll(ADDRESS)].map((m) => m[0].toLowerCase());
}

/** The report's own envelope and headers: the return path it came back to, its sender. */
function ownAddresses(email: Email): Set<string> {
  const own = new Set<string>();
  for (const header of email.headers) {
    if (OWN_HEADERS.has(header.key)) for (const address of addressesIn(header.value)) own.add(address);
  }
  return own;
}

const OWN_HEADERS = new Set(['to', 'cc', 'from', 'sender', 'reply-to', 'return-path', 'delivered-to', 'x-original-to', 'envelope-to', 'x-envelope-to']);

/** Who sent the returned original. */
function senderAddresses(originalHeaders: FieldMap | null, returned: string): Set<string> {
  const senders = new Set<string>();
  const headers = originalHeaders ?? parseFields(returned, true).fields;
  for (const key of ['from', 'sender', 'return-path']) {
    for (const value of headers.get(key) ?? []) for (const address of addressesIn(value)) senders.add(address);
  }
  return senders;
}

/** The body of a message whose MIME structure gave nothing (a multipart without its boundary). */
function rawBody(bytes: Uint8Array): string {
  const head = bytes.subarray(0, Math.min(bytes.length, MAX_MIME_HEADER_BYTES + 4));
  let start = -1;
  for (let i = 0; i + 1 < head.length; i++) {
    if (head[i] === 10 && (head[i + 1] === 10 || (head[i + 1] === 13 && head[i + 2] === 10))) {
      start = i + (head[i + 1] === 10 ? 2 : 3);
      break;
    }
  }
  if (start < 0) return '';
  return new TextDecoder('utf-8').decode(bytes.subarray(start, start + 2 * MAX_TEXT_CHARS));
}

function messageIdIn(returned: string): string | null {
  const match = /^(?:>\s?)*message-id:[ \t]*(\S{1,300})/im.exec(returned.slice(0, MAX_TEXT_CHARS));
  return match ? match[1] : null;
}

function bareMessageId(value: string | null | undefined): string | null {
  if (!value) return null;
  const trimmed = value.trim();
  const bracketed = /<([^<>\s]{1,300})>/.exec(trimmed);
  const id = bracketed ? bracketed[1] : trimmed.split(/\s/, 1)[0].slice(0, 300);
  return id || null;
}
