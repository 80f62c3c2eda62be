// The outbox thread: writes messages into the outbox directory on its own event loop, so the
// dozen file operations of a send (each a call into libuv and a thread-pool round trip) are not
// the event loop's that the API and every processor share. Writes come in batches (those queued
// in one turn of the sender's loop) and are answered in one message per batch: waking another
// thread costs more per message than the bytes do.
import { parentPort } from 'node:worker_threads';
import { OutboxWriteFailed, writeToOutbox, type OutboxEnvelope } from './outbox-files.ts';

export interface OutboxWrite {
  id: number;
  emailId: string;
  raw: Uint8Array;
  transaction: OutboxEnvelope;
}

/** One message to the thread. No two writes of a batch are for the same email. */
export interface OutboxWriteRequest {
  dir: string;
  writes: OutboxWrite[];
}

/**
 * `messagePlaced`: the write had made the email's .eml appear (or replaced it) before it
 * failed (OutboxWriteFailed).
 */
export type OutboxWriteResult = { id: number } | { id: number; error: { message: string; code?: string; messagePlaced: boolean } };

/** One message from the thread: a result for each write of a request. */
export type OutboxWriteReply = { results: OutboxWriteResult[] } | { ready: true };

if (!parentPort) throw new Error('outbox-worker.ts runs as a worker thread (infra/mail/outbox-transport.ts)');
const port = parentPort;

async function written(dir: string, { id, emailId, raw, transaction }: OutboxWrite): Promise<OutboxWriteResult> {
  try {
    await writeToOutbox(dir, emailId, Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength), transaction);
    return { id };
  } catch (error) {
    const failed = error instanceof OutboxWriteFailed ? error : new OutboxWriteFailed(error, false);
    return { id, error: { message: failed.message, ...(failed.code ? { code: failed.code } : {}), messagePlaced: failed.messagePlaced } };
  }
}

port.on('message', async ({ dir, writes }: OutboxWriteRequest) => {
  const results = await Promise.all(writes.map((write) => written(dir, write)));
  port.postMessage({ results } satisfies OutboxWriteReply);
});

// Loaded: the transport may count on this thread from now on (OutboxTransport.warm).
port.postMessage({ ready: true } satisfies OutboxWriteReply);
