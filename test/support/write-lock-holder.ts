// Another process holding a sqlite file's write lock (an open write transaction), as a stray
// `sqlite3` shell or a backup tool would, until released.
import { spawn } from 'node:child_process';

const HOLDER = `
const { DatabaseSync } = require('node:sqlite');
const db = new DatabaseSync(process.argv[1], { timeout: 10000 });
db.exec('BEGIN IMMEDIATE');
db.exec("CREATE TABLE IF NOT EXISTS lock_holder (x)");
process.stdout.write('holding\\n');
process.stdin.on('data', () => { db.exec('ROLLBACK'); db.close(); process.exit(0); });
setInterval(() => {}, 1000);
`;

export interface WriteLockHolder {
  /** Lets the lock go; resolves once the process has ended. */
  release(): Promise<void>;
  /** Ends the process however it stands (for a test's finally). */
  kill(): void;
}

/** Resolves once the other process holds the lock of `file`. */
export async function holdWriteLock(file: string): Promise<WriteLockHolder> {
  const holder = spawn(process.execPath, ['-e', HOLDER, file], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise((resolve) => holder.once('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    holder.stdout!.on('data', (d) => String(d).includes('holding') && resolve());
    holder.once('exit', (code) => reject(new Error(`lock holder exited ${code}`)));
  });
  return {
    async release() {
      holder.stdin!.write('release\n');
      await exited;
    },
    kill() {
      holder.stdin!.write('release\n');
      holder.kill();
    },
  };
}
