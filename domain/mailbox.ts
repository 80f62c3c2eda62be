// Mailbox: "address" or "Name <address>" (spec: bare address max 254, whole max 320,
// no CR or LF, surrounding whitespace trimmed). Lengths count characters (domain/text.ts).
// A domain written in Unicode (IDNA U-labels, `bücher.example`) is taken in its ASCII form
// (`xn--bcher-kva.example`), which the mailbox, its address and its domain then hold: the
// form that goes on the wire, as the management API stores a sending domain. A local part
// must be ASCII: Relay does not ask receivers for SMTPUTF8 (RFC 6531).
import { asciiDomainName, labelProblem } from './dns-names.ts';
import { characterCount } from './text.ts';

export interface Mailbox {
  /** The mailbox as the client wrote it, trimmed; a Unicode domain in its ASCII form. */
  mailbox: string;
  /** The address part, as written but for a Unicode domain, in its ASCII form. */
  address: string;
  /**
   * The address in canonical form (canonicalAddress): one text per mailbox, whichever way it
   * was written. The form used for filters, suppressions and quotas, and as the envelope's.
   */
  normalized: string;
  /** Lower-cased domain of the address, in ASCII form. */
  domain: string;
  displayName: string | null;
}

export const MAX_MAILBOX_LENGTH = 320;
export const MAX_ADDRESS_LENGTH = 254;

// Dot-atom local parts, or a quoted local part; a domain of LDH labels (dns-names.ts labelProblem).
// Deliberately no IP-literal domains: nobody sends transactional mail to them and they bypass
// domain rules.
const LOCAL_DOT_ATOM = /^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$/;
const LOCAL_QUOTED = /^"([\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e])*"$/;
const NON_ASCII = /[^\x00-\x7f]/;
// A bare address whose local part is a quoted string: its quotes may hold spaces ("john
// doe"@example.org, RFC 5321 4.1.2) and angle brackets, which parseAddress judges, not the bare
// form's own refusal of them. The domain may hold neither.
const BARE_QUOTED_LOCAL = /^"(?:[^"\\]|\\.)*"@[^<>\s"]+$/;

export type MailboxResult = { ok: true; value: Mailbox } | { ok: false; reason: string };

/**
 * A bare address as admission reads it. `address` is the address with its domain in ASCII
 * form: as written when the domain is ASCII already, else the local part as written, "@" and
 * the domain's A-labels (lower case); `domain` is that domain, lower-cased.
 */
export function parseAddress(address: string): { ok: true; address: string; domain: string } | { ok: false; reason: string } {
  if (address.length > MAX_ADDRESS_LENGTH) return { ok: false, reason: `address is longer than ${MAX_ADDRESS_LENGTH} characters` };
  const at = address.lastIndexOf('@');
  if (at <= 0 || at === address.length - 1) return { ok: false, reason: 'is not an email address' };
  const local = address.slice(0, at);
  const written = address.slice(at + 1);
  if (local.length > 64) return { ok: false, reason: 'local part is longer than 64 characters' };
  if (NON_ASCII.test(local)) return { ok: false, reason: 'has non-ASCII characters before the @, which are not supported (Relay does not send SMTPUTF8)' };
  if (!LOCAL_DOT_ATOM.test(local) && !LOCAL_QUOTED.test(local)) return { ok: false, reason: 'is not an email address' };
  // RFC 5321 allows them, but nodemailer refuses them in an envelope and turns them into spaces
  // in a header: such an address would be a bounce no receiver gave, and suppressed.
  if (/[<>]/.test(local)) return { ok: false, reason: 'has "<" or ">" in its quoted local part, which Relay does not send' };
  const unicode = NON_ASCII.test(written);
  const domain = unicode ? asciiDomainName(written) : written;
  if (domain === null) return { ok: false, reason: 'has an invalid domain: not a valid internationalised domain name' };
  const ascii = unicode ? `${local}@${domain}` : address;
  if (ascii.length > MAX_ADDRESS_LENGTH) return { ok: false, reason: `address is longer than ${MAX_ADDRESS_LENGTH} characters with its domain in ASCII form` };
  const labels = domain.toLowerCase().split('.');
  if (labels.length < 2 || /^\d+$/.test(labels[labels.length - 1])) return { ok: false, reason: 'has an invalid domain' };
  for (const label of labels) {
    const problem = labelProblem(label);
    // A malformed xn-- label looks well formed, so its reason says what is wrong with it.
    if (problem?.kind === 'punycode') return { ok: false, reason: `has an invalid domain: ${problem.message}` };
    if (problem) return { ok: false, reason: 'has an invalid domain' };
  }
  return { ok: true, address: ascii, domain: domain.toLowerCase() };
}

