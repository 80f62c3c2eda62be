// Relay's server secret and what is derived from it: sealed values (secrets at rest, such as
// DKIM private keys and webhook signing secrets) and MACs (VERP return paths, tokens).
//
// One 32-byte master key. Every use gets its own subkey by HKDF-SHA256 with the use's
// purpose in `info`, so a value sealed or MAC'd for one purpose is worthless for any other,
// and the master key itself never touches a cipher.
//
// Sealed form: `v1.<keyId>.<iv>.<ciphertext>.<tag>`, each part base64url. keyId is a short
// HMAC fingerprint of the master key (it reveals nothing about the key) naming the key that
// sealed the value, so opening needs no trial decryption.
//
// Where the master key comes from: RELAY_SECRET_KEY (32 bytes as base64 or 64 hex chars), or,
// when unset, `<dataDir>/secret.key`, created with 32 random bytes at first start. The key file
// suits one host; processes on several hosts must all be given the same RELAY_SECRET_KEY
// (copy the key file's content into it when moving from embedded to distributed).
// A key file is made only while the stores hold nothing sealed: a new key would open none of
// what is stored, and everything sealed from then on would be lost to the real key once it is
// put back. With RELAY_SECRET_KEY set, a key file holding another key is kept as a previous key:
// what it sealed still opens, and is re-sealed under RELAY_SECRET_KEY.
//
// Rotation: set RELAY_SECRET_KEY to the new key and RELAY_SECRET_KEY_PREVIOUS to the old one
// (comma separated when there are several). New values are sealed and MAC'd with the new key;
// values sealed with the old key stay readable, and MACs made with the old key (VERP
// addresses of messages still in flight, whose bounces can arrive days later) are still
// accepted by `macVerify`. Re-seal stored values before dropping the old key from the list.
import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type { KeyObject } from 'node:crypto';
import { chmod, link, mkdir, open, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { pooledRandomBytes } from './random-pool.ts';

export const KEY_BYTES = 32;
export const KEY_FILE_NAME = 'secret.key';
/** MACs may be truncated (to fit an address, say) but never below 80 bits. */
export const MIN_MAC_BYTES = 10;

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID_BYTES = 6;
const B64URL = '[A-Za-z0-9_-]';
const SEALED = new RegExp(`^${VERSION}\\.(${B64URL}{8})\\.(${B64URL}{16})\\.(${B64URL}*)\\.(${B64URL}{22})$`);

export interface SecretKeys {
  current: Buffer;
  previous: Buffer[];
  /** Where the current key came from, for the startup log. */
  source: 'env' | 'file';
  /** The key file, when source is 'file'. */
  keyFile: string | null;
  /**
   * With RELAY_SECRET_KEY set: the key file when it holds another key, not in
   * RELAY_SECRET_KEY_PREVIOUS either, and so added to `previous` (ids only, to be logged).
   */
  fileKeyKept: { path: string; keyId: string } | null;
}

export interface SecretKeyOptions {
  /** RELAY_SECRET_KEY. */
  secretKey?: string;
  /** RELAY_SECRET_KEY_PREVIOUS, already split at commas (see splitKeyList). */
  previousKeys?: string[];
  /** Where the key file lives (and, with secretKey set, may hold an earlier key); null when there is no local data. */
  dataDir: string | null;
  /**
   * Asked before a key file is made: what the stores hold that a secret key sealed, in words
   * for the error, or null when nothing. Without it a missing key file is always made.
   */
  sealedValuesStored?: () => Promise<string | null>;
}

export class SecretBoxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SecretBoxError';
  }
}

/** No RELAY_SECRET_KEY, no key file, and the stores hold values sealed under some key. */
export class KeyFileMissingError extends Error {
  readonly path: string;
  constructor(path: string, stored: string) {
    super(`${path} is missing while the stores hold values a secret key sealed (${stored}): a new key would open none of them, so none is made; `
      + 'put the key file back (from a backup of this data directory), or set RELAY_SECRET_KEY to the key that sealed them (the content of that file)');
    this.name = 'KeyFileMissingError';
    this.path = path;
  }
}

