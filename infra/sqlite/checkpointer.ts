// WAL checkpoints off the event loop.
//
// In WAL mode sqlite copies the WAL back into the database file inside the COMMIT that takes
// the WAL past `wal_autocheckpoint` pages, on the committing connection: on the event loop,
// with an fsync of the WAL and one of the database. Measured in a pipeline bench run: 6.3 of
// the 16.2 s that COMMITs took on the event loop were such checkpoints, up to 194 ms at a
// time, during which no request was answered.
//
// So a thread with connections of its own runs a PASSIVE checkpoint 200 ms after commits
// (PASSIVE copies what no reader still needs and waits for nobody; writers and readers go on
// meanwhile). The writer's automatic checkpoint stays as the backstop: the WAL only starts
// over from its beginning when a checkpoint has copied every frame and a writer comes next,
// which under constant load a checkpoint running beside the writes rarely achieves. When the
// backstop fires it finds almost everything copied already, so it costs the event loop little.
// Nothing depends on the thread for correctness: if it dies, the backstop does all the work.
import { Worker } from 'node:worker_threads';
import type { CheckpointReply, CheckpointRequest } from './checkpoint-worker.ts';

const WORKER_URL = new URL('./checkpoint-worker.ts', import.meta.url);
/**
 * How long after a commit the checkpoint runs: the commits of this window share it. Each
 * checkpoint syncs both files, and syncs queue behind each other on the disk: at 50 ms the
 * admissions' own WAL syncs waited for them.
 */
const DELAY_MS = 200;

interface FileState {
  users: number;
  timer: NodeJS.Timeout | null;
  /** A checkpoint was asked for and not answered yet. */
  running: boolean;
  /** Committed while one ran: another follows. */
  again: boolean;
}

class Checkpointer {
  readonly #files = new Map<string, FileState>();
  readonly #closing = new Map<number, () => void>();
  #worker: Worker | null = null;
  /** Set once a thread died: this thread's files keep to the backstop from then on. */
  #gaveUp = false;
  #nextId = 1;

  attach(file: string): void {
    const state = this.#files.get(file);
    if (state) state.users++;
    else this.#files.set(file, { users: 1, timer: null, running: false, again: false });
  }

  /** After a commit to `file`: a checkpoint runs within DELAY_MS. */
  committed(file: string): void {
    const state = this.#files.get(file);
    if (!state || state.timer || this.#gaveUp) return;
    if (state.running) {
      state.again = true;
      return;
    }
    state.timer = setTimeout(() => this.#request(file, state), DELAY_MS).unref();
  }

  /** The last user of `file` detaching closes the thread's connection to it before resolving. */
  async detach(file: string): Promise<void> {
    const state = this.#files.get(file);
    if (!state || --state.users > 0) return;
    this.#files.delete(file);
    if (state.timer) clearTimeout(state.timer);
    const worker = this.#worker;
    if (!worker) return;
    const id = this.#nextId++;
    await new Promise<void>((resolve) => {
      this.#closing.set(id, resolve);
      // Held while it closes: the caller closes its own connections next, and its file is
      // only checkpointed and its WAL removed by whichever connection closes last.
      worker.ref();
      worker.postMessage({ op: 'close', file, id } satisfies CheckpointRequest);
    });
  }

  #request(file: string, state: FileState): void {
    state.timer = null;
    state.running = true;
    this.#thread().postMessage({ op: 'checkpoint', file } satisfies CheckpointRequest);
  }

  #thread(): Worker {
    if (this.#worker) return this.#worker;
    const worker = new Worker(WORKER_URL);
    // Never what keeps a process alive: an exiting process loses only a checkpoint, which
    // the next connection to open the file (or the backstop) does.
    worker.unref();
    worker.on('message', (reply: CheckpointReply) => this.#answered(worker, reply));
    const lost = () => this.#lost(worker);
    worker.on('error', lost);
    worker.on('exit', lost);
    this.#worker = worker;
    return worker;
  }

  #answered(worker: Worker, reply: CheckpointReply): void {
    if (reply.op === 'closed') {
      this.#closing.get(reply.id)?.();
      this.#closing.delete(reply.id);
      if (this.#closing.size === 0) worker.unref();
      return;
    }
    const state = this.#files.get(reply.file);
    if (!state) return;
    state.running = false;
    if (state.again) {
      state.again = false;
      this.committed(reply.file);
    }
  }

  /** The thread died (it should not: nothing it runs throws past its handler): the backstop takes over. */
  #lost(worker: Worker): void {
    if (this.#worker !== worker) return;
    this.#worker = null;
    this.#gaveUp = true;
    for (const resolve of this.#closing.values()) resolve();
    this.#closing.clear();
    for (const state of this.#files.values()) {
      state.running = false;
      state.again = false;
    }
  }
}

/** One per thread: its own connections, as a process of its own would have. */
export const checkpointer = new Checkpointer();
