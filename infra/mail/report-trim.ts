// A report cut, while it arrives, to what the report parser (report-parser.ts) reads of it: every
// MIME header, every delimiter line, and the first MAX_PART_BYTES of each part's body, at most
// MAX_KEPT_BYTES of bodies in all. A large report is almost always a bounce carrying the whole
// returned message and its attachments, of which the parser reads only the first
// MAX_PART_BYTES (its headers); parsing the kept bytes gives the same report, costs a fraction of
// the memory and CPU, and an open DATA transfer holds the kept bytes only.
//
// The MIME structure is @zone-eu/mailsplit's (streaming, line-based, bounded per node); a returned
// message (message/rfc822) is one leaf, as the parser reads it. Bodies are cut at a line end, so
// a base64 or quoted-printable part stays decodable. Input the splitter refuses (a header block
// over MAX_HEADER_BYTES, more than MAX_NODES parts) ends what is kept: the parser would read such
// a report as garbage anyway.
import { createHash } from 'node:crypto';
import type { Readable, Transform } from 'node:stream';
import { finished } from 'node:stream/promises';
import { Splitter } from '@zone-eu/mailsplit';
import { MAX_MIME_HEADER_BYTES, MAX_PART_BYTES } from './report-parser.ts';

/** Bodies (and preambles, epilogues) kept in all; headers and delimiter lines come on top. */
export const MAX_KEPT_BYTES = 1024 * 1024;
const MAX_HEADER_BYTES = MAX_MIME_HEADER_BYTES + 1;
const MAX_NODES = 1000;

export interface TrimmedReport {
  /** What the parser reads; null when `keep` refused to hold more. */
  bytes: Buffer | null;
  /** Bytes received in all. */
  size: number;
  /** SHA-256 of every byte received up to maxBytes (a report's identity when it has no Message-ID). */
  sha256: string;
}

export interface TrimOptions {
  /** Past this many bytes the rest is only counted (the report is refused for its size anyway). */
  maxBytes?: number;
  /**
   * Asked before `bytes` more are kept; false stops keeping (the rest is still read, hashed and
   * counted). What was granted is the caller's to give back once it lets go of the result.
   */
  keep?: (bytes: number) => boolean;
}

const CRLF = Buffer.from('\r\n');
/** A boundary is at most 70 characters; RFC 2046 allows whitespace after it on the line. */
const MAX_DELIMITER_LINE = 1100;

/** Reads `source` to its end and returns the part of it the report parser reads. */
export async function trimReport(source: Readable, options: TrimOptions = {}): Promise<TrimmedReport> {
  const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
  const hash = createHash('sha256');
  const kept = new KeptParts(options.keep ?? (() => true));
  // Typed as the Transform it is: its declarations list only its "data" event.
  const splitter = new Splitter({ ignoreEmbedded: true, maxHeadSize: MAX_HEADER_BYTES, maxChildNodes: MAX_NODES }) as unknown as Transform;
  splitter.on('data', (item: SplitterItem) => kept.add(item));
  // Input the splitter refuses (EMAXLEN) ends the splitting, not the reading: the rest is still
  // hashed and counted, and what was kept before stays.
  let refused = false;
  splitter.on('error', () => (refused = true));
  let size = 0;
  for await (const chunk of source as AsyncIterable<Buffer>) {
    const room = maxBytes - size;
    size += chunk.length;
    if (room <= 0) continue;
    const piece = chunk.length > room ? chunk.subarray(0, room) : chunk;
    hash.update(piece);
    if (!refused && !splitter.write(piece)) await drained(splitter);
  }
  if (!refused) {
    splitter.end();
    await finished(splitter).catch(() => {});
  }
  return { bytes: kept.result(), size, sha256: hash.digest('hex') };
}

/** Resolves once `stream` wants more, or has failed. */
function drained(stream: Transform): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      stream.off('drain', done);
      stream.off('error', done);
      resolve();
    };
    stream.on('drain', done);
    stream.on('error', done);
  });
}

type SplitterItem =
  | { type: 'node'; getHeaders(): Buffer }
  | { type: 'data' | 'body'; value: Buffer }
  | { type: 'none' };

class KeptParts {
  readonly #keep: (bytes: number) => boolean;
  readonly #chunks: Buffer[] = [];
  #bodies = 0;
  /** Body or preamble/epilogue bytes kept since the last part began. */
  #inPart = 0;
  #refused = false;

  constructor(keep: (bytes: number) => boolean) {
    this.#keep = keep;
  }

  add(item: SplitterItem): void {
    if (this.#refused) return;
    if (item.type === 'node') {
      this.#inPart = 0;
      this.#push(item.getHeaders());
    } else if (item.type === 'body') {
      this.#pushBody(item.value);
    } else if (item.type === 'data') {
      // Delimiters, preambles and epilogues. Past the allowance only the delimiter lines stay:
      // without them the parts after would run together.
      if (this.#allowance() >= item.value.length) this.#pushBody(item.value);
      else for (const line of delimiterLines(item.value)) this.#push(line);
    }
  }

  result(): Buffer | null {
    return this.#refused ? null : Buffer.concat(this.#chunks);
  }

  #allowance(): number {
    return Math.max(0, Math.min(MAX_PART_BYTES - this.#inPart, MAX_KEPT_BYTES - this.#bodies));
  }

  #pushBody(value: Buffer): void {
    const allowance = this.#allowance();
    if (allowance === 0) return;
    let piece = value;
    if (value.length > allowance) {
      // Cut after the last line end that fits: encoded bodies stay whole lines.
      const end = value.lastIndexOf(0x0a, allowance - 1);
      piece = value.subarray(0, end + 1);
    }
    if (piece.length === 0) return;
    this.#inPart += piece.length;
    this.#bodies += piece.length;
    this.#push(piece);
  }

  #push(bytes: Buffer): void {
    if (bytes.length === 0 || this.#refused) return;
    if (!this.#keep(bytes.length)) {
      this.#refused = true;
      this.#chunks.length = 0;
      return;
    }
    this.#chunks.push(bytes);
  }
}

/** The lines of `data` that may be MIME delimiters ("--…"), each between line ends. */
function delimiterLines(data: Buffer): Buffer[] {
  const lines: Buffer[] = [];
  let start = data[0] === 0x2d && data[1] === 0x2d ? 0 : nextDelimiter(data, 0);
  while (start >= 0) {
    let end = data.indexOf(0x0a, start);
    if (end < 0) end = data.length;
    const line = data.subarray(start, data[end - 1] === 0x0d ? end - 1 : end);
    lines.push(Buffer.concat([CRLF, line.subarray(0, MAX_DELIMITER_LINE), CRLF]));
    start = nextDelimiter(data, end);
  }
  return lines;
}

function nextDelimiter(data: Buffer, from: number): number {
  const at = data.indexOf('\n--', from);
  return at < 0 ? -1 : at + 1;
}
