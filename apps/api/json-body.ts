// JSON request bodies whose numbers arrive exactly as sent. JSON.parse reads every number as
// an IEEE-754 double and says nothing when that changes it: 1e400 becomes Infinity (stored as
// null), 1e-400 becomes 0, a 30-digit integer loses its last digits. Only the raw text shows
// the difference, so this parser, a drop-in for fastify's own JSON parser (same parsing and
// refusals of malformed JSON), also looks at the text of every number that could have been
// changed and refuses the body (400 validation_error naming the field, e.g.
// "body.metadata.amount") when one does not come back as the same decimal value.
//
// Keys named __proto__, constructor or prototype are data like any other, not refused as
// fastify's prototype-poisoning guard would ("Body is not valid JSON"): a tag may be named
// __proto__ (tag names are [A-Za-z0-9_-]+) and metadata is free-form. JSON.parse makes such a
// key an own data property and never sets a prototype; what reads a body copies its objects
// with spreads, Object.entries and Object.fromEntries (which keep it an own property), never by
// assigning `copy[key] = value` onto a plain object, where __proto__ would set the copy's prototype.
//
// "The same decimal value": the number as JSON.stringify writes it again, compared as a decimal
// with the text sent. 1.0, 1e2, 0.1, -0 and 5e-324 are kept; 1e-400, 1e400,
// 12345678901234567890 and 0.10000000000000000001 are refused. Send such values as strings.
//
// With bounds (nesting depth, keys and array items in all), the same pass refuses a body far
// past every limit of its route before JSON.parse runs: 400,000 metadata keys cost JSON.parse
// and any walk over the result some 300 ms of event loop, the scan stops after the 1,334th.
//
// Cost: one linear pass that jumps over strings with indexOf (a 10 MiB body of two strings:
// about a millisecond), never a reviver (a function call per value: a second for a body of two
// million numbers). Without bounds, bodies where no number could be inexact (no exponent, no
// run of 16 digits) cost one regular-expression test. No recursion: nesting costs nothing.
//
// Wiring: apps/api/body-parser.ts, every route's bodies, with the route's bounds.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { RelayError } from '../../domain/errors.ts';

/**
 * A number token needs a look only with an exponent or with 16 or more digits: up to 15
 * significant digits and no exponent, a double always gives the same decimal back.
 */
const MAYBE_INEXACT = /\d[eE][-+]?\d|\d(?:\.?\d){15}/;

/** The decimal value of a JSON number's text: "<sign><digits without leading or trailing zeros>e<exponent>", or "0". */
function decimalOf(text: string): string {
  let s = text;
  const negative = s.charCodeAt(0) === 0x2d;
  if (negative) s = s.slice(1);
  let exponent = 0;
  const e = s.search(/[eE]/);
  if (e !== -1) {
    exponent = Number(s.slice(e + 1));
    s = s.slice(0, e);
  }
  const dot = s.indexOf('.');
  if (dot !== -1) {
    exponent -= s.length - dot - 1;
    s = s.slice(0, dot) + s.slice(dot + 1);
  }
  let start = 0;
  while (start < s.length && s.charCodeAt(start) === 0x30) start++;
  let end = s.length;
  while (end > start && s.charCodeAt(end - 1) === 0x30) {
    end--;
    exponent++;
  }
  if (start === end) return '0';
  return `${negative ? '-' : ''}${s.slice(start, end)}e${exponent}`;
}

/** Whether the number written as `text` in JSON survives JSON.parse and JSON.stringify unchanged in value. */
export function isExactJsonNumber(text: string): boolean {
  if (text.length <= 15 && !/[eE]/.test(text)) return true;
  const value = Number(text);
  if (!Number.isFinite(value)) return false;
  return decimalOf(text) === decimalOf(String(value));
}

export interface InexactNumber {
  /** Where the number is, as the API names fields: "body", "body.metadata.a[2]". */
  path: string;
  /** Its text as sent (cut at 40 characters). */
  text: string;
}

export interface JsonBounds {
  /** Containers (objects, arrays) nested at most this deep; the body itself is level 1. */
  maxDepth: number;
  /** Object keys and array items, at every level together. */
  maxMembers: number;
  /** Said after a refusal, e.g. which limits the bounds come from. */
  note?: string;
}

export interface JsonScan {
  /** The first number JSON.parse would change, if any (only looked for when one could be). */
  inexact: InexactNumber | null;
  /** The first bound passed, if any: the scan stops there. */
  bound: { path: string; reason: string } | null;
}

interface Level {
  array: boolean;
  /** Array: index of the current item. Object: where the current key's string literal starts and ends in the text. */
  index: number;
  keyStart: number;
  keyEnd: number;
}

/** Index of the quote that closes the string literal opened at `open` (text.length when there is none). */
function closingQuote(text: string, open: number): number {
  let from = open + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote === -1) return text.length;
    let backslashes = 0;
    for (let i = quote - 1; text.charCodeAt(i) === 0x5c; i--) backslashes++;
    if (backslashes % 2 === 0) return quote;
    from = quote + 1;
  }
}

