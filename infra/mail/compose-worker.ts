// A compose-pool thread: composes and signs one message per request, on its own event loop.
// Replies carry the request's id; the bytes go back transferred, not copied.
import { parentPort } from 'node:worker_threads';
import { composeMessage, type ComposeInput } from './compose.ts';

export interface ComposeRequest {
  id: number;
  input: ComposeInput;
}

export type ComposeReply =
  | { id: number; raw: Uint8Array; messageId: string }
  | { id: number; error: unknown };

if (!parentPort) throw new Error('compose-worker.ts runs as a worker thread (infra/mail/compose-pool.ts)');
const port = parentPort;

port.on('message', async ({ id, input }: ComposeRequest) => {
  let reply: ComposeReply;
  let transfer: ArrayBuffer[] = [];
  try {
    const { raw, messageId } = await composeMessage(input);
    // A small Buffer is a slice of Node's shared allocation pool, which must not be transferred.
    const bytes = raw.byteOffset === 0 && raw.byteLength === raw.buffer.byteLength ? raw : Uint8Array.prototype.slice.call(raw);
    reply = { id, raw: bytes, messageId };
    transfer = [bytes.buffer as ArrayBuffer];
  } catch (error) {
    reply = { id, error };
  }
  try {
    port.postMessage(reply, transfer);
  } catch {
    // An error that cannot be cloned still reaches the caller, as its message.
    const error = (reply as { error?: unknown }).error;
    port.postMessage({ id, error: new Error(error instanceof Error ? error.message : String(error)) } satisfies ComposeReply);
  }
});

// Loaded (nodemailer and all): the pool may count on this thread from now on (ComposePool.warm).
port.postMessage({ ready: true });
