// The outbox thread: writes messages into the outbox directory on its own event loop, so the
// dozen file operations of a send (each a call into libuv and a thread-pool round trip) are not
// the event loop's that the API and every processor share.
import { parentPort } from 'node:worker_threads';
import { writeToOutbox, type OutboxEnvelope } from './outbox-files.ts';

export interface OutboxWriteRequest {
  id: number;
  dir: string;
  emailId: string;
  raw: Uint8Array;
  transaction: OutboxEnvelope;
}

export type OutboxWriteReply = { id: number } | { id: number; error: { message: string; code?: string } } | { ready: true };

if (!parentPort) throw new Error('outbox-worker.ts runs as a worker thread (infra/mail/outbox-transport.ts)');
const port = parentPort;

port.on('message', async ({ id, dir, emailId, raw, transaction }: OutboxWriteRequest) => {
  try {
    await writeToOutbox(dir, emailId, Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), transaction);
    port.postMessage({ id } satisfies OutboxWriteReply);
  } catch (error) {
    const { message, code } = error as NodeJS.ErrnoException;
    port.postMessage({ id, error: { message: String(message ?? error), ...(typeof code === 'string' ? { code } : {}) } } satisfies OutboxWriteReply);
  }
});

// Loaded: the transport may count on this thread from now on (OutboxTransport.warm).
port.postMessage({ ready: true } satisfies OutboxWriteReply);
