// DKIM signing keys for a sending domain. The private half stays with Relay (PKCS#8 PEM, what
// node:crypto and nodemailer's dkim option take); the public half goes into DNS as the p= tag,
// which RFC 6376 3.6.1 defines as base64 of the DER SubjectPublicKeyInfo.
//
// The services make keys on a thread of their own (generateDkimKeyPairOnThread), never on libuv's
// thread pool, where node:crypto's async generateKeyPair runs and where the fdatasync before every
// 202 also waits (infra/sqlite/group-commit.ts): one workspace creating domains in parallel would
// hold every tenant's POST /v1/emails for seconds. Keys are made one at a time, at a lower
// priority than the event loop; a few wait behind it, two of any one workspace, and more are
// refused at once, so no flood of domain creations or rotation starts can queue work without
// bound or take more than that one core.
import { generateKeyPair, randomBytes, type RSAKeyPairOptions } from 'node:crypto';
import { promisify } from 'node:util';
import { ForwardedStartReport, type ThreadStartReport } from '../threads/thread-starts.ts';
import { WorkerQueue, WorkerQueueFullError } from '../threads/worker-queue.ts';

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

/** What the key thread (./dkim-key-worker.ts) is asked for, and what it answers. */
export interface DkimKeyJob { modulusLength: number }
export type DkimKeyHalves = Omit<DkimKeyPair, 'selector'>;

/** Keys that may wait behind the one being made (2048 bits: some 30–150 ms each), all workspaces together. */
export const MAX_WAITING_KEYS = 16;
/** Keys of one workspace that may wait: one workspace's flood leaves room for the others. */
export const MAX_WAITING_KEYS_PER_WORKSPACE = 2;

export { WorkerQueueFullError as KeyGenerationBusyError };

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

function modulusLengthOf(options: DkimKeyOptions): number {
  const modulusLength = options.modulusLength ?? 2048;
  if (!Number.isInteger(modulusLength) || modulusLength < 1024) throw new RangeError('DKIM RSA keys must be at least 1024 bits (RFC 8301)');
  return modulusLength;
}

/** How both halves are encoded, wherever the key is made. */
export function rsaKeyOptions(modulusLength: number): RSAKeyPairOptions<'der', 'pem'> {
  return { modulusLength, publicKeyEncoding: { type: 'spki', format: 'der' }, privateKeyEncoding: { type: 'pkcs8', format: 'pem' } };
}

/**
 * A key made at once on libuv's thread pool: for tests and tools that need one and run no
 * requests. The services use generateDkimKeyPairOnThread.
 */
export async function generateDkimKeyPair(options: DkimKeyOptions = {}): Promise<DkimKeyPair> {
  const { publicKey, privateKey } = await generateKeyPairAsync('rsa', rsaKeyOptions(modulusLengthOf(options)));
  return { selector: newDkimSelector(options.now), privateKeyPem: privateKey, publicKeyBase64: publicKey.toString('base64') };
}

let queue: WorkerQueue<DkimKeyJob, DkimKeyHalves> | null = null;
const starts = new ForwardedStartReport();

/**
 * Where the process tells of the key thread failing to start and of its recovery (without it,
 * every domain creation would answer 503 "busy" with nothing said). The queue is one per
 * process: the last process part to open its services is told.
 */
export function reportDkimKeyThreadStarts(report: ThreadStartReport): void {
  starts.target = report;
}

/**
 * A key made on the key thread, in `workspaceId`'s turn; KeyGenerationBusyError when
 * MAX_WAITING_KEYS are already waiting, or MAX_WAITING_KEYS_PER_WORKSPACE of that workspace, or
 * no thread can start.
 */
export async function generateDkimKeyPairOnThread(workspaceId: string, options: DkimKeyOptions = {}): Promise<DkimKeyPair> {
  const job: DkimKeyJob = { modulusLength: modulusLengthOf(options) };
  queue ??= new WorkerQueue<DkimKeyJob, DkimKeyHalves>({
    workerUrl: new URL('./dkim-key-worker.ts', import.meta.url),
    maxWaiting: MAX_WAITING_KEYS,
    maxWaitingPerTenant: MAX_WAITING_KEYS_PER_WORKSPACE,
    // Keys give way to sends when the cores are contended.
    niceIncrement: 10,
    name: 'DKIM key generation',
    onThreadStart: starts,
  });
  const halves = await queue.run(job, { tenant: workspaceId });
  return { selector: newDkimSelector(options.now), ...halves };
}