export function parseMailbox(input: string): MailboxResult {
  if (/[\r\n]/.test(input)) return { ok: false, reason: 'must not contain CR or LF' };
  const mailbox = input.trim();
  if (mailbox.length === 0) return { ok: false, reason: 'must not be empty' };
  if (characterCount(mailbox) > MAX_MAILBOX_LENGTH) return { ok: false, reason: `is longer than ${MAX_MAILBOX_LENGTH} characters` };
  let address = mailbox;
  let displayName: string | null = null;
  const angle = /^(.*?)\s*<([^<>]*)>$/.exec(mailbox);
  if (angle) {
    address = angle[2].trim();
    const name = angle[1].trim();
    displayName = name.length > 0 ? unquote(name) : null;
    if (displayName !== null && /[<>]/.test(angle[1]) && !/^".*"$/.test(name)) return { ok: false, reason: 'has an invalid display name' };
  } else if (!BARE_QUOTED_LOCAL.test(mailbox) && /[<>\s]/.test(mailbox)) {
    return { ok: false, reason: 'must be an address or "Name <address>"' };
  }
  const parsed = parseAddress(address);
  if (!parsed.ok) return parsed;
  const normalized = canonicalOf(parsed);
  if (parsed.address === address) return { ok: true, value: { mailbox, address, normalized, domain: parsed.domain, displayName } };
  // The mailbox's text too carries the ASCII form, so no header, event or answer shows another.
  const ascii = angle ? `${mailbox.slice(0, mailbox.lastIndexOf('<'))}<${parsed.address}>` : parsed.address;
  if (characterCount(ascii) > MAX_MAILBOX_LENGTH) return { ok: false, reason: `is longer than ${MAX_MAILBOX_LENGTH} characters with its domain in ASCII form` };
  return { ok: true, value: { mailbox: ascii, address: parsed.address, normalized, domain: parsed.domain, displayName } };
}

/**
 * The canonical form of an address parseAddress accepts (any other text is only lower-cased),
 * lower-cased whole as before (normalizeAddress in ./management.ts says why). A quoted local
 * part is the same local part as its content with its quoted pairs undone (RFC 5321 4.1.2):
 * `"ann"@d`, `"a\nn"@d` and `ann@d` are one mailbox. When that content is a dot-atom it is
 * written unquoted; a local part that needs its quotes keeps them, escaping only `"` and `\`.
 * A domain written in Unicode is in its ASCII form (parseAddress), as `kunde@münchen.example`
 * and `kunde@xn--mnchen-3ya.example` are one mailbox. A plain ASCII address is only
 * lower-cased, so every form stored before stays as it was.
 */
export function canonicalAddress(address: string): string {
  const parsed = parseAddress(address);
  return parsed.ok ? canonicalOf(parsed) : address.toLowerCase();
}

/** canonicalAddress of an address parseAddress accepted. */
function canonicalOf(parsed: { address: string; domain: string }): string {
  const local = parsed.address.slice(0, parsed.address.lastIndexOf('@'));
  if (!local.startsWith('"')) return parsed.address.toLowerCase();
  const content = local.slice(1, -1).replace(/\\(.)/g, '$1');
  const canonical = LOCAL_DOT_ATOM.test(content) ? content : `"${content.replace(/["\\]/g, '\\$&')}"`;
  return `${canonical}@${parsed.domain}`.toLowerCase();
}

function unquote(name: string): string {
  return /^".*"$/.test(name) ? name.slice(1, -1).replace(/\\(.)/g, '$1') : name;
}
