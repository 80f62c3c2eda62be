// Where the email addresses in a text are: what `relay events export --redact` hashes
// (apps/services/event-reading.ts), what is masked out of a BCC recipient's server reply or
// report before it is recorded (maskAddresses: apps/services/delivery/attempt.ts,
// apps/services/feedback/ingest-report.ts), and out of every reply the deliverability read model
// keeps (projections/deliverability.ts).
//
// An address in free text (replies, reasons, subjects): a local part that is an RFC 5322
// dot-atom (apostrophes included, though not leading: 'ann@…' in a reply is ann@…; UTF-8 too) or
// quoted ("john doe"@…), and a domain of dot-separated labels (a trailing full stop is the
// sentence's) or an address literal. domain/mailbox.ts admits both forms of local part.
//
// Also an address written as a URL writes it (`?email=ann%40example.org`, in a List-Unsubscribe
// header or metadata): its @ is %40, its local part unreserved characters and %XX escapes, its
// domain labels (non-ASCII ones as UTF-8 escapes). It is hashed as the address it decodes to.
//
// The text is the sender's, of any length: nothing may read a long stretch again from each of its
// characters, as a regular expression for the local part would. So a plain address is found
// by one pass (literalAddresses), a URL-encoded one from its %40, its local part read backwards
// from there (never past the address before it), and a domain by a pattern that never backtracks.
const DOMAIN_LABEL = '[A-Za-z0-9_\\u0080-\\uFFFF-]+';
const DOMAIN = new RegExp(`${DOMAIN_LABEL}(?:\\.${DOMAIN_LABEL})*|\\[[A-Za-z0-9:.]+\\]`, 'y');
const ENCODED_LABEL = '(?:[A-Za-z0-9_\\u0080-\\uFFFF-]|%[89A-Fa-f][0-9A-Fa-f])+';
const ENCODED_DOMAIN = new RegExp(`${ENCODED_LABEL}(?:\\.${ENCODED_LABEL})*`, 'y');

const DOT = 0x2e;
const APOSTROPHE = 0x27;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const AT = 0x40;

/** Characters by code (below 128): RFC 5322 atext; and what a URL leaves unescaped in a local part. */
const asciiSet = (chars: string): Uint8Array => {
  const set = new Uint8Array(128);
  for (const c of chars) set[c.charCodeAt(0)] = 1;
  return set;
};
const LETTERS_DIGITS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const ATEXT = asciiSet(`${LETTERS_DIGITS}!#$%&*+/=?^_\`{|}~-`);
const URL_LOCAL = asciiSet(`${LETTERS_DIGITS}._~!*'+-`);
const HEX = asciiSet('0123456789ABCDEFabcdef');
const isAtext = (code: number): boolean => code >= 0x80 || ATEXT[code] === 1;
const isHex = (code: number): boolean => code < 0x80 && HEX[code] === 1;

const inDotAtom = (code: number): boolean => isAtext(code) || code === APOSTROPHE;

/** Where a dot-atom local part begun before `from` stops: at neither atext nor an apostrophe, nor a dot before one. */
function dotAtomStop(text: string, from: number): number {
  let i = from;
  while (i < text.length && (inDotAtom(text.charCodeAt(i)) || (text.charCodeAt(i) === DOT && inDotAtom(text.charCodeAt(i + 1))))) i++;
  return i;
}

const isLineBreak = (code: number): boolean => code === 0x0a || code === 0x0d || code === 0x2028 || code === 0x2029;

/**
 * The closing quote of a quoted string whose content begins at `from` (-1: none, a line break or
 * the end came first), and where the search ended (`until`). A quote between an opening quote
 * and `until` is an escaped one of that string's, so a string opened there has the same content
 * from there on, and the same answer.
 */
function closingQuote(text: string, from: number): { close: number; until: number } {
  let i = from;
  for (;;) {
    if (i >= text.length) return { close: -1, until: i };
    const code = text.charCodeAt(i);
    if (code === QUOTE) return { close: i, until: i };
    if (code === 0x0a || code === 0x0d) return { close: -1, until: i };
    if (code === BACKSLASH) {
      if (i + 1 >= text.length || isLineBreak(text.charCodeAt(i + 1))) return { close: -1, until: i };
      i += 2;
    } else {
      i++;
    }
  }
}

/** The byte of the %XX escape that ends at `end`, or -1. */
function escapeEndingAt(text: string, end: number, floor: number): number {
  if (end - 3 < floor || text.charCodeAt(end - 3) !== 0x25) return -1;
  const high = text.charCodeAt(end - 2);
  const low = text.charCodeAt(end - 1);
  return isHex(high) && isHex(low) ? parseInt(text.slice(end - 2, end), 16) : -1;
}

/**
 * Where the dot-atom local part of a URL-encoded address ending at `end` (where its %40 is)
 * begins, not before `floor`, or -1: characters a URL leaves as they are, and escapes of what a
 * dot-atom holds (atext, dots, apostrophes, UTF-8); an escaped space or comma ends it, as it would
 * end a plain one.
 */
function encodedDotAtomStart(text: string, end: number, floor: number): number {
  if (end === floor || text.charCodeAt(end - 1) === DOT) return -1;
  let start = end;
  while (start > floor) {
    const byte = escapeEndingAt(text, start, floor);
    if (byte >= 0) {
      if (!inDotAtom(byte) && byte !== DOT) break;
      start -= 3;
      continue;
    }
    const code = text.charCodeAt(start - 1);
    if (code < 0x80 && URL_LOCAL[code] !== 1) break;
    start--;
  }
  while (start < end && (text.charCodeAt(start) === DOT || text.charCodeAt(start) === APOSTROPHE)) start++;
  return start < end ? start : -1;
}

