// The `outbox` transport: instead of sending, writes each message to a directory, for
// development and for inspecting exactly what would have gone out.
//
//   <dir>/<emailId>.eml            the raw bytes exactly as they would go on the wire
//   <dir>/<emailId>.envelope.json  [{ mailFrom, recipients }, …] every transaction of that email
//
// An email sent as several transactions (one per VERP return path) is one .eml and one
// envelope entry per transaction. Files are 0600 in a 0700 directory (messages hold personal
// data) and are replaced atomically (temp file + rename), so a reader never sees half a file.
import { randomBytes } from 'node:crypto';
import { close, fdatasync, link, open as openFd, unlink, write } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, chmod } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { MailTransport, OutgoingMessage, TransportOutcome } from '../ports/mail-transport.ts';

const EMAIL_ID = /^[A-Za-z0-9_-]{1,64}$/;

export interface OutboxEnvelope {
  mailFrom: string;
  recipients: string[];
}

export interface OutboxEntry {
  emailId: string;
  /** Size of the .eml file in bytes. */
  size: number;
  modifiedAt: Date;
}

function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT';
}

// The callback API, not FileHandles: a send writes two files, and on the FileHandle API (with
// a read that failed with ENOENT first) each cost the event loop about 0.3 ms, more than an
// admission, in `npm start`'s default pipeline.
const openFile = promisify(openFd);
const closeFile = promisify(close);
const syncFile = promisify(fdatasync);
const linkFile = promisify(link);
const unlinkFile = promisify(unlink);
const writeFile = promisify(write);

/**
 * A complete, synced copy of `data` under a temporary name in `dir`, 0600: the mode open
 * gives it, as a umask can only take bits away (one that took the owner's would leave the
 * embedded databases unreadable too).
 */
async function writeTemp(dir: string, name: string, data: Buffer): Promise<string> {
  const temp = join(dir, `.${name}.${randomBytes(6).toString('hex')}.tmp`);
  const fd = await openFile(temp, 'wx', 0o600);
  try {
    for (let done = 0; done < data.length;) done += (await writeFile(fd, data.subarray(done))).bytesWritten;
    await syncFile(fd);
  } catch (error) {
    await closeFile(fd).catch(() => {});
    await rm(temp, { force: true });
    throw error;
  }
  await closeFile(fd);
  return temp;
}

/**
 * Creates `name` with `data` unless it exists (false then). A reader never sees half a file:
 * the name appears, complete and synced, by a hard link, which unlike a rename fails when the
 * name is taken, so a first write needs no read to find out.
 */
async function createAtomically(dir: string, name: string, data: Buffer): Promise<boolean> {
  const temp = await writeTemp(dir, name, data);
  try {
    await linkFile(temp, join(dir, name));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await unlinkFile(temp).catch(() => {});
  }
}

/** Replaces `name` with `data` atomically (temp file + rename). */
async function replaceAtomically(dir: string, name: string, data: Buffer): Promise<void> {
  const temp = await writeTemp(dir, name, data);
  try {
    await rename(temp, join(dir, name));
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}

async function readEnvelopes(path: string): Promise<OutboxEnvelope[]> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as OutboxEnvelope[];
  } catch (error) {
    if (isMissing(error)) return [];
    throw error;
  }
}

const envelopeFile = (envelopes: OutboxEnvelope[]) => Buffer.from(`${JSON.stringify(envelopes, null, 2)}\n`);

function sameTransaction(a: OutboxEnvelope, b: OutboxEnvelope): boolean {
  return a.mailFrom === b.mailFrom && a.recipients.length === b.recipients.length && a.recipients.every((r, i) => r === b.recipients[i]);
}

export class OutboxTransport implements MailTransport {
  readonly name = 'outbox';
  readonly dir: string;
  /** Per email id: envelope updates are read-modify-write, so one at a time within this process. */
  readonly #pending = new Map<string, Promise<unknown>>();
  #ready: Promise<void> | undefined;

  constructor(dir: string) {
    this.dir = dir;
  }

