// A report cut, while it arrives, to what the report parser (report-parser.ts) reads of it: the
// header blocks, every line that may be a MIME delimiter, and the first MAX_PART_BYTES of each
// part's body, at most MAX_KEPT_BYTES of bodies in all. A large report is almost always a bounce
// carrying the whole returned message and its attachments, of which the parser reads only the
// first MAX_PART_BYTES (its headers); parsing the kept bytes gives the same report, costs a
// fraction of the memory and CPU, and an open DATA transfer holds only the kept bytes.
//
// It runs on the event loop as the bytes arrive, so it does not parse MIME: a delimiter can only
// be a line that starts with "--", which a native search finds, and every such line is kept,
// with the header block after it (a part's headers, if it was a delimiter). A "--" line that was
// no delimiter only keeps a few more lines and lets the part go on a while longer, so each real
// part still keeps at least its first MAX_PART_BYTES, cut at a line end (encoded bodies stay
// decodable). Header blocks over the parser's own limit (MAX_MIME_HEADER_BYTES, where it gives
// the report up as unreadable) end what is kept.
//
// (@zone-eu/mailsplit did the same with a full MIME split and agreed on every sample, but spent
// about 20 ms of event loop per 4 MiB report reading every line of the attachments in JS.)
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { MAX_MIME_HEADER_BYTES, MAX_PART_BYTES } from './report-parser.ts';

/** Bodies (and preambles, epilogues) kept in all; header blocks and "--" lines come on top. */
export const MAX_KEPT_BYTES = 1024 * 1024;
/** A boundary is at most 70 characters; RFC 2046 allows whitespace after it on the line. */
const MAX_DELIMITER_LINE = 1100;
/** "--" lines kept in all: a real report has a few dozen. */
const MAX_DELIMITER_LINES = 10_000;

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
  /** Milliseconds to wait after reading `bytes` before reading on (the caller's read rate). */
  pace?: (bytes: number) => number;
}

/** Reads `source` to its end and returns the part of it the report parser reads. */
export async function trimReport(source: Readable, options: TrimOptions = {}): Promise<TrimmedReport> {
  const maxBytes = options.maxBytes ?? Number.POSITIVE_INFINITY;
  const hash = createHash('sha256');
  const trimmer = new ReportTrimmer(options.keep ?? (() => true));
  let size = 0;
  for await (const chunk of source as AsyncIterable<Buffer>) {
    const wait = options.pace?.(chunk.length) ?? 0;
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const room = maxBytes - size;
    size += chunk.length;
    if (room <= 0) continue;
    const piece = chunk.length > room ? chunk.subarray(0, room) : chunk;
    hash.update(piece);
    trimmer.write(piece);
  }
  return { bytes: trimmer.end(), size, sha256: hash.digest('hex') };
}

const NEWLINE_DASHES = Buffer.from('\n--');

class ReportTrimmer {
  readonly #keep: (bytes: number) => boolean;
  readonly #kept: Buffer[] = [];
  /** In a header block (the message's, or one after a "--" line) rather than a body. */
  #inHeader = true;
  /** In a body, inside a line that began in an earlier chunk (so not at a line start). */
  #midLine = false;
  /** The start of a line whose end has not arrived: a header line, or a "--" line. */
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #partBytes = 0;
  #bodyBytes = 0;
  #headerBytes = 0;
  #delimiters = 0;
  /** Nothing more is kept: the header blocks went past the parser's limit. */
  #done = false;
  /** `keep` said no: nothing is kept. */
  #refused = false;

  constructor(keep: (bytes: number) => boolean) {
    this.#keep = keep;
  }

