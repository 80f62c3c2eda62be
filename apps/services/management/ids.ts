// Identifiers and secrets. Ids are lower-case base32 so they fit every id pattern of the API
// ([a-zA-Z0-9_-], at most 64) and read unambiguously; secrets are 32 random bytes.
import { createHash, randomBytes } from 'node:crypto';

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

function base32(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/** e.g. "ws_4k2…" (16 random bytes, 26 characters after the prefix). */
export const newId = (prefix: 'usr' | 'ws' | 'prj' | 'dom' | 'key' | 'whe'): string => `${prefix}_${base32(randomBytes(16))}`;

/** 32 random bytes, base64url: session tokens and API key secrets. */
export const newSecret = (): string => randomBytes(32).toString('base64url');

export const sha256Hex = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');