/** RELAY_SECRET_KEY_PREVIOUS as a list: comma separated, blanks ignored. */
export function splitKeyList(value: string | undefined): string[] {
  return (value ?? '').split(',').map((k) => k.trim()).filter((k) => k.length > 0);
}

/** 32 bytes as 64 hex chars, or base64 / base64url with or without padding. */
export function parseKey(value: string, name = 'RELAY_SECRET_KEY'): Buffer {
  const text = value.trim();
  let key: Buffer | null = null;
  if (/^[0-9a-fA-F]{64}$/.test(text)) key = Buffer.from(text, 'hex');
  else if (/^[A-Za-z0-9+/]{43}=?$/.test(text) || /^[A-Za-z0-9_-]{43}$/.test(text)) key = Buffer.from(text, 'base64');
  // Never echo the value: it is (or was meant to be) a secret.
  if (key === null || key.length !== KEY_BYTES) {
    throw new Error(`${name} must be ${KEY_BYTES} random bytes written as base64 (44 chars) or hex (64 chars); generate one with: openssl rand -base64 32`);
  }
  return key;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function readKeyFile(path: string): Promise<Buffer> {
  // The winner of a creation race writes right after creating the file, so a loser may
  // briefly see it empty; a file that stays unreadable is damaged.
  let lastError: unknown;
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      return parseKey(await readFile(path, 'utf8'), `The key file ${path}`);
    } catch (error) {
      lastError = error;
      await sleep(20);
    }
  }
  throw lastError;
}

/** A key file readable by others (copied in by hand, say) is made 0600; one not ours stays as it is. */
async function keepPrivate(path: string): Promise<void> {
  try {
    if (((await stat(path)).mode & 0o077) !== 0) await chmod(path, 0o600);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'EPERM') throw error;
  }
}

async function keyFromFile(dataDir: string, sealedValuesStored: SecretKeyOptions['sealedValuesStored']): Promise<{ key: Buffer; path: string }> {
  const path = join(dataDir, KEY_FILE_NAME);
  if (sealedValuesStored && !(await exists(path))) {
    const stored = await sealedValuesStored();
    if (stored !== null) throw new KeyFileMissingError(path, stored);
  }
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const fresh = randomBytes(KEY_BYTES);
  // Written whole under a name of its own, then linked in: the key file never exists without its
  // key (a start killed half-way would leave an empty one, which every later start refuses), and
  // link fails when the file exists, so of two processes starting at once exactly one makes the
  // key and the other reads that one.
  const temp = join(dataDir, `.${KEY_FILE_NAME}.${randomBytes(6).toString('hex')}.tmp`);
  await writeExclusive(temp, fresh);
  try {
    const linked = await linkIn(temp, path).finally(() => unlink(temp));
    if (!linked) await writeExclusive(path, fresh);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    await keepPrivate(path);
    return { key: await readKeyFile(path), path };
  }
  await syncDirectory(dataDir);
  return { key: fresh, path };
}

/** Filesystems without hard links (some shared folders and FUSE mounts) answer link() so. */
const NO_HARD_LINKS = new Set(['EPERM', 'ENOTSUP', 'EOPNOTSUPP', 'ENOSYS', 'EXDEV']);

/** Links `temp` in as `path`; false where the filesystem has no hard links. Throws EEXIST when `path` exists. */
async function linkIn(temp: string, path: string): Promise<boolean> {
  try {
    await link(temp, path);
    return true;
  } catch (error) {
    if (NO_HARD_LINKS.has((error as NodeJS.ErrnoException).code ?? '')) return false;
    throw error;
  }
}

/**
 * Creates the file exclusively ('wx': of two processes exactly one makes it) and writes the key
 * into it. As the key file itself (where there are no hard links) it is empty while the write
 * takes, which a kill then leaves behind.
 */
