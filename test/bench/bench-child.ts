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

export interface ClosedLoopRun {
  requests: number;
  seconds: number;
  /** Ascending, in ms: from a request's start to its answer. */
  latencies: number[];
  statuses: Record<string, number>;
}

/**
 * A closed loop: `connections` workers each make a request as soon as their last one was
 * answered. `request(n)` makes the n-th and gives its status ('error' when it throws). After
 * `warmupSeconds`, requests are measured for `seconds`; `onMeasure` runs as measuring starts
 * and `onMeasured` once it ends, before the workers stop.
 */
export async function closedLoop(options: {
  connections: number;
  warmupSeconds: number;
  seconds: number;
  request: (n: number) => Promise<string>;
  onMeasure?: () => void;
  onMeasured?: () => Promise<void>;
}): Promise<ClosedLoopRun> {
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  let next = 0;
  let measuring = false;
  let stop = false;
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  const worker = async () => {
    while (!stop) {
      const n = next++;
      const started = performance.now();
      let status: string;
      try {
        status = await options.request(n);
      } catch {
        status = 'error';
      }
      if (measuring) {
        latencies.push(performance.now() - started);
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
    }
  };
  const workers = Array.from({ length: options.connections }, worker);
  await sleep(options.warmupSeconds * 1000);
  options.onMeasure?.();
  measuring = true;
  const began = performance.now();
  await sleep(options.seconds * 1000);
  measuring = false;
  const seconds = (performance.now() - began) / 1000;
  await options.onMeasured?.();
  stop = true;
  await Promise.all(workers);
  latencies.sort((a, b) => a - b);
  return { requests: latencies.length, seconds, latencies, statuses };
}
