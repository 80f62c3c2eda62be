// DKIM-Signature (RFC 6376): rsa-sha256, relaxed/relaxed, with over-signing (8.15): every
// header field named in OVERSIGNED is listed in h= once more than the message has it, so a
// copy added later (a second From above the signed one, which many clients show) breaks the
// signature instead of riding on it. nodemailer's signer lists each field once and only when
// present, so it cannot do this; this one is written for a message already in memory.
import { createHash, sign, type KeyObject } from 'node:crypto';

export interface DkimSignOptions {
  domainName: string;
  keySelector: string;
  privateKey: KeyObject | string;
  /** Field names to sign, in order; case does not matter. */
  headerFieldNames: string[];
  /** Of those, the ones listed once more than present (an absent one is listed once). */
  oversigned: string[];
}

interface HeaderField {
  /** Lowercased name. */
  key: string;
  /** The whole field as it is in the message, folding included, without the final CRLF. */
  line: string;
}

/** Header fields in order, and where the body starts (after the empty line). */
function splitMessage(raw: Buffer): { fields: HeaderField[]; body: Buffer } {
  const end = raw.indexOf('\r\n\r\n');
  const head = (end < 0 ? raw : raw.subarray(0, end)).toString('latin1');
  const body = end < 0 ? Buffer.alloc(0) : raw.subarray(end + 4);
  const fields: HeaderField[] = [];
  for (const line of head.split('\r\n')) {
    if (/^[ \t]/.test(line) && fields.length > 0) fields[fields.length - 1].line += `\r\n${line}`;
    else if (line.includes(':')) fields.push({ key: line.slice(0, line.indexOf(':')).trim().toLowerCase(), line });
  }
  return { fields, body };
}

/** RFC 6376 3.4.2. */
function relaxedHeader(line: string): string {
  const colon = line.indexOf(':');
  const name = line.slice(0, colon).trim().toLowerCase();
  const value = line.slice(colon + 1).replace(/\r\n/g, '').replace(/[ \t]+/g, ' ').trim();
  return `${name}:${value}`;
}

/**
 * RFC 6376 3.4.4: whitespace runs to one SP, none at line ends, no empty lines at the end.
 * Line by line, with linear patterns only: the body is the customer's.
 */
function relaxedBody(body: Buffer): Buffer {
  const lines = body.toString('latin1').split('\r\n').map((line) => {
    const collapsed = line.replace(/[ \t]+/g, ' ');
    return collapsed.endsWith(' ') ? collapsed.slice(0, -1) : collapsed;
  });
  let end = lines.length;
  while (end > 0 && lines[end - 1] === '') end--;
  return end === 0 ? Buffer.alloc(0) : Buffer.from(`${lines.slice(0, end).join('\r\n')}\r\n`, 'latin1');
}

/**
 * Folds a long tag list at the "; " boundaries, and inside h= after a ":" (FWS is allowed
 * there, RFC 6376 3.5), keeping lines near 78 characters: a signature of many signed fields
 * would otherwise carry one h= line past RFC 5322's 998. Only a single name longer than a line
 * makes a longer one.
 */
function fold(header: string): string {
  // Each piece with what joins it to the one before on a line: a space between tags, nothing
  // between the names of h=.
  const pieces: Array<{ glue: string; text: string }> = [];
  const tags = header.split('; ');
  for (const [i, tag] of tags.entries()) {
    const text = i < tags.length - 1 ? `${tag};` : tag;
    const names = tag.startsWith('h=') ? text.split(/(?<=:)/) : [text];
    for (const [j, name] of names.entries()) pieces.push({ glue: i === 0 || j > 0 ? '' : ' ', text: name });
  }
  let out = '';
  let lineLength = 0;
  for (const [i, { glue, text }] of pieces.entries()) {
    if (i > 0 && lineLength + glue.length + text.length > 76) {
      out += '\r\n ';
      lineLength = 1;
    } else {
      out += glue;
      lineLength += glue.length;
    }
    out += text;
    lineLength += text.length;
  }
  return out;
}

/** The message with a DKIM-Signature field put first. */
export function dkimSign(raw: Buffer, options: DkimSignOptions): Buffer {
  const { fields, body } = splitMessage(raw);
  const oversigned = new Set(options.oversigned.map((n) => n.toLowerCase()));
  const names: string[] = [];
  const signedLines: string[] = [];
  for (const wanted of new Set(options.headerFieldNames.map((n) => n.toLowerCase()))) {
    // Instances are taken from the bottom up (RFC 6376 5.4.2); a name listed once more than
    // the message has it stands for the absent next one and adds nothing to the hash.
    const present = fields.filter((f) => f.key === wanted).reverse();
    for (const field of present) {
      names.push(wanted);
      signedLines.push(relaxedHeader(field.line));
    }
    if (oversigned.has(wanted)) names.push(wanted);
  }
  const bodyHash = createHash('sha256').update(relaxedBody(body)).digest('base64');
  const tags = `DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=${options.domainName}; s=${options.keySelector}; h=${names.join(':')}; bh=${bodyHash}; b=`;
  const unsigned = fold(tags);
  const data = `${signedLines.map((l) => `${l}\r\n`).join('')}${relaxedHeader(unsigned)}`;
  const signature = sign('sha256', Buffer.from(data, 'latin1'), options.privateKey).toString('base64');
  // b= folded in pieces; whitespace inside b= is ignored by verifiers (RFC 6376 3.5).
  const folded = signature.match(/.{1,72}/g)!.join('\r\n ');
  return Buffer.concat([Buffer.from(`${unsigned}\r\n ${folded}\r\n`, 'latin1'), raw]);
}
