// Writing one message into the outbox directory (infra/mail/outbox-transport.ts has the layout),
// and finding the temporary copies that a write which died left there. The writes run on the
// outbox thread (./outbox-worker.ts); the caller makes sure that one email's writes never
// overlap (envelope updates are read-modify-write).
import { closeSync, fdatasync, linkSync, openSync, renameSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { chmod, mkdir, readdir, readFile, stat, unlink } from 'node:fs/promises';
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
 * A write's temporary copies live milliseconds (seconds on a slow disk): one older than this
 * was left by a write that died (a crash, a kill), and holds a body or a BCC nobody will read.
 */
export const ABANDONED_TEMP_AFTER_MS = 5 * 60_000;

const TEMP_NAME = /^\.([A-Za-z0-9_-]{1,64})\.(?:eml|envelope\.json)\.[0-9a-f]{12}\.tmp$/;

export interface OutboxTemp {
  name: string;
  emailId: string;
  modifiedAt: Date;
}

/** The temporary copies in `dir` (`.<emailId>.eml.<hex>.tmp`, `.<emailId>.envelope.json.<hex>.tmp`). */
export async function outboxTemps(dir: string): Promise<OutboxTemp[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if (isMissing(error)) return [];
    throw error;
  }
  const temps: OutboxTemp[] = [];
  for (const name of names) {
    const emailId = TEMP_NAME.exec(name)?.[1];
    if (emailId === undefined) continue;
    try {
      temps.push({ name, emailId, modifiedAt: (await stat(join(dir, name))).mtime });
    } catch (error) {
      if (!isMissing(error)) throw error; // its write ended meanwhile
    }
  }
  return temps;
}

/** Deletes a temporary copy; false when it was gone already. */
export async function removeTemp(dir: string, temp: OutboxTemp): Promise<boolean> {
  return unlink(join(dir, temp.name)).then(() => true, (error) => {
    if (isMissing(error)) return false;
    throw error;
  });
}

/** Whether a temporary copy is older than ABANDONED_TEMP_AFTER_MS at `now`: left by a write that died. */
export const isAbandoned = (temp: OutboxTemp, now: Date): boolean => now.getTime() - temp.modifiedAt.getTime() > ABANDONED_TEMP_AFTER_MS;

/** Deletes the temporary copies in `dir` older than ABANDONED_TEMP_AFTER_MS at `now`. */
async function removeAbandonedTemps(dir: string, now: Date): Promise<void> {
  for (const temp of await outboxTemps(dir)) if (isAbandoned(temp, now)) await removeTemp(dir, temp);
}

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
      // The name TEMP_NAME matches: what a crash leaves is found and deleted (prepareDir, retention).
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

/** Told of each name a write made appear (linked or renamed into place), as soon as it did. */
type Placed = (name: string) => void;

/**
 * Creates the files in order, each unless a file of its name exists, and stops at the first
 * that does: how many were created. A reader never sees half a file: the name appears,
 * complete and synced, by a hard link, which unlike a rename fails when the name is taken, so
 * a first write needs no read to find out.
 */
async function createAtomically(dir: string, files: Array<{ name: string; data: Buffer }>, placed: Placed): Promise<number> {
  const temps = await writeTemps(dir, files);
  let created = 0;
  try {
    for (; created < files.length; created++) {
      linkSync(temps[created], join(dir, files[created].name));
      placed(files[created].name);
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    for (const temp of temps) {
      try {
        unlinkSync(temp);
      } catch {
        // Left behind under its temporary name: prepareDir and retention delete it.
      }
    }
  }
  return created;
}

/** Replaces `name` with `data` atomically (temp file + rename). */
async function replaceAtomically(dir: string, name: string, data: Buffer, placed: Placed): Promise<void> {
  const [temp] = await writeTemps(dir, [{ name, data }]);
  try {
    renameSync(temp, join(dir, name));
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
  placed(name);
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

/**
 * The directory, 0700 whatever the umask, and also when an older version made it 0755. A
 * thread's first write here also has the temporary copies that a write which died left (a
 * crash of this process, or of another writing here) deleted, without waiting for retention.
 */
function prepareDir(dir: string): Promise<void> {
  let ready = prepared.get(dir);
  if (!ready) {
    ready = mkdir(dir, { recursive: true, mode: 0o700 }).then(async () => {
      // Beside the writes, which it never holds up (a large outbox takes a while to list).
      removeAbandonedTemps(dir, new Date()).catch(() => {
        // Not the write's concern: retention deletes them, and reports what fails.
      });
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

/**
 * A write that failed. `messagePlaced`: it had made `<emailId>.eml` appear (or replaced it) by
 * then, so a reader may have taken the message as sent; otherwise the outbox shows nothing of
 * this write, and it can be made again.
 */
export class OutboxWriteFailed extends Error {
  readonly code: string | undefined;
  readonly messagePlaced: boolean;

  constructor(cause: unknown, messagePlaced: boolean) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    const code = (cause as NodeJS.ErrnoException | null)?.code;
    this.code = typeof code === 'string' ? code : undefined;
    this.messagePlaced = messagePlaced;
  }
}

/** Writes the message's bytes and adds its transaction to the email's envelopes, once; fails with OutboxWriteFailed. */
export async function writeToOutbox(dir: string, emailId: string, raw: Buffer, transaction: OutboxEnvelope): Promise<void> {
  const emlName = `${emailId}.eml`;
  const envelopeName = `${emailId}.envelope.json`;
  let messagePlaced = false;
  const placed: Placed = (name) => {
    if (name === emlName) messagePlaced = true;
  };
  try {
    await prepareDir(dir);
    // The usual send is the email's first: both files are created, nothing is read. The message
    // comes first, so an envelope never names a message that is not there yet.
    const created = await createAtomically(dir, [{ name: emlName, data: raw }, { name: envelopeName, data: envelopeFile([transaction]) }], placed);
    if (created === 2) return;
    if (created === 0) {
      // A redelivery, or another transaction of the same email (one per VERP return path).
      const existing = await readFile(join(dir, emlName));
      if (!existing.equals(raw)) await replaceAtomically(dir, emlName, raw, placed);
    }
    const envelopes = await readEnvelopes(join(dir, envelopeName));
    // A redelivered send (at-least-once processors) must not list the transaction twice.
    if (envelopes.some((e) => sameTransaction(e, transaction))) return;
    envelopes.push(transaction);
    await replaceAtomically(dir, envelopeName, envelopeFile(envelopes), placed);
  } catch (error) {
    throw new OutboxWriteFailed(error, messagePlaced);
  }
}
