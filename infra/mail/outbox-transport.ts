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
import { mkdir, open, readdir, readFile, rename, rm, stat, chmod } from 'node:fs/promises';
import { join } from 'node:path';
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

async function writeAtomically(dir: string, name: string, data: Buffer | string): Promise<void> {
  const temp = join(dir, `.${name}.${randomBytes(6).toString('hex')}.tmp`);
  const file = await open(temp, 'wx', 0o600);
  try {
    await file.chmod(0o600); // independent of the process umask
    await file.writeFile(data);
    await file.sync();
  } catch (error) {
    await file.close();
    await rm(temp, { force: true });
    throw error;
  }
  await file.close();
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
    let existing: Buffer | null = null;
    try {
      existing = await readFile(join(this.dir, emlName));
    } catch (error) {
      if (!isMissing(error)) throw error;
    }
    if (!existing || !existing.equals(message.raw)) await writeAtomically(this.dir, emlName, message.raw);

    const envelopeName = `${message.emailId}.envelope.json`;
    const envelopes = await readEnvelopes(join(this.dir, envelopeName));
    const transaction: OutboxEnvelope = { mailFrom: message.envelope.mailFrom, recipients: [...message.envelope.recipients] };
    // A redelivered send (at-least-once processors) must not list the transaction twice.
    if (envelopes.some((e) => sameTransaction(e, transaction))) return;
    envelopes.push(transaction);
    await writeAtomically(this.dir, envelopeName, `${JSON.stringify(envelopes, null, 2)}\n`);
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
