// Writing one message into the outbox directory (infra/mail/outbox-transport.ts has the layout).
// Runs on the outbox thread (./outbox-worker.ts); the caller makes sure that one email's writes
// never overlap (envelope updates are read-modify-write).
import { closeSync, fdatasync, linkSync, openSync, renameSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { chmod, mkdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { pooledRandomBytes } from '../secrets/random-pool.ts';

export interface OutboxEnvelope {
  mailFrom: string;
  recipients: string[];
}

export function isMissing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException).code === 'ENOENT';
}

// This runs on the outbox thread, whose loop does nothing else: opening, writing, linking and
// unlinking a file take microseconds in the page cache, far less than handing each to the
// thread pool and being woken for its answer (two thread switches per call, a dozen calls per
// send). Only the syncs, which wait for the disk, go to the pool, where those of a batch run
// side by side.
const syncFile = promisify(fdatasync);

/**
 * Complete, synced copies of `files` under temporary names in `dir`, 0600: the mode open
 * gives them, as a umask can only take bits away (one that took the owner's would leave the
 * embedded databases unreadable too). The syncs run together.
 */
async function writeTemps(dir: string, files: Array<{ name: string; data: Buffer }>): Promise<string[]> {
  const temps: string[] = [];
  const fds: number[] = [];
  try {
    for (const { name, data } of files) {
      const temp = join(dir, `.${name}.${pooledRandomBytes(6).toString('hex')}.tmp`);
      fds.push(openSync(temp, 'wx', 0o600));
      temps.push(temp);
      for (let done = 0; done < data.length;) done += writeSync(fds[fds.length - 1], data, done);
    }
    await Promise.all(fds.map((fd) => syncFile(fd)));
  } catch (error) {
    for (const temp of temps) rmSync(temp, { force: true });
    throw error;
  } finally {
    for (const fd of fds) closeSync(fd);
  }
  return temps;
}

/**
 * Creates the files in order, each unless a file of its name exists, and stops at the first
 * that does: how many were created. A reader never sees half a file: the name appears,
 * complete and synced, by a hard link, which unlike a rename fails when the name is taken, so
 * a first write needs no read to find out.
 */
async function createAtomically(dir: string, files: Array<{ name: string; data: Buffer }>): Promise<number> {
  const temps = await writeTemps(dir, files);
  let created = 0;
  try {
    for (; created < files.length; created++) linkSync(temps[created], join(dir, files[created].name));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    for (const temp of temps) {
      try {
        unlinkSync(temp);
      } catch {
        // Left behind: a hidden temporary name that nothing reads.
      }
    }
  }
  return created;
}

/** Replaces `name` with `data` atomically (temp file + rename). */
async function replaceAtomically(dir: string, name: string, data: Buffer): Promise<void> {
  const [temp] = await writeTemps(dir, [{ name, data }]);
  try {
    renameSync(temp, join(dir, name));
  } catch (error) {
    rmSync(temp, { force: true });
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
  // The usual send is the email's first: both files are created, nothing is read. The message
  // comes first, so an envelope never names a message that is not there yet.
  const created = await createAtomically(dir, [{ name: emlName, data: raw }, { name: envelopeName, data: envelopeFile([transaction]) }]);
  if (created === 2) return;
  if (created === 0) {
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
