// VERP return paths: the envelope sender (MAIL FROM) of each SMTP transaction names the email
// and the one recipient it is for, so a bounce that comes back to it says whose delivery
// failed without parsing the bounce's body. Pure: the MAC is computed by the caller
// (SecretBox.mac / macVerify with purpose VERP_MAC_PURPOSE).
//
//   rr-<emailId>-<index>-<mac>@<mailFromDomain>
//
//   rr          marks a Relay return path, format 1 (another format would take another prefix)
//   emailId     the 15 bytes behind the id's 20 base64url chars ("em_" dropped), base32: 24 chars
//   index       the recipient's position in To, then CC, then BCC; decimal, no leading zeros
//   mac         the first 15 bytes (120 bits) of the MAC over "<emailId>\n<index>\n<mailFromDomain>",
//               base32: 24 chars
//
// Base32 is RFC 4648's alphabet written in lower case (a-z, 2-7): some MTAs lower-case
// local parts, and base32 loses nothing when they do. Parsing lower-cases first, so any case
// is accepted. The alphabet has no "-", so the three dashes split the parts unambiguously,
// and there are no dots at all. Length: 3 + 24 + 1 + (1..3) + 1 + 24 ≤ 56 of the 64 allowed.
//
// The MAC covers the mailFromDomain so that a return path is only good at the domain it was
// issued for: a report arriving at another customer's bounce domain does not verify.

export const VERP_PREFIX = 'rr';
export const VERP_MAC_PURPOSE = 'verp-return-path';
export const VERP_MAC_BYTES = 15;
/** Recipient indexes are below this (50 recipients at most today; 3 digits keep ≤ 64 chars). */
export const VERP_MAX_INDEX = 999;

const EMAIL_ID = /^em_([A-Za-z0-9_-]{20})$/;
const EMAIL_ID_BYTES = 15;
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';
const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const LOCAL_PART = /^rr-([a-z2-7]{24})-(0|[1-9][0-9]{0,2})-([a-z2-7]{24})$/;

export interface VerpTarget {
  emailId: string;
  recipientIndex: number;
  /** `bounce.<sending domain>` (domain/sending-domain.ts: mailFromSubdomain). */
  mailFromDomain: string;
}

export type VerpMac = (data: string) => Uint8Array;
/** True when `mac` (truncated to VERP_MAC_BYTES) was made over `data` with a key Relay holds. */
export type VerpMacVerify = (data: string, mac: Uint8Array) => boolean;

export type VerpParseResult =
  | { emailId: string; recipientIndex: number }
  | { error: 'malformed' | 'bad_mac' };

/**
 * Radix conversion between 8-bit bytes and 5- or 6-bit symbols. Every length used here is a
 * whole number of both (120 bits), so there are never leftover bits to pad or check.
 */
function regroup(input: ArrayLike<number>, fromBits: number, toBits: number): number[] {
  const out: number[] = [];
  let buffer = 0;
  let held = 0;
  for (let i = 0; i < input.length; i++) {
    buffer = (buffer << fromBits) | input[i];
    held += fromBits;
    while (held >= toBits) {
      held -= toBits;
      out.push((buffer >> held) & ((1 << toBits) - 1));
    }
    buffer &= (1 << held) - 1;
  }
  return out;
}

const encode = (bytes: ArrayLike<number>, fromBits: number, toBits: number, alphabet: string): string =>
  regroup(bytes, fromBits, toBits).map((v) => alphabet[v]).join('');

const decode = (text: string, alphabet: string, bits: number): number[] =>
  regroup([...text].map((c) => alphabet.indexOf(c)), bits, 8);

function macData(emailId: string, recipientIndex: number, mailFromDomain: string): string {
  return `${emailId}\n${recipientIndex}\n${mailFromDomain}`;
}

function canonicalDomain(domain: string): string {
  return domain.trim().toLowerCase().replace(/\.$/, '');
}

export function verpAddress(target: VerpTarget, mac: VerpMac): string {
  const id = EMAIL_ID.exec(target.emailId);
  if (!id) throw new Error(`not an email id: ${JSON.stringify(target.emailId)}`);
  const index = target.recipientIndex;
  if (!Number.isInteger(index) || index < 0 || index > VERP_MAX_INDEX) throw new RangeError(`recipient index out of range: ${index}`);
  const domain = canonicalDomain(target.mailFromDomain);
  if (!/^[a-z0-9.-]+\.[a-z0-9-]+$/.test(domain)) throw new Error(`not a mail-from domain: ${JSON.stringify(target.mailFromDomain)}`);
  const tag = mac(macData(target.emailId, index, domain));
  if (tag.length < VERP_MAC_BYTES) throw new Error(`the VERP MAC needs at least ${VERP_MAC_BYTES} bytes, got ${tag.length}`);
  const idBytes = decode(id[1], BASE64URL, 6);
  const local = `${VERP_PREFIX}-${encode(idBytes, 8, 5, BASE32)}-${index}-${encode(tag.subarray(0, VERP_MAC_BYTES), 8, 5, BASE32)}`;
  return `${local}@${domain}`;
}

/**
 * Reads a return path back. `bad_mac` means well formed but not issued by Relay for this
 * domain (forged, altered, or made with a key no longer held); `malformed` means it is not a
 * Relay return path at all.
 */
export function parseVerpAddress(address: string, verify: VerpMacVerify): VerpParseResult {
  if (typeof address !== 'string') return { error: 'malformed' };
  const text = address.trim().replace(/^<(.*)>$/, '$1').toLowerCase();
  const at = text.lastIndexOf('@');
  if (at <= 0) return { error: 'malformed' };
  const parts = LOCAL_PART.exec(text.slice(0, at));
  const domain = canonicalDomain(text.slice(at + 1));
  if (!parts || domain.length === 0) return { error: 'malformed' };
  const [, id32, indexText, mac32] = parts;
  const idBytes = decode(id32, BASE32, 5);
  if (idBytes.length !== EMAIL_ID_BYTES) return { error: 'malformed' };
  const emailId = `em_${encode(idBytes, 8, 6, BASE64URL)}`;
  const recipientIndex = Number(indexText);
  const mac = Uint8Array.from(decode(mac32, BASE32, 5));
  if (!verify(macData(emailId, recipientIndex, domain), mac)) return { error: 'bad_mac' };
  return { emailId, recipientIndex };
}