function pathOf(text: string, levels: Level[], depth = levels.length): string {
  let path = 'body';
  for (const level of levels.slice(0, depth)) {
    if (level.array) path += `[${level.index}]`;
    else if (level.keyStart >= 0) {
      let key: string;
      try {
        key = JSON.parse(text.slice(level.keyStart, level.keyEnd + 1)) as string;
      } catch {
        key = text.slice(level.keyStart + 1, level.keyEnd);
      }
      path += `.${key.length > 64 ? `${key.slice(0, 64)}…` : key}`;
    }
  }
  return path;
}

const isNumberChar = (c: number) => (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e || c === 0x65 || c === 0x45;

/**
 * One pass over a JSON text, without recursion and without building anything: the first number
 * JSON.parse would not keep exactly, and (with `bounds`) the first place where the nesting or the
 * number of keys and items passes a bound, so a body far past every limit is refused before
 * JSON.parse spends time on it. Strings are skipped whole (indexOf); a malformed text is scanned
 * as far as it goes, never past its end.
 */
export function scanJson(text: string, bounds?: JsonBounds): JsonScan {
  // Without bounds, one regular-expression test settles most bodies; with them the pass runs
  // anyway (and must stop early on a hostile body, which a test over the whole text would not).
  const lookForNumbers = bounds !== undefined || MAYBE_INEXACT.test(text);
  const result: JsonScan = { inexact: null, bound: null };
  if (!lookForNumbers) return result;
  const maxDepth = bounds?.maxDepth ?? Infinity;
  const maxMembers = bounds?.maxMembers ?? Infinity;
  const levels: Level[] = [];
  let members = 0;
  let expectingKey = false;
  const note = bounds?.note ? ` (${bounds.note})` : '';
  const tooMany = () => ({ path: pathOf(text, levels, levels.length - 1), reason: `a request holds at most ${maxMembers.toLocaleString('en-US')} keys and array items in all${note}` });
  const item = () => {
    const top = levels[levels.length - 1];
    if (top?.array && ++members > maxMembers) result.bound = tooMany();
  };
  let i = 0;
  while (i < text.length && result.bound === null) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      const close = closingQuote(text, i);
      const top = levels[levels.length - 1];
      if (expectingKey && top && !top.array) {
        top.keyStart = i;
        top.keyEnd = close;
        expectingKey = false;
        if (++members > maxMembers) result.bound = tooMany();
      } else {
        item();
      }
      i = close + 1;
    } else if (c === 0x7b || c === 0x5b) {
      item();
      if (result.bound) break;
      levels.push({ array: c === 0x5b, index: 0, keyStart: -1, keyEnd: -1 });
      expectingKey = c === 0x7b;
      if (levels.length > maxDepth) {
        result.bound = { path: pathOf(text, levels, levels.length - 1), reason: `a request nests at most ${maxDepth} levels of objects and arrays${note}` };
      }
      i++;
    } else if (c === 0x7d || c === 0x5d) {
      levels.pop();
      expectingKey = false;
      i++;
    } else if (c === 0x3a) {
      expectingKey = false;
      i++;
    } else if (c === 0x2c) {
      const top = levels[levels.length - 1];
      if (top?.array) top.index++;
      else expectingKey = true;
      i++;
    } else if ((c >= 0x30 && c <= 0x39) || c === 0x2d) {
      item();
      let end = i + 1;
      while (end < text.length && isNumberChar(text.charCodeAt(end))) end++;
      if (lookForNumbers && result.inexact === null) {
        const number = text.slice(i, end);
        if (!isExactJsonNumber(number)) result.inexact = { path: pathOf(text, levels), text: number.length > 40 ? `${number.slice(0, 40)}…` : number };
      }
      i = end;
    } else if (c === 0x74 || c === 0x66 || c === 0x6e) {
      item();
      i++;
      while (i < text.length && text.charCodeAt(i) >= 0x61 && text.charCodeAt(i) <= 0x7a) i++;
    } else {
      i++;
    }
  }
  return result;
}

/** The first number in `text` (JSON) that JSON.parse would not keep exactly, or null. */
export function firstInexactNumber(text: string): InexactNumber | null {
  return scanJson(text).inexact;
}

type Done = (error: Error | null, body?: unknown) => void;
type StringParser = (request: FastifyRequest, body: string, done: Done) => void;

/**
 * fastify's JSON parser behind the scan, keeping __proto__ and constructor keys as the own data
 * properties JSON.parse makes of them ('ignore': no prototype-poisoning refusal, nothing
 * removed): a bound passed is refused before parsing, an inexact number after (a malformed body
 * keeps fastify's own answer). For addContentTypeParser('application/json', { parseAs: 'string' }, …).
 */
export function exactJsonParser(app: FastifyInstance, bounds?: JsonBounds): StringParser {
  const parse = app.getDefaultJsonParser('ignore', 'ignore') as unknown as StringParser;
  return (request, body, done) => {
    const scan = scanJson(body, bounds);
    if (scan.bound) return done(new RelayError('validation_error', `${scan.bound.path}: ${scan.bound.reason}`));
    // fastify's parser answers synchronously; the check runs outside its try/catch.
    let failure: Error | null = null;
    let value: unknown;
    parse(request, body, (error, parsed) => {
      failure = error;
      value = parsed;
    });
    if (failure) return done(failure);
    if (scan.inexact) {
      return done(new RelayError(
        'validation_error',
        `${scan.inexact.path}: the number ${scan.inexact.text} cannot be kept exactly (JSON numbers are read as doubles: finite, at most about 17 significant digits); send it as a string`,
      ));
    }
    done(null, value);
  };
}