/**
 * Where the quoted local part (%22…%22) of a URL-encoded address ending at `end` begins, not
 * before `floor`, or -1: at the %22 before its closing one (one holding a quote of its own, which
 * nobody writes, is not told).
 */
function encodedQuotedStart(text: string, end: number, floor: number): number {
  for (let i = end - 6; i >= floor; i--) {
    const code = text.charCodeAt(i);
    if (code === 0x0a || code === 0x0d) return -1;
    if (code === 0x25 && text.startsWith('%22', i)) return i;
  }
  return -1;
}

/** The text of a URL component, its %XX escapes decoded (as UTF-8; bytes that are not, one character each). */
function percentDecoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text.replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  }
}

export interface Found { start: number; end: number; address: string }

/**
 * Each address in `text` written with a literal @, in order: the leftmost match first, the quoted
 * form tried before the dot-atom, as one regular expression would find them, in linear time: a
 * dot-atom's stop and a quoted string's closing quote are found once for all the starts that share them.
 */
function* literalAddresses(text: string): Generator<Found> {
  const lastAt = text.lastIndexOf('@');
  let dotAtomEnd = -1;
  let quoted = { close: -1, until: -1 };
  // The domain after an @ is read once, whatever the number of local-part starts that reach that
  // @ (every start of a long dot-atom does): an unclosed address literal is not read again from each.
  let domainAt = -1;
  let domainEnd = -1;
  for (let p = 0; p < lastAt; p++) {
    const code = text.charCodeAt(p);
    let at = -1;
    if (code === QUOTE) {
      if (p >= quoted.until) quoted = closingQuote(text, p + 1);
      if (quoted.close >= 0 && text.charCodeAt(quoted.close + 1) === AT) at = quoted.close + 1;
    } else if (isAtext(code)) {
      if (p >= dotAtomEnd) dotAtomEnd = dotAtomStop(text, p + 1);
      if (text.charCodeAt(dotAtomEnd) === AT) at = dotAtomEnd;
    }
    if (at < 0) continue;
    if (at !== domainAt) {
      domainAt = at;
      DOMAIN.lastIndex = at + 1;
      domainEnd = DOMAIN.exec(text) === null ? -1 : DOMAIN.lastIndex;
    }
    if (domainEnd < 0) continue;
    const end = domainEnd;
    yield { start: p, end, address: text.slice(p, end) };
    p = end - 1;
  }
}

/**
 * Each address in `text` written URL-encoded (its @ as %40), in order, decoded. Its local part is
 * read backwards from the %40: never past the address before it, nor a quoted one past the
 * closing quote of one before it (it holds no quote), so no character is read twice.
 */
function* encodedAddresses(text: string): Generator<Found> {
  let floor = 0;
  let quoteFloor = 0;
  for (let at = text.indexOf('%40'); at >= 0; at = text.indexOf('%40', at + 1)) {
    let start: number;
    if (at - 3 >= floor && text.startsWith('%22', at - 3)) {
      start = encodedQuotedStart(text, at, Math.max(floor, quoteFloor));
      quoteFloor = at - 3;
    } else {
      start = encodedDotAtomStart(text, at, floor);
    }
    if (start < 0) continue;
    ENCODED_DOMAIN.lastIndex = at + 3;
    if (ENCODED_DOMAIN.exec(text) === null) continue;
    const end = ENCODED_DOMAIN.lastIndex;
    yield { start, end, address: `${percentDecoded(text.slice(start, at))}@${percentDecoded(text.slice(at + 3, end))}` };
    floor = end;
    at = end - 1;
  }
}

export function firstAddress(text: string): string | null {
  for (const { address } of literalAddresses(text)) return address;
  return null;
}

/** The URL-encoded addresses that overlap no plain one (`x%40y@example.org` is plain, its local part holding %40). */
function* encodedApart(text: string, plain: Found[]): Generator<Found> {
  let i = 0;
  for (const found of encodedAddresses(text)) {
    while (i < plain.length && plain[i].end <= found.start) i++;
    if (i === plain.length || plain[i].start >= found.end) yield found;
  }
}

/** Every address in the text, plain or URL-encoded, in order. */
export function addressesInText(text: string): Found[] {
  const plain = [...literalAddresses(text)];
  return [...plain, ...encodedApart(text, plain)].sort((a, b) => a.start - b.start);
}

/** What an address becomes in a masked text. */
export const MASKED_ADDRESS = '<address>';

/**
 * `text` with every address in it (plain or URL-encoded, as addressesInText finds them) replaced
 * by `<address>`, and the rest as written: a server's reply or a report about a BCC recipient
 * (Postfix: "550 5.1.1 <bcc@example.org>: Recipient address rejected") keeps its codes and words,
 * never the address. Angle brackets around an address go with it ("<…>" stays "<address>").
 */
export function maskAddresses(text: string): string {
  let out = '';
  let copied = 0;
  for (const { start, end } of addressesInText(text)) {
    const bracketed = start > copied && text.charCodeAt(start - 1) === 0x3c && text.charCodeAt(end) === 0x3e;
    out += text.slice(copied, bracketed ? start - 1 : start) + MASKED_ADDRESS;
    copied = bracketed ? end + 1 : end;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/**
 * maskAddresses for a text already cut short and ended by "…" (a report's reason, cut by the
 * parser before anyone knew whose it was): an address the cut went through has lost its "@" and
 * is no address any more, so the last word before the "…", which it would be, goes too.
 */
export function maskAddressesInCut(text: string): string {
  const masked = maskAddresses(text);
  if (!masked.endsWith('…')) return masked;
  const kept = masked.slice(0, -1);
  if (kept.endsWith(MASKED_ADDRESS)) return masked;
  return `${kept.replace(/\S+$/, '')}…`;
}