async function writeExclusive(path: string, key: Buffer): Promise<void> {
  const handle = await open(path, 'wx', 0o600);
  try {
    await handle.writeFile(`${key.toString('base64')}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Makes a new name in `dir` durable (the file's own sync does not cover its directory entry). */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return false;
    throw error;
  }
}

/**
 * The key file's key, or null when there is none; a file there that holds no key is an error.
 * Read once: nothing creates the file while RELAY_SECRET_KEY is set, so there is no race to wait out.
 */
async function existingKeyFile(dataDir: string): Promise<{ key: Buffer; path: string } | null> {
  const path = join(dataDir, KEY_FILE_NAME);
  return (await exists(path)) ? { key: parseKey(await readFile(path, 'utf8'), `The key file ${path}`), path } : null;
}

/** A key's id as it appears in the values it seals (a fingerprint, safe to log). */
export const keyIdOf = (key: Buffer): string => new MasterKey(key).id;

export async function loadSecretKeys(options: SecretKeyOptions): Promise<SecretKeys> {
  const previous = (options.previousKeys ?? []).flatMap(splitKeyList).map((k, i) => parseKey(k, `RELAY_SECRET_KEY_PREVIOUS (entry ${i + 1})`));
  if (options.secretKey !== undefined && options.secretKey.trim() !== '') {
    const current = parseKey(options.secretKey);
    // The key file beside the stores sealed whatever was stored before the variable was set. One
    // that holds no key is left alone: the variable is the key, and a stray file must not stop it.
    const file = options.dataDir === null ? null : await existingKeyFile(options.dataDir).catch(() => null);
    if (file === null || [current, ...previous].some((key) => key.equals(file.key))) {
      return { current, previous, source: 'env', keyFile: null, fileKeyKept: null };
    }
    return { current, previous: [...previous, file.key], source: 'env', keyFile: null, fileKeyKept: { path: file.path, keyId: keyIdOf(file.key) } };
  }
  if (options.dataDir === null) {
    throw new Error('RELAY_SECRET_KEY is required: without a local data directory there is nowhere to keep a generated key (32 random bytes as base64: openssl rand -base64 32)');
  }
  const { key, path } = await keyFromFile(options.dataDir, options.sealedValuesStored);
  return { current: key, previous, source: 'file', keyFile: path, fileKeyKept: null };
}

const b64u = (data: Buffer): string => data.toString('base64url');

class MasterKey {
  readonly id: string;
  readonly #key: Buffer;
  readonly #subkeys = new Map<string, KeyObject>();

  constructor(key: Buffer) {
    if (key.length !== KEY_BYTES) throw new Error(`a master key must be ${KEY_BYTES} bytes`);
    this.#key = Buffer.from(key);
    this.id = b64u(createHmac('sha256', this.#key).update('relay key id').digest().subarray(0, KEY_ID_BYTES));
  }

  /** Subkeys are cached: HKDF per call would cost more than the cipher on small values. */
  subkey(use: 'seal' | 'mac', purpose: string): KeyObject {
    const info = `relay/${use}/${purpose}`;
    let key = this.#subkeys.get(info);
    if (!key) {
      // createSecretKey: a Buffer key makes createCipheriv/createHmac import it on every call.
      key = createSecretKey(Buffer.from(hkdfSync('sha256', this.#key, Buffer.alloc(0), info, KEY_BYTES)));
      this.#subkeys.set(info, key);
    }
    return key;
  }

  mac(purpose: string, data: string | Buffer): Buffer {
    return createHmac('sha256', this.subkey('mac', purpose)).update(data).digest();
  }
}

function checkPurpose(purpose: string): void {
  if (typeof purpose !== 'string' || purpose.length === 0) throw new TypeError('purpose must be a non-empty string');
}

/** The id of the key that sealed `value` (a value of SecretBox.seal), or null for anything else. */
export function sealedKeyIdOf(value: unknown): string | null {
  return typeof value === 'string' ? SEALED.exec(value)?.[1] ?? null : null;
}

/** The purpose, then the context after a NUL when there is one (without one, the purpose alone). */
function associatedData(purpose: string, context: string | undefined): Buffer {
  return Buffer.from(context === undefined ? purpose : `${purpose}\u0000${context}`, 'utf8');
}

export class SecretBox {
  readonly #current: MasterKey;
  /** Current first, then previous keys, by key id. */
  readonly #keys = new Map<string, MasterKey>();

  constructor(keys: Pick<SecretKeys, 'current' | 'previous'>) {
    this.#current = new MasterKey(keys.current);
    for (const key of [this.#current, ...keys.previous.map((k) => new MasterKey(k))]) {
      if (!this.#keys.has(key.id)) this.#keys.set(key.id, key);
    }
  }

  /** Fingerprint of the current key, as it appears in sealed values (safe to log). */
  get keyId(): string {
    return this.#current.id;
  }

  /**
   * `context` binds the value to what it belongs to (an email id, say): it opens only with the
   * same context. It is authenticated, not encrypted, and goes into the associated data rather
   * than the subkey, since a subkey per value would cost a derivation and a cached key each.
   */
  seal(plaintext: string, purpose: string, context?: string): string {
    checkPurpose(purpose);
    // Pooled: a value sealed per admission (its content key) paid a CSPRNG call each (3 % of its CPU).
    const iv = pooledRandomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#current.subkey('seal', purpose), iv);
    cipher.setAAD(associatedData(purpose, context));
    const data = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, this.#current.id, b64u(iv), b64u(data), b64u(cipher.getAuthTag())].join('.');
  }

  open(sealed: string, purpose: string, context?: string): string {
    checkPurpose(purpose);
    const parts = typeof sealed === 'string' ? SEALED.exec(sealed) : null;
    if (!parts) throw new SecretBoxError('not a sealed value (expected v1.<keyId>.<iv>.<data>.<tag>)');
    const [, keyId, iv, data, tag] = parts;
    // Decoders ignore the spare low bits of a final base64 char; insisting on the canonical
    // text makes every change to a sealed string detectable, not just most.
    if (![iv, data, tag].every((part) => b64u(Buffer.from(part, 'base64url')) === part)) {
      throw new SecretBoxError('sealed value is not canonically encoded: it was altered');
    }
    const key = this.#keys.get(keyId);
    if (!key) {
      throw new SecretBoxError(`sealed with key ${keyId}, which is neither RELAY_SECRET_KEY (${this.#current.id}) nor in RELAY_SECRET_KEY_PREVIOUS`);
    }
    try {
      const decipher = createDecipheriv('aes-256-gcm', key.subkey('seal', purpose), Buffer.from(iv, 'base64url'));
      decipher.setAAD(associatedData(purpose, context));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(data, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      const sealedFor = context === undefined ? `purpose "${purpose}"` : `purpose "${purpose}" and ${JSON.stringify(context)}`;
      throw new SecretBoxError(`sealed value does not authenticate for ${sealedFor}: it was altered, or sealed for another purpose${context === undefined ? '' : ' or value'}`);
    }
  }

  isSealed(value: unknown): value is string {
    return typeof value === 'string' && SEALED.test(value);
  }

  /** HMAC-SHA256 (32 bytes) with the current key's subkey for this purpose. */
  mac(purpose: string, data: string | Buffer): Buffer {
    checkPurpose(purpose);
    return this.#current.mac(purpose, data);
  }

  /**
   * True when `mac` was made for this purpose and data by the current or a previous key.
   * A truncated MAC (at least MIN_MAC_BYTES, its leading bytes) is compared as such.
   */
  macVerify(purpose: string, data: string | Buffer, mac: Uint8Array): boolean {
    checkPurpose(purpose);
    if (mac.length < MIN_MAC_BYTES || mac.length > 32) return false;
    let ok = false;
    // Every key is tried, so the time taken does not say which key (if any) matched.
    for (const key of this.#keys.values()) {
      if (timingSafeEqual(key.mac(purpose, data).subarray(0, mac.length), mac)) ok = true;
    }
    return ok;
  }
}