  write(chunk: Buffer): void {
    let at = 0;
    if (this.#pendingBytes > 0) at = this.#completePending(chunk);
    while (at < chunk.length && !this.#done && !this.#refused) {
      at = this.#inHeader ? this.#headerLine(chunk, at) : this.#body(chunk, at);
    }
  }

  end(): Buffer | null {
    if (this.#pendingBytes > 0 && !this.#done) {
      const line = Buffer.concat(this.#pending);
      this.#pending = [];
      this.#pendingBytes = 0;
      if (this.#inHeader) this.#header(line);
      else this.#delimiterOrBody(line);
    }
    return this.#refused ? null : Buffer.concat(this.#kept);
  }

  /** Adds `chunk`'s bytes up to the first line end to the pending line; returns where the rest starts. */
  #completePending(chunk: Buffer): number {
    const newline = chunk.indexOf(0x0a);
    const limit = this.#inHeader ? MAX_MIME_HEADER_BYTES : MAX_DELIMITER_LINE;
    if (newline < 0 && this.#pendingBytes + chunk.length <= limit) {
      this.#pending.push(chunk);
      this.#pendingBytes += chunk.length;
      return chunk.length;
    }
    const end = newline < 0 ? chunk.length : newline + 1;
    const line = Buffer.concat([...this.#pending, chunk.subarray(0, end)]);
    this.#pending = [];
    this.#pendingBytes = 0;
    if (newline < 0) {
      // Longer than any line that matters: a header block past the parser's limit, or a body line.
      if (this.#inHeader) this.#done = true;
      else {
        this.#bodyPiece(line);
        this.#midLine = true;
      }
      return end;
    }
    if (this.#inHeader) this.#header(line);
    else this.#delimiterOrBody(line);
    return end;
  }

  #headerLine(chunk: Buffer, at: number): number {
    return this.#wholeLine(chunk, at, (line) => this.#header(line));
  }

  /** Gives `take` the line from `at` to its end; holds it when its end is in a later chunk. */
  #wholeLine(chunk: Buffer, at: number, take: (line: Buffer) => void): number {
    const newline = chunk.indexOf(0x0a, at);
    if (newline < 0) {
      this.#hold(chunk.subarray(at));
      return chunk.length;
    }
    take(chunk.subarray(at, newline + 1));
    return newline + 1;
  }

  #header(line: Buffer): void {
    this.#headerBytes += line.length;
    if (this.#headerBytes > MAX_MIME_HEADER_BYTES + MAX_DELIMITER_LINE) {
      this.#done = true;
      return;
    }
    this.#push(line);
    if (isBlank(line)) {
      this.#inHeader = false;
      this.#partBytes = 0;
    }
  }

  /** Body bytes from `at`: whole lines up to the next line that starts with "--". */
  #body(chunk: Buffer, at: number): number {
    if (this.#midLine) {
      const newline = chunk.indexOf(0x0a, at);
      const end = newline < 0 ? chunk.length : newline + 1;
      this.#bodyPiece(chunk.subarray(at, end));
      this.#midLine = newline < 0;
      return end;
    }
    if (chunk.length - at < 2) {
      this.#hold(chunk.subarray(at));
      return chunk.length;
    }
    if (chunk[at] === 0x2d && chunk[at + 1] === 0x2d) return this.#wholeLine(chunk, at, (line) => this.#delimiterOrBody(line));
    const dashes = chunk.indexOf(NEWLINE_DASHES, at);
    if (dashes >= 0) {
      this.#bodyPiece(chunk.subarray(at, dashes + 1));
      return dashes + 1;
    }
    // No "--" line starts in the rest: whole lines go to the body, a last partial one too.
    const lastNewline = chunk.lastIndexOf(0x0a);
    if (lastNewline < at) {
      this.#bodyPiece(chunk.subarray(at));
      this.#midLine = true;
      return chunk.length;
    }
    this.#bodyPiece(chunk.subarray(at, lastNewline + 1));
    return lastNewline + 1;
  }

  /** A whole line starting with "--" (or longer than a delimiter can be). */
  #delimiterOrBody(line: Buffer): void {
    if (line.length > MAX_DELIMITER_LINE || !(line[0] === 0x2d && line[1] === 0x2d)) this.#bodyPiece(line);
    else this.#structure(line);
  }

  /** A "--" line: kept, and the lines after it read as a header block. */
  #structure(line: Buffer): void {
    if (++this.#delimiters > MAX_DELIMITER_LINES) {
      this.#bodyPiece(line);
      return;
    }
    this.#push(line);
    this.#inHeader = true;
  }

  /** Body bytes (whole lines, or the rest of one): kept within the part's and the report's allowance. */
  #bodyPiece(bytes: Buffer): void {
    const allowance = Math.max(0, Math.min(MAX_PART_BYTES - this.#partBytes, MAX_KEPT_BYTES - this.#bodyBytes));
    if (allowance === 0 || bytes.length === 0) return;
    let piece = bytes;
    if (bytes.length > allowance) {
      // Cut after the last line end that fits: encoded bodies stay whole lines.
      piece = bytes.subarray(0, bytes.lastIndexOf(0x0a, allowance - 1) + 1);
      // Nothing more of this part: a later line of it would follow a hole.
      this.#partBytes = MAX_PART_BYTES;
    } else {
      this.#partBytes += piece.length;
    }
    this.#bodyBytes += piece.length;
    this.#push(piece);
  }

  #hold(bytes: Buffer): void {
    // A copy: the chunk it comes from is not kept.
    this.#pending.push(Buffer.from(bytes));
    this.#pendingBytes += bytes.length;
  }

  #push(bytes: Buffer): void {
    if (bytes.length === 0 || this.#refused) return;
    if (!this.#keep(bytes.length)) {
      this.#refused = true;
      this.#kept.length = 0;
      return;
    }
    // A copy when it is a small slice of a large chunk, which must not stay alive for it.
    this.#kept.push(bytes.length * 4 < bytes.buffer.byteLength ? Buffer.from(bytes) : bytes);
  }
}

/** A line of nothing but line-end characters (the parser strips CR and LF). */
function isBlank(line: Buffer): boolean {
  for (const byte of line) if (byte !== 0x0d && byte !== 0x0a) return false;
  return true;
}
