// The connections an adapter uses for one sqlite file: a writer, shared by every adapter of
// this process that opens the same file (a second writing connection in the same process
// would wait on the first one's open batch, which can only commit once the event loop turns:
// a deadlock until the busy timeout), and a reader, which sees committed data only. Reads
// never see a batch that is still open, so nothing is answered from writes that are not
// durable yet (./group-commit.ts).
//
// A borrowed connection (the caller's DatabaseSync) and in-memory databases have no second
// connection: there the writer also reads.
import { resolve } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';
import { isDatabaseFile, openDatabase } from './database.ts';
import { watchOtherProcesses } from './change-signal.ts';
import { commitsFor, type CommitHold, type GroupCommit } from './group-commit.ts';
import { withReadFault, type ReadFault } from './read-fault.ts';

export interface SqliteConnections {
  writer: DatabaseSync;
  reader: DatabaseSync;
  commits: GroupCommit;
  /** Commits what is pending and closes the connections once no adapter uses them. */
  release(): Promise<void>;
}

interface SharedFile {
  writer: DatabaseSync;
  reader: DatabaseSync;
  users: number;
  /** Stops waking this thread's readers at other processes' commits. */
  unwatch: () => void;
}

const openFiles = new Map<string, SharedFile>();

export interface ConnectOptions {
  /** Tests only: holds the commits of the file's writer (./group-commit.ts, CommitHold). */
  commitHold?: CommitHold;
  /** Tests only: makes this adapter's reads fail on demand (./read-fault.ts). */
  readFault?: ReadFault;
}

/** Opens `source` (a path) or adopts a borrowed connection, which stays the caller's to close. */
export function connect(source: string | DatabaseSync, options: ConnectOptions = {}): SqliteConnections {
  const connections = open(source);
  if (options.commitHold) connections.commits.hold = options.commitHold;
  if (options.readFault) connections.reader = withReadFault(connections.reader, options.readFault);
  return connections;
}

function open(source: string | DatabaseSync): SqliteConnections {
  if (typeof source !== 'string') {
    return { writer: source, reader: source, commits: commitsFor(source), release: () => commitsFor(source).flush() };
  }
  if (!isDatabaseFile(source)) {
    const db = openDatabase(source);
    return {
      writer: db,
      reader: db,
      commits: commitsFor(db),
      release: async () => {
        await commitsFor(db).flush();
        commitsFor(db).dispose();
        db.close();
      },
    };
  }
  const key = resolve(source);
  let file = openFiles.get(key);
  if (!file) {
    const writer = openDatabase(source);
    let reader: DatabaseSync;
    try {
      reader = openDatabase(source);
    } catch (error) {
      writer.close();
      throw error;
    }
    let unwatch: () => void;
    try {
      // On the writer: its data_version moves only at other connections' commits (./change-signal.ts).
      const commits = commitsFor(writer);
      unwatch = watchOtherProcesses(writer, () => commits.otherThreadsCommits() ?? 0n);
    } catch (error) {
      reader.close();
      writer.close();
      throw error;
    }
    file = { writer, reader, users: 0, unwatch };
    openFiles.set(key, file);
  }
  file.users++;
  const shared = file;
  let released = false;
  return {
    writer: shared.writer,
    reader: shared.reader,
    commits: commitsFor(shared.writer),
    release: async () => {
      if (released) return;
      released = true;
      await commitsFor(shared.writer).flush();
      if (--shared.users > 0) return;
      if (openFiles.get(key) === shared) openFiles.delete(key);
      shared.unwatch();
      commitsFor(shared.writer).dispose();
      shared.reader.close();
      shared.writer.close();
    },
  };
}