  async send(message: OutgoingMessage): Promise<TransportOutcome> {
    if (!EMAIL_ID.test(message.emailId)) throw new Error(`outbox: invalid email id ${JSON.stringify(message.emailId)}`);
    const previous = this.#pending.get(message.emailId) ?? Promise.resolve();
    const work = previous.catch(() => undefined).then(() => this.#write(message));
    this.#pending.set(message.emailId, work);
    try {
      await work;
    } finally {
      if (this.#pending.get(message.emailId) === work) this.#pending.delete(message.emailId);
    }
    const response = `written to ${join(this.dir, `${message.emailId}.eml`)}`;
    return {
      providerMessageId: message.messageId,
      recipients: [...new Set(message.envelope.recipients)].map((address) => ({ address, result: 'accepted' as const, smtpCode: null, enhancedCode: null, response })),
    };
  }

  async #write(message: OutgoingMessage): Promise<void> {
    // 0700 whatever the umask, and also when an older version made the directory 0755.
    this.#ready ??= mkdir(this.dir, { recursive: true, mode: 0o700 }).then(async () => {
      if (((await stat(this.dir)).mode & 0o077) === 0) return;
      await chmod(this.dir, 0o700).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'EPERM') throw error; // not ours: left as the operator made it
      });
    });
    try {
      await this.#ready;
    } catch (error) {
      this.#ready = undefined;
      throw error;
    }
    const emlName = `${message.emailId}.eml`;
    const envelopeName = `${message.emailId}.envelope.json`;
    const transaction: OutboxEnvelope = { mailFrom: message.envelope.mailFrom, recipients: [...message.envelope.recipients] };
    // The usual send is the email's first: both files are created, nothing is read.
    if (await createAtomically(this.dir, emlName, message.raw)) {
      if (await createAtomically(this.dir, envelopeName, envelopeFile([transaction]))) return;
    } else {
      // A redelivery, or another transaction of the same email (one per VERP return path).
      const existing = await readFile(join(this.dir, emlName));
      if (!existing.equals(message.raw)) await replaceAtomically(this.dir, emlName, message.raw);
    }
    const envelopes = await readEnvelopes(join(this.dir, envelopeName));
    // A redelivered send (at-least-once processors) must not list the transaction twice.
    if (envelopes.some((e) => sameTransaction(e, transaction))) return;
    envelopes.push(transaction);
    await replaceAtomically(this.dir, envelopeName, envelopeFile(envelopes));
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.#pending.values()]);
  }
}

/** The messages in the outbox, newest first. A missing directory is an empty outbox. */
export async function listOutbox(dir: string): Promise<OutboxEntry[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if (isMissing(error)) return [];
    throw error;
  }
  const entries: OutboxEntry[] = [];
  for (const name of names) {
    if (!name.endsWith('.eml')) continue;
    const emailId = name.slice(0, -'.eml'.length);
    if (!EMAIL_ID.test(emailId)) continue;
    try {
      const info = await stat(join(dir, name));
      if (info.isFile()) entries.push({ emailId, size: info.size, modifiedAt: info.mtime });
    } catch (error) {
      if (!isMissing(error)) throw error; // removed while listing
    }
  }
  return entries.sort((a, b) => b.modifiedAt.getTime() - a.modifiedAt.getTime() || a.emailId.localeCompare(b.emailId));
}

/** One message and its transactions; null when there is none or the id is not a valid email id. */
export async function readOutbox(dir: string, emailId: string): Promise<{ raw: Buffer; envelopes: OutboxEnvelope[] } | null> {
  // The id becomes a file name: anything outside the id alphabet could leave the directory.
  if (!EMAIL_ID.test(emailId)) return null;
  let raw: Buffer;
  try {
    raw = await readFile(join(dir, `${emailId}.eml`));
  } catch (error) {
    if (isMissing(error)) return null;
    throw error;
  }
  return { raw, envelopes: await readEnvelopes(join(dir, `${emailId}.envelope.json`)) };
}
