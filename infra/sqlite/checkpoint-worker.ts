// The checkpoint thread: copies committed WAL frames into the database files on a connection
// of its own (./checkpointer.ts says why). One thread serves every file of its parent thread.
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { parentPort } from 'node:worker_threads';

export type CheckpointRequest =
  | { op: 'checkpoint'; file: string }
  | { op: 'close'; file: string; id: number };

/** `ran` whether or not the checkpoint succeeded: one that failed leaves the copying to the next, or to the backstop. */
export type CheckpointReply = { op: 'closed'; id: number } | { op: 'ran'; file: string };

if (!parentPort) throw new Error('checkpoint-worker.ts runs as a worker thread (infra/sqlite/checkpointer.ts)');
const port = parentPort;

interface OpenFile {
  db: DatabaseSync;
  checkpoint: StatementSync;
}

const files = new Map<string, OpenFile>();

function open(file: string): OpenFile {
  let entry = files.get(file);
  if (!entry) {
    const db = new DatabaseSync(file);
    // PASSIVE never waits for readers or writers, so the busy handler never runs; the timeout
    // is zero anyway, so that nothing here can sleep holding a lock another thread waits for.
    db.exec('PRAGMA busy_timeout = 0');
    entry = { db, checkpoint: db.prepare('PRAGMA wal_checkpoint(PASSIVE)') };
    files.set(file, entry);
  }
  return entry;
}

port.on('message', (request: CheckpointRequest) => {
  if (request.op === 'close') {
    const entry = files.get(request.file);
    files.delete(request.file);
    try {
      entry?.db.close();
    } finally {
      port.postMessage({ op: 'closed', id: request.id } satisfies CheckpointReply);
    }
    return;
  }
  try {
    open(request.file).checkpoint.get();
  } catch {
    // A checkpoint that could not run changes nothing that is committed; one that found
    // another checkpoint running answers busy rather than throwing.
  } finally {
    port.postMessage({ op: 'ran', file: request.file } satisfies CheckpointReply);
  }
});
