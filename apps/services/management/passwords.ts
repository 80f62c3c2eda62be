// Password hashing with scrypt (node:crypto), stored in the PHC string format
// "$scrypt$ln=15,r=8,p=1$<salt>$<hash>" so that the parameters travel with each hash and can
// be raised later without breaking old ones.
//
// Hashing runs on a thread of its own (infra/secrets/scrypt-thread.ts), never on libuv's thread
// pool, which the durable commit before every 202 shares.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { RelayError } from '../../../domain/errors.ts';
import { HashingBusyError, scryptOnThread } from '../../../infra/secrets/scrypt-thread.ts';
import { holdRefusal, REFUSAL_HOLD_MS } from './sign-in-throttle.ts';

/** 2^15 × 8 × 128 bytes = 32 MiB and roughly 50–100 ms per hash: OWASP's scrypt baseline. */
export const SCRYPT_PARAMS = { ln: 15, r: 8, p: 1 } as const;
const KEY_LENGTH = 32;
const SALT_LENGTH = 16;
/** Upper bounds accepted when verifying, so a tampered stored hash cannot ask for gigabytes. */
const MAX_LN = 20;
const MAX_R = 16;
const MAX_P = 4;

async function derive(password: string, salt: Buffer, ln: number, r: number, p: number, length: number): Promise<Buffer> {
  const N = 2 ** ln;
  try {
    return await scryptOnThread({ password: password.normalize('NFC'), salt, length, N, r, p, maxmem: 128 * N * r * p + 16 * 1024 * 1024 });
  } catch (error) {
    if (error instanceof HashingBusyError) {
      // Held like a throttled sign-in (sign-in-throttle.ts), so that refusals cannot be asked for in a tight loop.
      await holdRefusal(REFUSAL_HOLD_MS);
      throw new RelayError('service_unavailable', 'sign-in is busy: retry in 1 second', { retryAfterSeconds: 1 });
    }
    throw error;
  }
}

export async function hashPassword(password: string): Promise<string> {
  const { ln, r, p } = SCRYPT_PARAMS;
  const salt = randomBytes(SALT_LENGTH);
  const key = await derive(password, salt, ln, r, p, KEY_LENGTH);
  return `$scrypt$ln=${ln},r=${r},p=${p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

interface Parsed { ln: number; r: number; p: number; salt: Buffer; key: Buffer }

function parse(encoded: string): Parsed | null {
  const match = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9_-]+)\$([A-Za-z0-9_-]+)$/.exec(encoded);
  if (!match) return null;
  const [ln, r, p] = [Number(match[1]), Number(match[2]), Number(match[3])];
  if (ln < 1 || ln > MAX_LN || r < 1 || r > MAX_R || p < 1 || p > MAX_P) return null;
  const salt = Buffer.from(match[4], 'base64url');
  const key = Buffer.from(match[5], 'base64url');
  if (salt.length < 8 || key.length < 16) return null;
  return { ln, r, p, salt, key };
}

/** Compares in constant time; a malformed stored hash verifies nothing. */
export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  const parsed = parse(encoded);
  if (!parsed) return false;
  const key = await derive(password, parsed.salt, parsed.ln, parsed.r, parsed.p, parsed.key.length);
  return timingSafeEqual(key, parsed.key);
}

/** True when the hash was made with other parameters than today's: rehash at the next login. */
export function needsRehash(encoded: string): boolean {
  const parsed = parse(encoded);
  return !parsed || parsed.ln !== SCRYPT_PARAMS.ln || parsed.r !== SCRYPT_PARAMS.r || parsed.p !== SCRYPT_PARAMS.p || parsed.key.length !== KEY_LENGTH;
}

let decoy: Promise<string> | undefined;
/**
 * Spends the same work as a real check, for logins whose email matches no user, so the
 * response time does not tell which emails have accounts.
 */
export async function verifyAgainstDecoy(password: string): Promise<false> {
  // A hash refused while the hashing queue is full is not kept: every later unknown email would
  // be answered 503 at once, where a known one gets 401 after a real check.
  decoy ??= hashPassword(randomBytes(16).toString('hex')).catch((error: unknown) => {
    decoy = undefined;
    throw error;
  });
  await verifyPassword(password, await decoy);
  return false;
}
