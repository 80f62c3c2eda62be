// What every benchmark needs around its server children and its figures: percentiles, asking a
// forked child for its instrumentation over IPC, and stopping it.
import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { Pool } from 'undici';

/** The p-th percentile of an ascending array; NaN when it is empty. */
export const percentile = (sorted: number[], p: number): number =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

/** Sends {cmd} ('stats' unless told) and resolves with the child's next {stats} answer. */
export function askStats<T>(c: ChildProcess, cmd = 'stats'): Promise<T> {
  const answer = new Promise<T>((resolve) => {
    const listen = (m: { stats?: T }) => {
      if (!m.stats) return;
      c.off('message', listen);
      resolve(m.stats);
    };
    c.on('message', listen);
  });
  c.send({ cmd });
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

/** The machine's CPU time so far, in clock ticks (Linux /proc/stat); null where there is none. */
export interface MachineCpu { total: number; idle: number; steal: number }

export function machineCpu(): MachineCpu | null {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is already counted in user).
    const [user, nice, system, idle, iowait, irq, softirq, steal] = fields;
    return { total: user + nice + system + idle + iowait + irq + softirq + steal, idle: idle + iowait, steal };
  } catch {
    return null;
  }
}

/**
 * Between two readings: the share of the machine's CPU time the hypervisor gave to others
 * (steal) and the share that ran anything. On a shared VM steal is CPU this benchmark did not
 * get, so figures from runs with different steal do not compare.
 */
export function machineText(from: MachineCpu | null, to: MachineCpu | null): string {
  if (!from || !to) return 'machine: CPU counters not available';
  if (to.total <= from.total) return 'machine: no CPU time elapsed';
  const total = to.total - from.total;
  const pct = (ticks: number) => `${((ticks / total) * 100).toFixed(0)}%`;
  return `machine: ${pct(to.steal - from.steal)} of its CPU time stolen by the hypervisor, ${pct(total - (to.idle - from.idle) - (to.steal - from.steal))} busy`;
}

/** CPU seconds (user + system, every thread) a process has used so far (Linux /proc); null where there is none. */
export function processCpuSeconds(pid: number): number | null {
  try {
    return cpuSecondsOf(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

/** utime + stime of a /proc stat line: the 12th and 13th fields after the command name (in parentheses, may hold spaces). */
function cpuSecondsOf(stat: string): number {
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}

/**
 * CPU seconds a process's main thread and its other threads (workers, libuv's pool) have used so
 * far (Linux /proc/<pid>/task); threads that have ended are no longer counted. Null where there is none.
 */
export function threadCpuSeconds(pid: number): { main: number; others: number } | null {
  try {
    let main = 0;
    let others = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const seconds = taskCpuSeconds(`/proc/${pid}/task/${tid}/stat`);
      if (Number(tid) === pid) main += seconds;
      else others += seconds;
    }
    return { main, others };
  } catch {
    return null;
  }
}

/**
 * CPU seconds used so far by each kind of thread of a process, by thread name
 * (/proc/<pid>/task/<tid>/comm: `main` for the process's own thread, a worker's `name`,
 * `libuv-worker` for libuv's pool, `V8Worker` for V8's); null where /proc does not tell.
 */
export function threadCpuByName(pid: number): Map<string, number> | null {
  try {
    const byName = new Map<string, number>();
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      let name: string;
      try {
        name = Number(tid) === pid ? 'main' : readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      } catch {
        continue;
      }
      byName.set(name, (byName.get(name) ?? 0) + taskCpuSeconds(`/proc/${pid}/task/${tid}/stat`));
    }
    return byName;
  } catch {
    return null;
  }
}

/** Bytes a process has passed to write calls (files, pipes and sockets: `wchar`) and sent to storage (`write_bytes`) so far. */
export function processWrites(pid: number): { wchar: number; storage: number } | null {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(io)?.[1] ?? NaN);
    return { wchar: field('wchar'), storage: field('write_bytes') };
  } catch {
    return null;
  }
}

/**
 * CPU seconds so far of every process of the engines on this machine (Kafka's JVM, FerretDB,
 * PostgreSQL's server processes), by pid, from /proc. Engines are shared: whatever else uses
 * them in the same window is counted too.
 */
export function engineCpuByPid(): Map<number, { engine: string; seconds: number }> {
  const found = new Map<number, { engine: string; seconds: number }>();
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return found;
  }
  for (const pid of pids) {
    try {
      const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      const engine = comm === 'java' ? (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('kafka') ? 'kafka' : null)
        : comm.startsWith('ferretdb') ? 'ferretdb' : comm === 'postgres' ? 'postgres' : null;
      if (engine) found.set(Number(pid), { engine, seconds: cpuSecondsOf(readFileSync(`/proc/${pid}/stat`, 'utf8')) });
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** Per engine, the CPU seconds between two readings (a process that ended in between is not counted). */
export function engineCpuBetween(before: Map<number, { engine: string; seconds: number }>, after: Map<number, { engine: string; seconds: number }>): Record<string, number> {
  const byEngine: Record<string, number> = {};
  for (const [pid, { engine, seconds }] of after) {
    const earlier = before.get(pid);
    byEngine[engine] = (byEngine[engine] ?? 0) + seconds - (earlier?.engine === engine ? earlier.seconds : 0);
  }
  return byEngine;
}

function taskCpuSeconds(statFile: string): number {
  try {
    return cpuSecondsOf(readFileSync(statFile, 'utf8'));
  } catch {
    // The thread ended between the listing and the read.
    return 0;
  }
}

/** VmRSS of a process in KiB, or null where /proc does not tell. */
export function rssKiB(pid: number): number | null {
  try {
    const line = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return line ? Number(line[1]) : null;
  } catch {
    return null;
  }
}

/** USER_HZ: 100 on every Linux architecture Node runs on (getconf CLK_TCK). */
const CLOCK_TICKS_PER_SECOND = 100;

/** A closed loop's n-th POST /v1/emails: keys and their bodies taken in turn; gives the status. */
export function sendEmailRequest(pool: Pool, keys: string[], bodies: string[]): (n: number) => Promise<string> {
  return async (n) => {
    const i = n % keys.length;
    const response = await pool.request({
      path: '/v1/emails', method: 'POST', body: bodies[i],
      headers: { 'content-type': 'application/json', authorization: `Bearer ${keys[i]}` },
    });
    await response.body.dump();
    return String(response.statusCode);
  };
}
