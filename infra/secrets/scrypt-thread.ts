// scrypt off the event loop and off libuv's thread pool. node:crypto's async scrypt runs on
// that pool, where the fdatasync before every 202 also waits (infra/sqlite/group-commit.ts):
// 16 wrong sign-ins at once took POST /v1/emails from 8 ms to seconds. Here every hash runs on
// one thread of its own, one at a time, at a lower priority than the event loop; a few wait
// behind it and more are refused at once, so no flood of sign-ins can queue work without bound,
// take more than that one core, or take it from the requests when the cores are busy.
import { ForwardedStartReport, type ThreadStartReport } from '../threads/thread-starts.ts';
import { WorkerQueue, WorkerQueueFullError } from '../threads/worker-queue.ts';

export interface ScryptJob {
  password: string;
  salt: Uint8Array;
  length: number;
  N: number;
  r: number;
  p: number;
  maxmem: number;
}

/** Hashes that may wait behind the running one (about 60–100 ms each). */
export const MAX_WAITING_HASHES = 16;

export { WorkerQueueFullError as HashingBusyError };

let queue: WorkerQueue<ScryptJob, Uint8Array> | null = null;
const starts = new ForwardedStartReport();

/**
 * Where the process tells of the hashing thread failing to start and of its recovery (without
 * it, every sign-in would answer 503 "busy" with nothing said). The queue is one per process:
 * the last process part to open its services is told.
 */
export function reportHashingThreadStarts(report: ThreadStartReport): void {
  starts.target = report;
}

/** scrypt's derived key; HashingBusyError when MAX_WAITING_HASHES are already waiting. */
export async function scryptOnThread(job: ScryptJob): Promise<Buffer> {
  queue ??= new WorkerQueue<ScryptJob, Uint8Array>({
    workerUrl: new URL('./scrypt-worker.ts', import.meta.url),
    maxWaiting: MAX_WAITING_HASHES,
    // Sign-ins give way to sends when the cores are contended.
    niceIncrement: 10,
    name: 'password hashing',
    onThreadStart: starts,
  });
  const key = await queue.run(job);
  return Buffer.from(key.buffer, key.byteOffset, key.byteLength);
}
