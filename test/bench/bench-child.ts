// What every benchmark needs around its server children and its figures: percentiles, asking a
// forked child for its instrumentation over IPC, and stopping it.
import type { ChildProcess } from 'node:child_process';

/** The p-th percentile of an ascending array; NaN when it is empty. */
export const percentile = (sorted: number[], p: number): number =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

/** Sends {cmd: 'stats'} and resolves with the child's next {stats} answer. */
export function askStats<T>(c: ChildProcess): Promise<T> {
  const answer = new Promise<T>((resolve) => {
    const listen = (m: { stats?: T }) => {
      if (!m.stats) return;
      c.off('message', listen);
      resolve(m.stats);
    };
    c.on('message', listen);
  });
  c.send({ cmd: 'stats' });
  return answer;
}

/** SIGTERM, then wait for the exit (at once when it has already exited). */
export async function stopChild(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return;
  const exited = new Promise((r) => c.once('exit', r));
  c.kill('SIGTERM');
  await exited;
}
