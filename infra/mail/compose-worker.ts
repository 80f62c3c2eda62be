// A compose-pool thread: composes and signs the messages of each batch it is given, on its own
// event loop, and answers the batch in one message (waking another thread costs more than a
// few KB of bytes do). Each result carries its job's id; the bytes go back transferred, not
// copied.
import { parentPort } from 'node:worker_threads';
import { composeMessage, type ComposeInput } from './compose.ts';

export interface ComposeJob {
  id: number;
  input: ComposeInput;
}

/** One message to the thread: the jobs waiting when it became free. */
export interface ComposeRequest {
  jobs: ComposeJob[];
}

export type ComposeResult =
  | { id: number; raw: Uint8Array; messageId: string }
  | { id: number; error: unknown };

/** One message from the thread: a result for each job of a request. */
export interface ComposeReply {
  results: ComposeResult[];
}

if (!parentPort) throw new Error('compose-worker.ts runs as a worker thread (infra/mail/compose-pool.ts)');
const port = parentPort;

async function composed({ id, input }: ComposeJob): Promise<ComposeResult> {
  try {
    const { raw, messageId } = await composeMessage(input);
    // A small Buffer is a slice of Node's shared allocation pool, which must not be transferred.
    const bytes = raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength ? raw : Uint8Array.prototype.slice.call(raw);
    return { id, raw: bytes, messageId };
  } catch (error) {
    return { id, error: cloneable(error) };
  }
}

/** An error that cannot be cloned would fail its whole batch's reply: it goes as its message. */
function cloneable(error: unknown): unknown {
  try {
    structuredClone(error);
    return error;
  } catch {
    return new Error(error instanceof Error ? error.message : String(error));
  }
}

port.on('message', async ({ jobs }: ComposeRequest) => {
  const results = await Promise.all(jobs.map(composed));
  const transfer = results.flatMap((result) => ('raw' in result ? [result.raw.buffer as ArrayBuffer] : []));
  port.postMessage({ results } satisfies ComposeReply, transfer);
});

// Loaded (nodemailer and all): the pool may count on this thread from now on (ComposePool.warm).
port.postMessage({ ready: true });
