// The `outbox` transport: instead of sending, writes each message to a directory, for
// development and for inspecting exactly what would have gone out.
//
//   <dir>/<emailId>.eml            the raw bytes exactly as they would go on the wire
//   <dir>/<emailId>.envelope.json  [{ mailFrom, recipients }, …] every transaction of that email
//   <dir>/.relay-outbox-id         the directory's id (below: which outbox a claim wrote to)
//
// The first two hold the body or the BCC: the retention sweep deletes them with the content key
// (apps/services/outbox.ts), and with them the temporary copies (`.<emailId>.eml.<hex>.tmp`,
// `.<emailId>.envelope.json.<hex>.tmp`) that a write which died left; those older than any
// write lasts go sooner (removeLeftTemps; a starting thread deletes those too).
//
// An email sent as several transactions (one per VERP return path) is one .eml and one
// envelope entry per transaction. Files are 0600 in a 0700 directory (messages hold personal
// data) and are replaced atomically (temp file + rename), so a reader never sees half a file.
//
// The files are written on a thread of their own (./outbox-worker.ts, ./outbox-files.ts): a
// send is a dozen file operations, which cost the shared event loop about 0.3 ms per message
// (the thread-pool round trips), as much as a third of an admission. The writes queued in one
// turn of the loop go to it as one message, answered in one: waking another thread costs more
// per message than the bytes do. The thread starts on the first send, is unref'd while idle,
// and one that dies fails only the writes it held (the batches posted to it).
//
// A write that fails (disk full, the outbox path not a directory, the thread lost) is an
// outcome, as the port wants, not a throw: `deferred` (retried on the delivery schedule) while
// nothing of it can have appeared, `unknown` once the .eml may have (a reader may have taken
// the message as sent). A throw would leave the begun transaction open until the claim's grace.
//
// After a crash, recovery asks what became of the transactions left open (settle): the outbox
// is its own provider, so it knows exactly. A write places the .eml first and the envelope
// entry last, each by link or rename: a recipient named in `<emailId>.envelope.json` was
// written whole, any other was not (nothing, only temporary copies, or an .eml whose envelope
// entry never came), and writing it again gives the outbox the same files once (the entry is
// added once, the .eml left or replaced whole). Temporary copies are left to the next thread's
// start and to retention, as any a write that died leaves: another process may be writing.
// Only the outbox a transaction was written to can say what became of it: another directory
// (another host's over shared stores, a restart with another RELAY_DATA_DIR) holds none of it,
// and its "not there" would have the message written a second time. So each outbox directory
// has an id of its own (`<dir>/.relay-outbox-id`, made once, atomically, by the first transport
// that warms there; every later one, in any process, reads the same), the transport's
// `instance`: a claim records it, and recovery asks only a transport of the same instance. A
// copy of the directory (a backup restored in its place) keeps the id with the messages it
// holds; a directory made anew gets a new one (a copy made for another sender must lose the
// file: docs/delivery.md).
// Liveness (infra/liveness.ts): each answer of the thread is progress; a thread lost makes it
// `recovering` until the next answer; work waits while a write is outstanding.
import { randomBytes } from 'node:crypto';
import { link, mkdir, open, readdir, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { Liveness } from '../liveness.ts';
import { notBegunOutcome, type MailTransport, type OpenTransaction, type OutgoingMessage, type RecipientOutcome, type SendOptions, type SettledRecipient, type TransportOutcome } from '../ports/mail-transport.ts';
import { isAbandoned, isMissing, outboxTemps, readEnvelopes, removeTemp, type OutboxEnvelope, type OutboxTemp } from './outbox-files.ts';
import type { OutboxWrite, OutboxWriteReply, OutboxWriteRequest, OutboxWriteResult } from './outbox-worker.ts';
import { compareText } from '../../domain/text.ts';

export type { OutboxEnvelope } from './outbox-files.ts';
export { ABANDONED_TEMP_AFTER_MS } from './outbox-files.ts';

const EMAIL_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** The outbox directory's id (outboxInstance): not a name any message or temporary copy takes. */
export const OUTBOX_ID_FILE = '.relay-outbox-id';
const OUTBOX_ID = /^[A-Za-z0-9_-]{16,64}$/;
const WORKER_URL = new URL('./outbox-worker.ts', import.meta.url);

export interface OutboxEntry {
  emailId: string;
  /** Size of the .eml file in bytes. */
  size: number;
  modifiedAt: Date;
}

/**
 * What came of one write. `reason` goes to timelines and webhook payloads: an error code, never
 * a path. `messagePlaced`: the .eml had appeared when it failed; null when the thread was lost
 * and cannot say.
 */
type WriteResult = { ok: true } | { ok: false; reason: string; messagePlaced: boolean | null };

type Write = (result: WriteResult) => void;

const CLOSED: WriteResult = { ok: false, reason: 'the outbox transport is closed', messagePlaced: false };

export class OutboxTransport implements MailTransport {
  readonly name = 'outbox';
  readonly dir: string;
  readonly liveness = new Liveness();
  /** The directory's id, once warm() has read it (MailTransport.instance). */
  #instance: string | undefined;
  /** Per email id: envelope updates are read-modify-write, so one at a time within this process. */
  readonly #pending = new Map<string, Promise<unknown>>();
  /** Posted to the thread, by id, until it answers. */
  readonly #writes = new Map<number, Write>();
  /** Queued in this turn of the loop, posted together at its end. */
  #queued: Array<{ request: OutboxWrite; write: Write }> = [];
  #posting: NodeJS.Immediate | null = null;
  #worker: Worker | null = null;
  /** Settles once the current thread has loaded its modules (or died trying). */
  #ready: Promise<void> = Promise.resolve();
  readonly #workerUrl: URL;
  #nextId = 1;
  #closed = false;

  /** `workerUrl`: the thread's entry module (tests give one that can be made to crash). */
  constructor(dir: string, options: { workerUrl?: URL } = {}) {
    this.dir = dir;
    this.#workerUrl = options.workerUrl ?? WORKER_URL;
    this.liveness.probeWaiting(async () => this.#writes.size > 0 || this.#queued.length > 0);
  }

  /**
   * The outbox directory's id (outboxInstance), read by warm(); unset before, and when it could
   * not be read or made (the path not a directory, a file that holds no id): claims then record
   * none, and a recovery asks no outbox about them (delivery_unknown).
   */
  get instance(): string | undefined {
    return this.#instance;
  }

  async send(message: OutgoingMessage, options: SendOptions = {}): Promise<TransportOutcome> {
    if (!EMAIL_ID.test(message.emailId)) throw new Error(`outbox: invalid email id ${JSON.stringify(message.emailId)}`);
    const previous = this.#pending.get(message.emailId) ?? Promise.resolve();
    // The file write is the transaction: the caller's mark comes right before it.
    const work = previous.catch(() => undefined).then(async (): Promise<WriteResult | null> => {
      if (options.beginTransaction && !(await options.beginTransaction())) return null;
      const result = await this.#write(message);
      if (result.ok || result.messagePlaced !== null) return result;
      // The thread died holding the write. Looked at before this email's next write can start:
      // the message may have appeared only if its bytes are there.
      return { ...result, messagePlaced: await holdsBytes(join(this.dir, `${message.emailId}.eml`), message.raw) };
    });
    this.#pending.set(message.emailId, work);
    let result: WriteResult | null;
    try {
      result = await work;
    } finally {
      if (this.#pending.get(message.emailId) === work) this.#pending.delete(message.emailId);
    }
    const addresses = [...new Set(message.envelope.recipients)];
    if (result === null) return { providerMessageId: null, recipients: addresses.map(notBegunOutcome) };
    // The file's name only: this text reaches timelines and webhook payloads, the server's paths must not.
    if (!result.ok) {
      const outcome: Omit<RecipientOutcome, 'address'> = result.messagePlaced
        ? { result: 'unknown', smtpCode: null, enhancedCode: null, response: `${message.emailId}.eml was written to the outbox, then the write failed: ${result.reason}` }
        : { result: 'deferred', smtpCode: null, enhancedCode: null, response: `not written to the outbox: ${result.reason}` };
      return { providerMessageId: null, recipients: addresses.map((address) => ({ address, ...outcome })) };
    }
    const response = `written to the outbox as ${message.emailId}.eml`;
    return {
      providerMessageId: message.messageId,
      recipients: addresses.map((address) => ({ address, result: 'accepted' as const, smtpCode: null, enhancedCode: null, response })),
    };
  }

  /**
   * What the outbox holds of an open transaction: `accepted` for each recipient its envelope
   * file names (placed after the .eml, so the message was written whole, as send answers it),
   * `not_sent` for the others. A write of the email still under way in this process is waited
   * for first. An envelope file that cannot be read as one says nothing (no recipient answered);
   * an I/O error rejects.
   */
  async settle(transaction: OpenTransaction): Promise<SettledRecipient[]> {
    const { emailId, messageId } = transaction;
    if (!EMAIL_ID.test(emailId)) return [];
    await this.#pending.get(emailId)?.catch(() => undefined);
    let envelopes: unknown;
    try {
      envelopes = await readEnvelopes(join(this.dir, `${emailId}.envelope.json`));
    } catch (error) {
      // Not a directory: nothing was ever written there. Not JSON: it cannot tell.
      if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') envelopes = [];
      else if (error instanceof SyntaxError) return [];
      else throw error;
    }
    if (!Array.isArray(envelopes)) return [];
    const written = new Set<string>();
    for (const envelope of envelopes as Array<Partial<OutboxEnvelope> | null>) {
      if (!Array.isArray(envelope?.recipients)) return [];
      for (const recipient of envelope.recipients) if (typeof recipient === 'string') written.add(recipient.toLowerCase());
    }
    return [...new Set(transaction.recipients)].map((address): SettledRecipient => written.has(address.toLowerCase())
      ? { address, result: 'accepted', providerMessageId: messageId, response: `written to the outbox as ${emailId}.eml` }
      : { address, result: 'not_sent', providerMessageId: null, response: 'not written to the outbox: the sender stopped before the write was complete' });
  }

  /** Settles with what came of the write; never rejects. */
  #write(message: OutgoingMessage): Promise<WriteResult> {
    if (this.#closed) return Promise.resolve(CLOSED);
    const transaction: OutboxEnvelope = { mailFrom: message.envelope.mailFrom, recipients: [...message.envelope.recipients] };
    const request: OutboxWrite = { id: this.#nextId++, emailId: message.emailId, raw: message.raw, transaction };
    return new Promise<WriteResult>((write) => {
      this.#queued.push({ request, write });
      this.#posting ??= setImmediate(() => this.#post());
    });
  }

  /** The turn's writes, in one message (an email has one write at a time: `#pending`). */
  #post(): void {
    this.#posting = null;
    const queued = this.#queued;
    this.#queued = [];
    if (this.#closed) {
      for (const { write } of queued) write(CLOSED);
      return;
    }
    const worker = this.#worker ?? this.#start();
    for (const { request, write } of queued) this.#writes.set(request.id, write);
    worker.ref();
    worker.postMessage({ dir: this.dir, writes: queued.map(({ request }) => request) } satisfies OutboxWriteRequest);
  }

  /**
   * Starts the thread now and resolves once it has loaded (or died trying), and reads the
   * directory's id (making it the first time), once: a failure leaves `instance` unset, as a
   * write's failure is an outcome, not a reason to stop the sender.
   */
  async warm(): Promise<void> {
    if (this.#closed) return;
    if (!this.#worker) this.#start();
    const identified = this.#instance === undefined ? outboxInstance(this.dir).then((id) => {
      this.#instance = id;
    }, () => undefined) : undefined;
    await Promise.all([this.#ready, identified]);
  }

  #start(): Worker {
    const worker = new Worker(this.#workerUrl, { name: 'relay-outbox' });
    this.#worker = worker;
    let loaded!: () => void;
    this.#ready = new Promise<void>((resolve) => (loaded = resolve));
    worker.once('exit', () => loaded());
    worker.on('message', (reply: OutboxWriteReply) => {
      if ('ready' in reply) {
        // Held open while it loads (warm() may be all the process waits for), then let go.
        if (this.#writes.size === 0) worker.unref();
        loaded();
        return;
      }
      if (this.#worker !== worker) return;
      this.liveness.progress('thread');
      const answered: Array<[Write, OutboxWriteResult]> = [];
      for (const result of reply.results) {
        const write = this.#writes.get(result.id);
        if (write && this.#writes.delete(result.id)) answered.push([write, result]);
      }
      if (this.#writes.size === 0) worker.unref();
      for (const [write, result] of answered) {
        // The code only: the message names paths.
        write('error' in result ? { ok: false, reason: result.error.code ?? 'an unexpected error', messagePlaced: result.error.messagePlaced } : { ok: true });
      }
    });
    // 'error' (an uncaught exception, out of memory) comes before 'exit'; either ends the thread.
    worker.on('error', (error) => this.#lost(worker, error));
    worker.on('exit', (code) => this.#lost(worker, new Error(`exit code ${code}`)));
    return worker;
  }

  /**
   * The writes the thread held end unanswered (send() finds out what they left); the next send
   * starts a new thread.
   */
  #lost(worker: Worker, cause: Error): void {
    if (this.#worker !== worker) return;
    this.#worker = null;
    const lost = new Error(`the outbox thread stopped while writing: ${cause.message}`, { cause });
    if (!this.#closed) this.liveness.failed(lost, 'thread');
    for (const write of this.#writes.values()) write({ ok: false, reason: 'the outbox thread stopped while writing', messagePlaced: null });
    this.#writes.clear();
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.#pending.values()]);
    this.#closed = true;
    this.liveness.stopped();
    const worker = this.#worker;
    this.#worker = null;
    await worker?.terminate();
  }
}

/**
 * The id of the outbox directory `dir`: read from its OUTBOX_ID_FILE, or, when it has none, made
 * there (with the directory, 0700, if need be) by a hard link of a complete, synced temporary
 * copy, which fails when the name is taken: of several transports making it at once, in any
 * process, one id wins and every one reads that. Rejects on an I/O error, or when the file
 * holds no id (it is left as it is: another process may be reading it).
 */
export async function outboxInstance(dir: string): Promise<string> {
  const path = join(dir, OUTBOX_ID_FILE);
  const read = async (): Promise<string> => {
    const id = (await readFile(path, 'utf8')).trim();
    if (!OUTBOX_ID.test(id)) throw new Error(`the outbox's ${OUTBOX_ID_FILE} holds no outbox id`);
    return id;
  };
  try {
    return await read();
  } catch (error) {
    if (!isMissing(error)) throw error;
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const temp = join(dir, `${OUTBOX_ID_FILE}.${randomBytes(6).toString('hex')}.tmp`);
  const file = await open(temp, 'wx', 0o600);
  try {
    await file.writeFile(`${randomBytes(18).toString('base64url')}\n`);
    await file.datasync();
  } finally {
    await file.close();
  }
  try {
    await link(temp, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    await unlink(temp).catch(() => undefined);
  }
  // The link is not synced: lost to a power cut, the next start makes another id, and the claims
  // that recorded this one are answered by no outbox (delivery_unknown), which is safe.
  return read();
}

/** Whether the file holds exactly `bytes`; false when it is not there (nor its directory). */
async function holdsBytes(path: string, bytes: Buffer): Promise<boolean> {
  try {
    return (await readFile(path)).equals(bytes);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return false;
    // Unreadable: it may be there.
    return true;
  }
}

/** The names in the outbox directory; a missing directory is an empty outbox. */
async function outboxNames(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (error) {
    if (isMissing(error)) return [];
    throw error;
  }
}

/** The messages in the outbox, newest first. */
export async function listOutbox(dir: string): Promise<OutboxEntry[]> {
  const names = await outboxNames(dir);
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
  return entries.sort((a, b) => b.modifiedAt.getTime() - a.modifiedAt.getTime() || compareText(a.emailId, b.emailId));
}

/** The email ids that have a file in the outbox (.eml or .envelope.json). */
export async function outboxEmailIds(dir: string): Promise<string[]> {
  const ids = new Set<string>();
  for (const name of await outboxNames(dir)) {
    const emailId = /^(.+)\.(?:eml|envelope\.json)$/.exec(name)?.[1];
    if (emailId !== undefined && EMAIL_ID.test(emailId)) ids.add(emailId);
  }
  return [...ids];
}

/**
 * Retention's step for the temporary copies that writes which died left: deletes those older
 * than ABANDONED_TEMP_AFTER_MS at `now`, and those of the emails `unreadable` returns (whose
 * content can no longer be read); how many went.
 */
export async function removeLeftTemps(dir: string, now: Date, unreadable: (emailIds: string[]) => Promise<string[]>, batch = 500): Promise<number> {
  const temps = await outboxTemps(dir);
  const abandoned = (temp: OutboxTemp) => isAbandoned(temp, now);
  const ids = [...new Set(temps.filter((temp) => !abandoned(temp)).map((temp) => temp.emailId))];
  const gone = new Set<string>();
  for (let i = 0; i < ids.length; i += batch) for (const emailId of await unreadable(ids.slice(i, i + batch))) gone.add(emailId);
  let removed = 0;
  for (const temp of temps) if ((abandoned(temp) || gone.has(temp.emailId)) && await removeTemp(dir, temp)) removed++;
  return removed;
}

/** Deletes an email's files from the outbox; false when it had none. */
export async function removeFromOutbox(dir: string, emailId: string): Promise<boolean> {
  if (!EMAIL_ID.test(emailId)) return false;
  const removed = await Promise.all([`${emailId}.eml`, `${emailId}.envelope.json`].map((name) => unlink(join(dir, name)).then(() => true, (error) => {
    if (isMissing(error)) return false;
    throw error;
  })));
  return removed.includes(true);
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
