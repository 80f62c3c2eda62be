// Writing one message into the outbox directory (infra/mail/outbox-transport.ts has the layout).
// Runs on the outbox thread (./outbox-worker.ts); the caller makes sure that one email's writes
// never overlap (envelope updates are read-modify-write).
import { randomBytes } from 'node:crypto';
import { close, fdatasync, link, open as openFd, unlink, write } from 'node:fs';
import { chmod, mkdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

export interface OutboxEnvelope {
  mailFrom: string;
  recipients: string[];
}

export function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT';
}

// The callback API, not FileHandles, which cost more per call (this runs on the outbox thread,
// where that matters less than it did on the event loop, but a send is still 12 calls).
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

export async function readEnvelopes(path: string): Promise<OutboxEnvelope[]> {
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

const prepared = new Map<string, Promise<void>>();

/** The directory, 0700 whatever the umask, and also when an older version made it 0755. */
function prepareDir(dir: string): Promise<void> {
  let ready = prepared.get(dir);
  if (!ready) {
    ready = mkdir(dir, { recursive: true, mode: 0o700 }).then(async () => {
      if (((await stat(dir)).mode & 0o077) === 0) return;
      await chmod(dir, 0o700).catch((error: NodeJS.ErrnoException) => {
        if (error.code !== 'EPERM') throw error; // not ours: left as the operator made it
      });
    });
    prepared.set(dir, ready);
    ready.catch(() => prepared.delete(dir));
  }
  return ready;
}

/** Writes the message's bytes and adds its transaction to the email's envelopes, once. */
export async function writeToOutbox(dir: string, emailId: string, raw: Buffer, transaction: OutboxEnvelope): Promise<void> {
  await prepareDir(dir);
  const emlName = `${emailId}.eml`;
  const envelopeName = `${emailId}.envelope.json`;
  // The usual send is the email's first: both files are created, nothing is read.
  if (await createAtomically(dir, emlName, raw)) {
    if (await createAtomically(dir, envelopeName, envelopeFile([transaction]))) return;
  } else {
    // A redelivery, or another transaction of the same email (one per VERP return path).
    const existing = await readFile(join(dir, emlName));
    if (!existing.equals(raw)) await replaceAtomically(dir, emlName, raw);
  }
  const envelopes = await readEnvelopes(join(dir, envelopeName));
  // A redelivered send (at-least-once processors) must not list the transaction twice.
  if (envelopes.some((e) => sameTransaction(e, transaction))) return;
  envelopes.push(transaction);
  await replaceAtomically(dir, envelopeName, envelopeFile(envelopes));
}
