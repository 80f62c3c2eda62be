// DKIM signing keys for a sending domain. The private half stays with Relay (PKCS#8 PEM, what
// node:crypto and nodemailer's dkim option take); the public half goes into DNS as the p= tag,
// which RFC 6376 3.6.1 defines as base64 of the DER SubjectPublicKeyInfo.
import { generateKeyPair, randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

const generateKeyPairAsync = promisify(generateKeyPair);

export interface DkimKeyPair {
  selector: string;
  privateKeyPem: string;
  publicKeyBase64: string;
}

export interface DkimKeyOptions {
  /** RSA modulus in bits. Default 2048: RFC 8301 requires at least 1024 and 2048 is what receivers expect. */
  modulusLength?: number;
  /** Date stamped into the selector. Default now. */
  now?: Date;
}

/**
 * "rr" + UTC date + 6 random base-32 characters, e.g. rr20250301k3q9xm: the date tells
 * operators which key is older when rotating, the random tail keeps two keys made the same
 * day apart. Lowercase letters and digits only, so it is a valid DNS label everywhere.
 */
export function newDkimSelector(now: Date = new Date()): string {
  const date = now.toISOString().slice(0, 10).replaceAll('-', '');
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  const tail = [...randomBytes(6)].map((b) => alphabet[b % 32]).join('');
  return `rr${date}${tail}`;
}

export async function generateDkimKeyPair(options: DkimKeyOptions = {}): Promise<DkimKeyPair> {
  const modulusLength = options.modulusLength ?? 2048;
  if (!Number.isInteger(modulusLength) || modulusLength < 1024) throw new RangeError('DKIM RSA keys must be at least 1024 bits (RFC 8301)');
  // Async generation: a 2048-bit key takes long enough to stall a busy event loop.
  const { publicKey, privateKey } = await generateKeyPairAsync('rsa', {
    modulusLength,
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { selector: newDkimSelector(options.now), privateKeyPem: privateKey, publicKeyBase64: publicKey.toString('base64') };
}
