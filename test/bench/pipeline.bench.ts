// The whole pipeline in the default `npm start` shape: every part (forwarder, every processor,
// retention, inbound, api) in ONE child process on the embedded stores, delivering to the
// outbox (files in its data dir). This process generates the load and watches the lists.
//
//   node test/bench/pipeline.bench.ts          (or: npm run bench -- pipeline)
//   BENCH_SECONDS=20 BENCH_WARMUP_SECONDS=3 BENCH_CONNECTIONS=32        phase 1 (closed loop)
//   BENCH_RATE (default: 80 % of phase 1's admissions/s) BENCH_OPEN_SECONDS=60 BENCH_OPEN_CONNECTIONS=64   phase 2 (open loop)
//   BENCH_MAX_IN_FLIGHT=2000 BENCH_TICK_MS=10 BENCH_POLL_MS=25 BENCH_POLL_LIMIT=20
//   BENCH_WORKSPACES=10 BENCH_SETTLE_SECONDS=180 BENCH_DRAIN_SECONDS=300 BENCH_DRAIN_POLL_SECONDS=10
//   RELAY_ADMISSION_BACKLOG, RELAY_ADMISSION_MAX_WAIT_MS  passed to the Relay process (docs/configuration.md);
//                          RELAY_ADMISSION_BACKLOG=0 lets the closed loop admit as fast as admission alone can
//   BENCH_PIPELINE_THREAD=0  every part on one event loop (`relay start` with RELAY_PIPELINE_THREAD=off);
//                          by default, as `relay start`, the forwarder, processors and retention on a
//                          thread of their own (the SQL counter sees the main thread only: run with 0
//                          for the statements of every part)
//   BENCH_WITHOUT=deliverability  leave parts out of the Relay process; BENCH_PHASES=1  the closed loop only
//   BENCH_RUNS=3           closed loops, each on a fresh Relay process and data dir: the CPU per email
//                          compared with the target is their median; phases 2 and 3 follow the last
//   BENCH_SIDECAR=deliverability  run that processor as a process of its own (its CPU per email, same run)
//   BENCH_SQL_STATS=0      leave the SQL statement counter off (test/bench/sql-stats.ts; on by default)
//   BENCH_CPU_PROF=<dir>   runs the Relay child under `node --cpu-prof` (summary printed at the end;
//                          or: node test/bench/cpu-profile.ts <file>)
//
// 1. Closed loop: BENCH_CONNECTIONS connections POST /v1/emails back to back for
//    BENCH_SECONDS after BENCH_WARMUP_SECONDS: admissions/s, latency, statuses. The run then
//    waits until those emails are listed and every consumer group has caught up, so that
//    phase 2 does not start on phase 1's backlog.
// 2. Open loop: BENCH_RATE emails/s for BENCH_OPEN_SECONDS, started on a fixed schedule
//    (every BENCH_TICK_MS, the requests due by then) whether or not earlier ones were answered.
//    At most BENCH_MAX_IN_FLIGHT requests are outstanding (queued in the pool included); one
//    due while the cap is reached is not sent and counts as "behind schedule". Meanwhile each
//    project's `GET /v1/emails?limit=BENCH_POLL_LIMIT` (newest first) is polled every
//    BENCH_POLL_MS; when the oldest email of a page is new to the poller the next page is read
//    too (a burst longer than a page), and so is the window of the project's oldest unlisted
//    email's admission (`after` + `before`), once it is 500 ms old. Projection lag of an email = the time the first
//    response listing it arrived − the time its 202 arrived (same process, same clock; an
//    upper bound, by up to one poll interval plus the list request's own latency).
//    Server RSS (/proc/<pid>/status VmRSS) is sampled every second.
// 3. Drain: after the offered load, polling goes on (for BENCH_DRAIN_POLL_SECONDS at most)
//    until every admitted email was listed; from 1 s on, the emails still unlisted are also
//    looked for by paging their project's list from shortly before their admission (`after` +
//    `cursor`): an email found that way was "not seen by polling" (it was listed below the
//    polled pages, or polling had stopped), and its lag is the time of that page. The drain
//    gives up after BENCH_DRAIN_SECONDS. Then "no email lost": every project's whole list is
//    paged through with the cursor and every admitted id (both phases) must be in it; only
//    conclusive after a complete drain (before, a missing email may still be on its way). The
//    outbox count is informational: how many of the admitted emails the sender had written.
// Percentiles of the lag are over every email admitted in phase 2; one never listed counts as
// slower than all others.
//
// CPU: phase 1 also prints what an email costs end to end (the Relay process's CPU time, every
// thread, from the closed loop's start until it settled, over its emails) and, over the same
// window, per kind of thread (/proc/<pid>/task names), the SQL statements of the main thread
// per email by part (API, forwarder, each consumer group: test/bench/sql-stats.ts) with the
// costliest statements, and the bytes written per email; each phase also prints how much of
// the machine's CPU the hypervisor took (steal): a rate only compares with runs that got as
// much CPU. Accepted → sent (phase 2): the outbox file's modification time (wall clock) minus
// the wall time its 202 arrived.
//
// Rate limits and quotas are real: the load goes round-robin over BENCH_WORKSPACES activated
// workspaces, one production project each, two production keys each (100/s per key, 200/s per
// workspace: 10 workspaces allow 2,000/s, twice the offered rate). One project per workspace
// keeps the number of lists to poll down; the polling still costs the Relay process (list
// reads in its event loop), so a smaller BENCH_POLL_LIMIT makes it cheaper (a burst longer
// than a page is still followed page by page). At 1,000/s over 10 projects a 25 ms poll finds
// about 3 new emails: with pages of 100 the poller alone took 18 % of the Relay process's CPU
// and held admission at 352/s (538/s with pages of 20), so pages of 20 it is.
//
// The data dir is a fresh directory under the OS temp dir (TMPDIR): where it lives (tmpfs or
// disk) changes what the sqlite stores and the outbox cost.
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { askStats, closedLoop as runClosedLoop, machineCpu, machineText, percentile, processCpuSeconds, processWrites, rssKiB, stopChild, threadCpuByName, type MachineCpu } from './bench-child.ts';
import { sqlTotal, type SqlStats } from './sql-stats.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
/** Phase 2's offered rate; unset: 80 % of what phase 1 admitted per second. */
const RATE_SET = process.env.BENCH_RATE ? Number(process.env.BENCH_RATE) : null;
const SQL_STATS = process.env.BENCH_SQL_STATS !== '0';
const OPEN_SECONDS = Number(process.env.BENCH_OPEN_SECONDS ?? 60);
const OPEN_CONNECTIONS = Number(process.env.BENCH_OPEN_CONNECTIONS ?? 64);
const MAX_IN_FLIGHT = Number(process.env.BENCH_MAX_IN_FLIGHT ?? 2000);
const TICK_MS = Number(process.env.BENCH_TICK_MS ?? 10);
const POLL_MS = Number(process.env.BENCH_POLL_MS ?? 25);
const POLL_LIMIT = Number(process.env.BENCH_POLL_LIMIT ?? 20);
/** Pages one poll may read when every page ends in an email new to the poller. */
const POLL_MAX_PAGES = 5;
/** An email unlisted this long may be below the newest pages (20 newer emails of its project at 35/s): the poller looks for it. */
const CATCH_UP_AFTER_MS = 500;
const WORKSPACES = Number(process.env.BENCH_WORKSPACES ?? 10);
/**
 * Recipients are spread over this many domains, each a site of its own to the sender (which
 * paces each site: 600 messages a minute by default, apps/services/delivery/sites.ts), so that
 * site limits are not what is measured.
 */
const RECIPIENT_DOMAINS = Number(process.env.BENCH_RECIPIENT_DOMAINS ?? 200);
const KEYS_PER_WORKSPACE = 2;
const SETTLE_SECONDS = Number(process.env.BENCH_SETTLE_SECONDS ?? 180);
/** Parts left out of the Relay process (BENCH_WITHOUT=deliverability: what one processor costs, test/bench/deliverability.bench.ts). */
const WITHOUT = (process.env.BENCH_WITHOUT ?? '').split(',').map((p) => p.trim()).filter(Boolean);
/** BENCH_PHASES=1: the closed loop only. */
const PHASES = Number(process.env.BENCH_PHASES ?? 3);
/**
 * Closed loops, each on a Relay process and data directory of its own (as many `npm start`s):
 * the CPU per email compared with the target is their median. Phases 2 and 3 follow the last.
 */
const RUNS = Math.max(1, Math.floor(Number(process.env.BENCH_RUNS ?? 3)));
/**
 * BENCH_SIDECAR=deliverability: that processor runs as a process of its own on the same data
 * directory (`relay processor deliverability`; leave it out of the Relay process with
 * BENCH_WITHOUT), so its CPU per email is measured in the same run as everything else's.
 */
const SIDECAR = process.env.BENCH_SIDECAR?.trim() || null;
const DRAIN_SECONDS = Number(process.env.BENCH_DRAIN_SECONDS ?? 300);
/** How long the top-of-list polling goes on after the offered load (then paging alone). */
const DRAIN_POLL_SECONDS = Number(process.env.BENCH_DRAIN_POLL_SECONDS ?? 10);
const CPU_PROF = process.env.BENCH_CPU_PROF ? resolve(process.env.BENCH_CPU_PROF) : null;

// The targets (issue 28).
const TARGET_CPU_MS = 3;
const TARGET_MAIN_STATEMENTS = 30;
const TARGET_LAG_P99_MS = 1000;
const TARGET_SENT_P99_MS = 1000;
const TARGET_RSS_BAND = 0.1;

interface Ready { url: string; keys: string[]; domains: string[]; pid: number }

/** What the Relay process saw between a stats-reset and a stats request (bench instrumentation only). */
interface RelayStats {
  /** Share of wall time the event loop was busy. */
  utilization: number;
  /** CPU time (user + system) per wall second: 1 = one core. */
  cores: number;
  loopDelayP50: number; loopDelayP99: number; loopDelayMax: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const f = (n: number, digits = 0) => Number.isFinite(n) ? n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : n === Infinity ? '∞' : 'n/a';

// ---------------------------------------------------------------------------------------
// Relay (child process): `npm start`'s parts, embedded stores, outbox delivery.

async function serveRelay(dataDir: string): Promise<void> {
  // Orphaned (the bench process died): stop rather than keep serving.
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  const { loadConfig } = await import('../../infra/config.ts');
  const { startRelay, ALL_PARTS } = await import('../../apps/relay.ts');
  const { benchTenants } = await import('./bench-tenants.ts');
  const sql = await import('./sql-stats.ts');
  if (SQL_STATS) sql.countSql();
  const thread = process.env.BENCH_PIPELINE_THREAD;
  const config = loadConfig({
    RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'warn', PORT: '0',
    // Any free port for the feedback SMTP server.
    RELAY_INBOUND_SMTP_PORT: '0',
    ...(thread ? { RELAY_PIPELINE_THREAD: thread === '0' ? 'off' : 'on' } : {}),
    // Flow control as the operator sets it (RELAY_ADMISSION_BACKLOG=0: the closed loop runs as fast as admission alone).
    ...Object.fromEntries(Object.entries(process.env).filter(([name]) => name.startsWith('RELAY_ADMISSION_'))),
  });
  // As `relay start` (apps/cli/start-command.ts).
  const relay = await startRelay(config, ALL_PARTS.filter((part) => !WITHOUT.includes(part)), { pipelineThread: config.pipelineThread, runPart: sql.runPart });
  let stopping = false;
  process.on('SIGTERM', () => {
    if (stopping) return;
    stopping = true;
    setTimeout(() => process.exit(1), 30_000).unref();
    relay.stop().then(() => process.exit(0), () => process.exit(1));
  });
  const { keys, domains } = await benchTenants(relay, {
    workspaces: WORKSPACES, keysPerWorkspace: KEYS_PER_WORKSPACE, domainOf: (w) => `w${w}.bench.test`, permissions: ['email:send', 'email:read'],
  });
  instrument(sql);
  process.send!({ url: relay.url!, keys, domains, pid: process.pid } satisfies Ready);
}

/** Watches the event loop and the CPU; answers {stats} on IPC. Changes nothing Relay does. */
function instrument(sql: typeof import('./sql-stats.ts')): void {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  // The histogram times a 10 ms timer: what is past 10 ms is delay.
  const late = (ns: number) => Math.max(0, ns / 1e6 - 10);
  delay.enable();
  let elu = performance.eventLoopUtilization();
  let cpu = process.cpuUsage();
  let since = performance.now();
  process.on('message', (m: { cmd?: string }) => {
    if (m.cmd === 'stats-reset') {
      delay.reset();
      elu = performance.eventLoopUtilization();
      cpu = process.cpuUsage();
      since = performance.now();
    } else if (m.cmd === 'sql-reset') {
      sql.resetSqlStats();
    } else if (m.cmd === 'sql-stats') {
      process.send!({ stats: sql.sqlStats() });
    } else if (m.cmd === 'stats') {
      const used = process.cpuUsage(cpu);
      process.send!({
        stats: {
          utilization: performance.eventLoopUtilization(elu).utilization,
          cores: (used.user + used.system) / 1000 / (performance.now() - since),
          loopDelayP50: late(delay.percentile(50)), loopDelayP99: late(delay.percentile(99)), loopDelayMax: late(delay.max),
        } satisfies RelayStats,
      });
    }
  });
}

// ---------------------------------------------------------------------------------------
// This process: the child, load, polling, figures.

/** Children still running: killed if this process exits without having stopped them. */
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

/** `relay processor <name>` on the Relay child's data directory, once it has started (its CPU time stopped growing). */
async function startSidecar(dataDir: string, name: string): Promise<ChildProcess> {
  const child = fork(resolve(fileURLToPath(new URL('../../apps/cli/main.ts', import.meta.url))), ['processor', name], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'warn', PORT: '0', RELAY_INBOUND_SMTP_PORT: '0' },
  });
  children.add(child);
  child.once('exit', () => children.delete(child));
  for (let last = -1, tries = 0; tries < 100; tries++) {
    await sleep(300);
    const now = processCpuSeconds(child.pid!);
    if (now === null || now - last < 0.02) break;
    last = now;
  }
  return child;
}

async function startChild(dataDir: string): Promise<{ child: ChildProcess; ready: Ready }> {
  const execArgv = CPU_PROF ? [...process.execArgv, '--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`] : process.execArgv;
  const child = fork(fileURLToPath(import.meta.url), ['serve', dataDir], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv });
  children.add(child);
  child.once('exit', () => children.delete(child));
  const ready = await new Promise<Ready>((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`relay exited with ${code} before it was ready`));
    child.once('exit', onExit);
    child.once('message', (m) => {
      child.off('exit', onExit);
      resolve(m as Ready);
    });
  });
  return { child, ready };
}


function resetStats(c: ChildProcess): void {
  c.send({ cmd: 'stats-reset' });
}

const relayStats = (c: ChildProcess) => askStats<RelayStats>(c);

/** The newest profile the child wrote (node names them CPU.<date>.<time>.<pid>.…). */
function profileOf(pid: number): string | null {
  if (!CPU_PROF) return null;
  const files = readdirSync(CPU_PROF).filter((name) => name.endsWith('.cpuprofile') && name.includes(`.${pid}.`)).map((name) => join(CPU_PROF, name));
  return files.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0] ?? null;
}

/** One admitted email: its project (index), when its 202 arrived, when a list first showed it. */
interface Admitted {
  id: string;
  project: number;
  phase: 1 | 2;
  /** performance.now() when the 202's headers arrived. */
  acceptedAt: number;
  /** Date.now() when the request was sent: a lower bound of its createdAt (same clock). */
  sentWall: number;
  /** Date.now() when its 202 arrived (accepted → sent). */
  acceptedWall: number;
  listedAt: number | null;
  listedBy: 'poll' | 'page' | null;
}

class Tracker {
  readonly admitted = new Map<string, Admitted>();
  /** Each project's admitted emails in the order their 202s arrived, and how many of the first are listed. */
  readonly #byProject = new Map<number, { emails: Admitted[]; head: number }>();
  /** Listed before its 202 arrived (the response was still on its way): id → when. */
  readonly early = new Map<string, number>();

  admit(id: string, project: number, phase: 1 | 2, acceptedAt: number, sentWall: number, acceptedWall: number): void {
    const seen = this.early.get(id);
    this.early.delete(id);
    const admitted: Admitted = {
      id, project, phase, acceptedAt, sentWall, acceptedWall,
      listedAt: seen === undefined ? null : Math.max(seen, acceptedAt), listedBy: seen === undefined ? null : 'poll',
    };
    this.admitted.set(id, admitted);
    let queue = this.#byProject.get(project);
    if (queue === undefined) this.#byProject.set(project, (queue = { emails: [], head: 0 }));
    queue.emails.push(admitted);
  }

  /** The project's oldest admitted email not listed yet, once it is older than `ms`. */
  oldestUnlisted(project: number, ms: number): Admitted | null {
    const queue = this.#byProject.get(project);
    if (queue === undefined) return null;
    while (queue.head < queue.emails.length && queue.emails[queue.head].listedAt !== null) queue.head++;
    const oldest = queue.emails[queue.head];
    return oldest !== undefined && performance.now() - oldest.acceptedAt >= ms ? oldest : null;
  }

  /** Records that a list showed `id` at `at`; true when nothing had shown it before. */
  listed(id: string, at: number, by: 'poll' | 'page'): boolean {
    const a = this.admitted.get(id);
    if (a === undefined) {
      if (this.early.has(id)) return false;
      this.early.set(id, at);
      return true;
    }
    if (a.listedAt !== null) return false;
    a.listedAt = at;
    a.listedBy = by;
    return true;
  }

  ofPhase(phase: 1 | 2): Admitted[] {
    return [...this.admitted.values()].filter((a) => a.phase === phase);
  }
}

interface ListedEmail { id: string; status: string }
interface ListPage { emails: ListedEmail[]; next_cursor: string | null }

async function listPage(pool: Pool, key: string, query: Record<string, string>): Promise<ListPage> {
  const response = await pool.request({
    path: `/v1/emails?${new URLSearchParams(query)}`, method: 'GET',
    headers: { authorization: `Bearer ${key}` },
  });
  const text = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`GET /v1/emails answered ${response.statusCode}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as ListPage;
}

/** Per key, one body per recipient domain (bodies[key][domain]). */
function bodiesFor(ready: Ready): string[][] {
  return ready.domains.map((domain, i) => Array.from({ length: RECIPIENT_DOMAINS }, (_, d) => JSON.stringify({
    from: `Acme <noreply@${domain}>`, to: [`user${i}@r${d}.example.com`],
    subject: 'Your order has shipped', text: 'Hello, your order 1234 is on its way.', html: '<p>Hello, your order <b>1234</b> is on its way.</p>',
    tags: { kind: 'shipping' }, metadata: { orderId: 1234 },
  })));
}

let sentCount = 0;

const projectOfKey = (i: number) => Math.floor(i / KEYS_PER_WORKSPACE);
/** One key per project that may read the whole project's list. */
const readKeysOf = (ready: Ready) => Array.from({ length: ready.keys.length / KEYS_PER_WORKSPACE }, (_, p) => ready.keys[p * KEYS_PER_WORKSPACE]);

/** POST /v1/emails with key `i`; records a 202 in the tracker. Resolves at the 202's headers. */
async function postEmail(pool: Pool, ready: Ready, bodies: string[][], i: number, phase: 1 | 2, tracker: Tracker):
  Promise<{ status: number; acceptedAt: number }> {
  const sentWall = Date.now();
  const response = await pool.request({
    path: '/v1/emails', method: 'POST', body: bodies[i][sentCount++ % RECIPIENT_DOMAINS],
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ready.keys[i]}` },
  });
  const acceptedAt = performance.now();
  const acceptedWall = Date.now();
  const text = await response.body.text();
  if (response.statusCode === 202) tracker.admit((JSON.parse(text) as { id: string }).id, projectOfKey(i), phase, acceptedAt, sentWall, acceptedWall);
  return { status: response.statusCode, acceptedAt };
}

interface ClosedResult { requests: number; admitted: number; seconds: number; p50: number; p99: number; statuses: Record<string, number>; relay: RelayStats; machine: string }

async function closedLoop(ready: Ready, child: ChildProcess, tracker: Tracker): Promise<ClosedResult> {
  const pool = new Pool(ready.url, { connections: CONNECTIONS, pipelining: 1 });
  const bodies = bodiesFor(ready);
  let relay!: RelayStats;
  let machineAtStart: MachineCpu | null = null;
  let machine = '';
  const { latencies, seconds, statuses } = await runClosedLoop({
    connections: CONNECTIONS, warmupSeconds: WARMUP_SECONDS, seconds: SECONDS,
    request: async (n) => String((await postEmail(pool, ready, bodies, n % ready.keys.length, 1, tracker)).status),
    onMeasure: () => {
      resetStats(child);
      machineAtStart = machineCpu();
    },
    onMeasured: async () => {
      relay = await relayStats(child);
      machine = machineText(machineAtStart, machineCpu());
    },
  });
  await pool.close();
  return { requests: latencies.length, admitted: statuses['202'] ?? 0, seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99), statuses, relay, machine };
}

/** Polls the newest page of every project's list until stopped. */
class Poller {
  readonly latencies: number[] = [];
  polls = 0;
  pages = 0;
  errors = 0;
  lastError = '';
  #running = true;
  #loops: Promise<void>[] = [];
  readonly #pool: Pool;
  readonly #keys: string[];
  readonly #tracker: Tracker;

  constructor(url: string, keys: string[], tracker: Tracker) {
    this.#pool = new Pool(url, { connections: keys.length, pipelining: 1 });
    this.#keys = keys;
    this.#tracker = tracker;
  }

  start(): void {
    // Staggered, so that the lists are not all read at the same instant.
    this.#loops = this.#keys.map((key, p) => this.#loop(key, p, (p * POLL_MS) / this.#keys.length));
  }

  async stop(): Promise<void> {
    this.#running = false;
    await Promise.all(this.#loops);
    await this.#pool.close();
  }

  async #loop(key: string, project: number, offsetMs: number): Promise<void> {
    await sleep(offsetMs);
    while (this.#running) {
      const started = performance.now();
      await this.#poll(key);
      await this.#catchUp(key, project);
      const wait = POLL_MS - (performance.now() - started);
      if (wait > 0) await sleep(wait);
    }
  }

  async #poll(key: string): Promise<void> {
    this.polls++;
    let cursor: string | null = null;
    for (let page = 0; page < POLL_MAX_PAGES; page++) {
      const read = await this.#page(key, { limit: String(POLL_LIMIT), ...(cursor === null ? {} : { cursor }) });
      if (read === null) return;
      const { answer, at } = read;
      let oldestIsNew = false;
      for (const email of answer.emails) oldestIsNew = this.#tracker.listed(email.id, at, 'poll');
      if (!oldestIsNew || answer.next_cursor === null) return;
      cursor = answer.next_cursor;
    }
  }

  /**
   * An email listed later than the emails admitted after it (the projector's partitions run
   * side by side) can be below the newest pages by the time it is listed: the project's oldest
   * unlisted email is looked for too, in the few milliseconds around its admission (one page
   * of up to 50 covers every email admitted then), so its lag is seen when it happens and not
   * at the drain's paging. Only past CATCH_UP_AFTER_MS: until then the newest page shows it,
   * and these reads would be load on the process measured.
   */
  async #catchUp(key: string, project: number): Promise<void> {
    const oldest = this.#tracker.oldestUnlisted(project, CATCH_UP_AFTER_MS);
    if (oldest === null) return;
    const read = await this.#page(key, { limit: '50', after: new Date(oldest.sentWall - 1).toISOString(), before: new Date(oldest.acceptedWall + 1).toISOString() });
    if (read === null) return;
    for (const email of read.answer.emails) this.#tracker.listed(email.id, read.at, 'poll');
  }

  /** One list page, timed and counted; null when the request failed (counted as an error). */
  async #page(key: string, query: Record<string, string>): Promise<{ answer: ListPage; at: number } | null> {
    const started = performance.now();
    try {
      const answer = await listPage(this.#pool, key, query);
      const at = performance.now();
      this.pages++;
      this.latencies.push(at - started);
      return { answer, at };
    } catch (error) {
      this.errors++;
      this.lastError = (error as Error).message;
      return null;
    }
  }
}

/**
 * Pages each project's list from shortly before its oldest unlisted email's admission (newest
 * first), until every unlisted email of the project was found or the list ends.
 */
async function pageForUnlisted(pool: Pool, readKeys: string[], tracker: Tracker, emails: Admitted[]): Promise<void> {
  const byProject = new Map<number, Admitted[]>();
  for (const a of emails) if (a.listedAt === null) byProject.set(a.project, [...(byProject.get(a.project) ?? []), a]);
  await Promise.all([...byProject].map(async ([project, unlisted]) => {
    const after = new Date(unlisted.reduce((min, a) => Math.min(min, a.sentWall), Infinity) - 1000).toISOString();
    let remaining = unlisted.length;
    let cursor: string | null = null;
    do {
      const answer: ListPage = await listPage(pool, readKeys[project], { limit: '100', after, ...(cursor === null ? {} : { cursor }) });
      const at = performance.now();
      for (const email of answer.emails) {
        const a = tracker.admitted.get(email.id);
        if (a !== undefined && a.listedAt === null && a.project === project && tracker.listed(email.id, at, 'page')) remaining--;
      }
      cursor = answer.next_cursor;
    } while (cursor !== null && remaining > 0);
  }));
}

/** Consumer lag per group (records not handled yet) and parked events, from /metrics. */
async function pipelineBacklog(pool: Pool): Promise<{ lag: Record<string, number>; parked: number }> {
  const response = await pool.request({ path: '/metrics', method: 'GET' });
  const text = await response.body.text();
  const lag: Record<string, number> = {};
  let parked = 0;
  for (const line of text.split('\n')) {
    const l = /^relay_consumer_lag\{[^}]*group="([^"]+)"[^}]*\}\s+(\S+)/.exec(line);
    if (l) lag[l[1]] = (lag[l[1]] ?? 0) + Number(l[2]);
    const p = /^relay_parked_events\{[^}]*\}\s+(\S+)/.exec(line);
    if (p) parked += Number(p[1]);
  }
  return { lag, parked };
}

const backlogText = (b: { lag: Record<string, number>; parked: number }) =>
  `consumer lag ${Object.entries(b.lag).map(([g, n]) => `${g.replace(/^.*\./, '')} ${n}`).join(', ') || 'n/a'}; parked ${b.parked}`;

/**
 * Waits until no consumer group lags and every email of `emails` is listed; returns how long it
 * took, or null at the timeout. The lists are paged only once the groups have caught up: paging
 * while they lag cost the Relay process up to a tenth of what the emails cost, which the CPU
 * per email would count as theirs.
 */
async function settle(pool: Pool, readKeys: string[], tracker: Tracker, emails: Admitted[], timeoutMs: number, dataDir: string): Promise<number | null> {
  const began = performance.now();
  let nextReport = began + 10_000;
  while (performance.now() - began < timeoutMs) {
    const backlog = await pipelineBacklog(pool);
    // A group left out of the process (BENCH_WITHOUT) never catches up, unless a sidecar runs it: it is not waited for.
    const running = Object.entries(backlog.lag).filter(([group]) => !WITHOUT.some((part) => part !== SIDECAR && group.endsWith(`.${part}`)));
    const caughtUp = running.every(([, n]) => n === 0);
    const pageBegan = performance.now();
    if (caughtUp) await pageForUnlisted(pool, readKeys, tracker, emails);
    const pagingMs = performance.now() - pageBegan;
    // Delivered too: the sender's dispatcher sends after its group has handled the records.
    if (caughtUp && emails.every((a) => a.listedAt !== null) && (WITHOUT.includes('sender') || outboxCount(dataDir, tracker, emails) === emails.length)) return performance.now() - began;
    if (performance.now() > nextReport) {
      nextReport += 10_000;
      console.log(`   (settling: ${f(emails.filter((a) => a.listedAt === null).length)} of ${f(emails.length)} emails unlisted, ${f(emails.length - outboxCount(dataDir, tracker, emails))} not in the outbox after ` +
        `${f((performance.now() - began) / 1000)} s; ${backlogText(backlog)})`);
    }
    // Paging at most half of the time: the bench's reads must not slow what they wait for.
    await sleep(Math.max(250, pagingMs));
  }
  return null;
}

interface OpenResult {
  offered: number; sent: number; behind: number; maxInFlight: number; statuses: Record<string, number>;
  admitted: number; sustained: number; perSecond: number[];
  p50: number; p99: number; slipP99: number; slipMax: number;
  lag: { p50: number; p99: number; max: number; listed: number; notByPolling: number; never: number; early: number };
  drainMs: number | null; drainTimedOut: boolean;
  rss: Array<[number, number]>;
  backlogAtEnd: { lag: Record<string, number>; parked: number };
  poll: { polls: number; pages: number; perSecond: number; p50: number; p99: number; errors: number; lastError: string };
  relay: RelayStats; loadCores: number;
  /** Steal and load of the machine while the load was offered. */
  machine: string;
}

async function openLoop(ready: Ready, child: ChildProcess, tracker: Tracker, control: Pool, rate: number): Promise<OpenResult> {
  const pool = new Pool(ready.url, { connections: OPEN_CONNECTIONS, pipelining: 1 });
  const bodies = bodiesFor(ready);
  const readKeys = readKeysOf(ready);
  const poller = new Poller(ready.url, readKeys, tracker);
  const statuses: Record<string, number> = {};
  const latencies: number[] = [];
  const slips: number[] = [];
  const perSecond = new Array<number>(Math.ceil(OPEN_SECONDS)).fill(0);
  const rss: Array<[number, number]> = [];
  let scheduled = 0;
  let sent = 0;
  let behind = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let admitted = 0;
  let lastAccepted = 0;
  let allAnswered: (() => void) | null = null;
  const intervalMs = 1000 / rate;

  poller.start();
  resetStats(child);
  const loadCpu = process.cpuUsage();
  const machineAtStart = machineCpu();
  const start = performance.now();
  const end = start + OPEN_SECONDS * 1000;
  const sampleRss = () => {
    const kib = rssKiB(ready.pid);
    if (kib !== null) rss.push([(performance.now() - start) / 1000, kib]);
  };
  sampleRss();
  const rssTimer = setInterval(sampleRss, 1000);

  const send = (k: number) => {
    const i = k % ready.keys.length;
    const started = performance.now();
    slips.push(started - (start + k * intervalMs));
    sent++;
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    postEmail(pool, ready, bodies, i, 2, tracker).then(({ status, acceptedAt }) => {
      statuses[status] = (statuses[status] ?? 0) + 1;
      latencies.push(acceptedAt - started);
      if (status === 202) {
        admitted++;
        lastAccepted = Math.max(lastAccepted, acceptedAt);
        const second = Math.floor((acceptedAt - start) / 1000);
        if (second < perSecond.length) perSecond[second]++;
      }
    }, () => {
      statuses.error = (statuses.error ?? 0) + 1;
    }).finally(() => {
      if (--inFlight === 0 && allAnswered) allAnswered();
    });
  };

  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      const due = Math.floor(((Math.min(now, end) - start) * rate) / 1000);
      while (scheduled < due) {
        const k = scheduled++;
        if (inFlight >= MAX_IN_FLIGHT) behind++;
        else send(k);
      }
      if (now >= end) {
        clearInterval(timer);
        resolve();
      }
    };
    const timer = setInterval(tick, TICK_MS);
  });
  const offeredEnd = performance.now();
  const machine = machineText(machineAtStart, machineCpu());
  clearInterval(rssTimer);
  const backlogAtEnd = await pipelineBacklog(control);
  if (inFlight > 0) await new Promise<void>((resolve) => { allAnswered = resolve; });
  const relay = await relayStats(child);
  const loadUsed = process.cpuUsage(loadCpu);
  const loadCores = (loadUsed.user + loadUsed.system) / 1000 / (performance.now() - start);

  // Drain: polling goes on for DRAIN_POLL_SECONDS; from 1 s on, the unlisted are also looked
  // for by paging, at most half of the time (so that a long drain is not slowed by the
  // bench's own reads), with a progress line every 10 s.
  const emails = tracker.ofPhase(2);
  const drainDeadline = offeredEnd + DRAIN_SECONDS * 1000;
  let drainTimedOut = false;
  let polling = true;
  let pollSeconds = NaN;
  const stopPolling = async () => {
    pollSeconds = (performance.now() - start) / 1000;
    polling = false;
    await poller.stop();
  };
  let wait = 1000;
  let nextReport = offeredEnd + 10_000;
  for (;;) {
    if (emails.every((a) => a.listedAt !== null)) break;
    if (performance.now() > drainDeadline) {
      drainTimedOut = true;
      break;
    }
    await sleep(wait);
    if (polling && performance.now() - offeredEnd > DRAIN_POLL_SECONDS * 1000) await stopPolling();
    if (performance.now() > nextReport) {
      nextReport += 10_000;
      console.log(`   (drain: ${f(emails.filter((a) => a.listedAt === null).length)} of ${f(emails.length)} phase-2 emails unlisted ` +
        `${f((performance.now() - offeredEnd) / 1000)} s after the offered load; ${backlogText(await pipelineBacklog(control))})`);
    }
    const began = performance.now();
    const now = performance.now();
    await pageForUnlisted(control, readKeys, tracker, emails.filter((a) => a.listedAt === null && now - a.acceptedAt > 1000)).catch((error) => {
      console.log(`   (paging for unlisted emails failed: ${(error as Error).message})`);
    });
    wait = Math.max(1000, performance.now() - began);
  }
  if (polling) await stopPolling();
  await pool.close();

  const listed = emails.filter((a) => a.listedAt !== null);
  const lastListed = listed.reduce((max, a) => Math.max(max, a.listedAt!), -Infinity);
  const lags = emails.map((a) => a.listedAt === null ? Infinity : a.listedAt - a.acceptedAt).sort((a, b) => a - b);
  latencies.sort((a, b) => a - b);
  slips.sort((a, b) => a - b);
  poller.latencies.sort((a, b) => a - b);
  return {
    offered: scheduled, sent, behind, maxInFlight, statuses, admitted,
    sustained: lastAccepted > start ? admitted / ((lastAccepted - start) / 1000) : 0,
    perSecond,
    p50: percentile(latencies, 50), p99: percentile(latencies, 99),
    slipP99: percentile(slips, 99), slipMax: slips.length ? slips[slips.length - 1] : NaN,
    lag: {
      p50: percentile(lags, 50), p99: percentile(lags, 99), max: lags.length ? lags[lags.length - 1] : NaN,
      listed: listed.length, notByPolling: listed.filter((a) => a.listedBy === 'page').length, never: emails.length - listed.length,
      early: listed.filter((a) => a.listedAt === a.acceptedAt).length,
    },
    drainMs: drainTimedOut || listed.length === 0 ? null : Math.max(0, lastListed - offeredEnd), drainTimedOut,
    rss, backlogAtEnd,
    poll: {
      polls: poller.polls, pages: poller.pages, perSecond: poller.pages / pollSeconds,
      p50: percentile(poller.latencies, 50), p99: percentile(poller.latencies, 99), errors: poller.errors, lastError: poller.lastError,
    },
    relay, loadCores, machine,
  };
}

interface LostCheck { listed: number; lost: Admitted[]; duplicates: number; unknown: number; statuses: Record<string, number>; ms: number }

/** Pages through every project's whole list with the cursor; every admitted id must be in it. */
async function checkNothingLost(pool: Pool, readKeys: string[], tracker: Tracker): Promise<LostCheck> {
  const began = performance.now();
  const seen = new Set<string>();
  const statuses: Record<string, number> = {};
  let duplicates = 0;
  let unknown = 0;
  await Promise.all(readKeys.map(async (key) => {
    let cursor: string | null = null;
    do {
      const answer: ListPage = await listPage(pool, key, { limit: '100', ...(cursor === null ? {} : { cursor }) });
      for (const email of answer.emails) {
        if (seen.has(email.id)) duplicates++;
        seen.add(email.id);
        if (!tracker.admitted.has(email.id)) unknown++;
        statuses[email.status] = (statuses[email.status] ?? 0) + 1;
      }
      cursor = answer.next_cursor;
    } while (cursor !== null);
  }));
  const lost = [...tracker.admitted.values()].filter((a) => !seen.has(a.id));
  return { listed: seen.size, lost, duplicates, unknown, statuses, ms: performance.now() - began };
}

/** Accepted → sent of `emails`: the outbox file's mtime minus the 202's wall time; one not written counts as slower than all. */
function sentLatencies(dataDir: string, emails: Admitted[]): { p50: number; p99: number; max: number; unsent: number } {
  const dir = join(dataDir, 'outbox');
  let unsent = 0;
  const ms = emails.map((a) => {
    try {
      return statSync(join(dir, `${a.id}.eml`)).mtimeMs - a.acceptedWall;
    } catch {
      unsent++;
      return Infinity;
    }
  }).sort((a, b) => a - b);
  return { p50: percentile(ms, 50), p99: percentile(ms, 99), max: ms.length ? ms[ms.length - 1] : NaN, unsent };
}

interface WindowReading { threads: Map<string, number> | null; writes: { wchar: number; storage: number } | null; stored: number; machine: MachineCpu | null }

/** Bytes of the data directory's sqlite files (WAL included) and outbox. */
function storedBytes(dataDir: string): number {
  let total = 0;
  const walk = (dir: string) => {
    for (const name of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, name.name);
      if (name.isDirectory()) walk(path);
      else total += statSync(path, { throwIfNoEntry: false })?.size ?? 0;
    }
  };
  walk(dataDir);
  return total;
}

function windowReading(pid: number, dataDir: string): WindowReading {
  return { threads: threadCpuByName(pid), writes: processWrites(pid), stored: storedBytes(dataDir), machine: machineCpu() };
}

/** Per thread, SQL by part and statement, bytes written: over the CPU window, per email. Returns the main thread's statements per email. */
function printWindow(before: WindowReading, after: WindowReading, sql: SqlStats | null, emails: number): number {
  if (after.threads && before.threads) {
    const rows = [...after.threads].map(([name, seconds]) => [name, (seconds - (before.threads!.get(name) ?? 0)) * 1000 / emails] as const)
      .filter(([, ms]) => ms >= 0.005).sort((a, b) => b[1] - a[1]);
    console.log(`   CPU per email by thread: ${rows.map(([name, ms]) => `${name} ${f(ms, 2)} ms`).join(', ')}`);
  }
  if (after.writes && before.writes) {
    console.log(`   written per email: ${f((after.writes.wchar - before.writes.wchar) / emails)} bytes passed to write calls (files and sockets), ` +
      `${f((after.writes.storage - before.writes.storage) / emails)} bytes sent to storage; the data directory grew ${f((after.stored - before.stored) / emails)} bytes`);
  }
  if (!sql) return NaN;
  const parts = Object.entries(sql.parts).sort((a, b) => b[1].ms - a[1].ms);
  const { statements: total, ms: totalMs } = sqlTotal(sql);
  const per = (n: number, digits = 1) => f(n / emails, digits);
  console.log(`   SQL on the main thread per email: ${per(total)} statements, ${per(totalMs, 2)} ms in them; by part (statements, ms, write transactions opened, group-commit writes):`);
  for (const [part, p] of parts) console.log(`     ${part.padEnd(16)} ${per(p.statements).padStart(6)}  ${per(p.ms, 3).padStart(6)} ms  ${per(p.transactions, 2).padStart(5)}  ${per(p.writes, 2).padStart(5)}`);
  console.log('   the costliest statements (per email: count, ms):');
  for (const s of sql.statements.slice(0, 15)) console.log(`     ${per(s.count, 2).padStart(6)}  ${per(s.ms, 3).padStart(6)} ms  ${s.sql}`);
  return total / emails;
}

/** Admitted emails (of `among`, else any) whose message is in the outbox (<dir>/<emailId>.eml). */
function outboxCount(dataDir: string, tracker: Tracker, among?: Admitted[]): number {
  const dir = join(dataDir, 'outbox');
  if (!existsSync(dir)) return 0;
  const ids = among ? new Set(among.map((a) => a.id)) : tracker.admitted;
  let n = 0;
  for (const name of readdirSync(dir)) if (name.endsWith('.eml') && ids.has(name.slice(0, -'.eml'.length))) n++;
  return n;
}

interface RssFigures { samples: number; min: number; max: number; mean: number; deviation: number }

/** After the first third of the phase: min, max, mean (MiB) and the largest deviation from the mean. */
function rssFigures(rss: Array<[number, number]>): RssFigures | null {
  const kept = rss.filter(([t]) => t >= OPEN_SECONDS / 3).map(([, kib]) => kib / 1024);
  if (kept.length === 0) return null;
  const min = Math.min(...kept);
  const max = Math.max(...kept);
  const mean = kept.reduce((s, x) => s + x, 0) / kept.length;
  return { samples: kept.length, min, max, mean, deviation: Math.max(max - mean, mean - min) / mean };
}

const loopText = (r: RelayStats) =>
  `relay process: ${f(r.cores, 2)} cores, event loop ${f(r.utilization * 100)}% busy, delay p50 ${f(r.loopDelayP50, 1)} ms, p99 ${f(r.loopDelayP99, 1)} ms, max ${f(r.loopDelayMax, 1)} ms`;

interface ClosedRun {
  closed: ClosedResult;
  cpuPerEmail: number;
  mainStatements: number;
}

/** Phase 1 on a fresh Relay process: what an email costs end to end. */
async function closedRun(run: number, ready: Ready, child: ChildProcess, control: Pool, readKeys: string[], tracker: Tracker, dataDir: string): Promise<ClosedRun> {
  // 1. Closed loop. The Relay process's CPU time from here until phase 1 has settled, over
  // its emails, is what an email costs end to end (admission, forwarding, projection,
  // delivery to the outbox, webhooks fan-out), plus the settle check's list reads.
  const sidecar = SIDECAR ? await startSidecar(dataDir, SIDECAR) : null;
  if (SQL_STATS) child.send({ cmd: 'sql-reset' });
  const windowBefore = windowReading(ready.pid, dataDir);
  const cpuBefore = processCpuSeconds(ready.pid);
  const sidecarBefore = sidecar ? processCpuSeconds(sidecar.pid!) : null;
  const closed = await closedLoop(ready, child, tracker);
  console.log(`\n1. closed loop${RUNS > 1 ? ` (run ${run} of ${RUNS})` : ''}, ${CONNECTIONS} connections, ${SECONDS} s after ${WARMUP_SECONDS} s warm-up`);
  console.log(`   ${f(closed.admitted / closed.seconds)} admissions/s (${f(closed.requests / closed.seconds)} requests/s), latency p50 ${f(closed.p50, 2)} ms, p99 ${f(closed.p99, 2)} ms, statuses ${JSON.stringify(closed.statuses)}`);
  console.log(`   ${loopText(closed.relay)}`);
  console.log(`   ${closed.machine}`);
  const phase1 = tracker.ofPhase(1);
  const settled = await settle(control, readKeys, tracker, phase1, SETTLE_SECONDS * 1000, dataDir);
  const cpuAfter = processCpuSeconds(ready.pid);
  const windowAfter = windowReading(ready.pid, dataDir);
  const sql = SQL_STATS ? await askStats<SqlStats>(child, 'sql-stats') : null;
  const sidecarAfter = sidecar ? processCpuSeconds(sidecar.pid!) : null;
  if (sidecar) {
    if (settled !== null && sidecarBefore !== null && sidecarAfter !== null) {
      console.log(`   CPU per email of the ${SIDECAR} processor in its own process, same window: ${f(((sidecarAfter - sidecarBefore) * 1000) / phase1.length, 3)} ms`);
    }
    await stopChild(sidecar);
  }
  console.log(settled === null
    ? `   not settled after ${SETTLE_SECONDS} s: ${phase1.filter((a) => a.listedAt === null).length} of ${phase1.length} emails unlisted; ${backlogText(await pipelineBacklog(control))}`
    : `   its ${f(phase1.length)} emails listed and delivered to the outbox, every consumer group caught up, ${f(settled / 1000, 1)} s after the load; ` +
      `end to end ${f(phase1.length / (WARMUP_SECONDS + closed.seconds + settled / 1000))} emails/s (admitted from the warm-up's start, until the last was settled)`);
  let cpuPerEmail = NaN;
  if (settled !== null && cpuBefore !== null && cpuAfter !== null) {
    cpuPerEmail = ((cpuAfter - cpuBefore) * 1000) / phase1.length;
    console.log(`   CPU per email, end to end (the Relay process, every thread, from the closed loop's start until settled): ${f(cpuPerEmail, 2)} ms; ` +
      `over that window ${machineText(windowBefore.machine, windowAfter.machine).replace(/^machine: /, 'the machine had ')}`);
  }
  const mainStatements = printWindow(windowBefore, windowAfter, sql, phase1.length);
  return { closed, cpuPerEmail, mainStatements };
}

async function main(): Promise<void> {
  if (CPU_PROF) mkdirSync(CPU_PROF, { recursive: true });
  const cpu = cpus();
  console.log(`pipeline: node ${process.version}, ${cpu.length} × ${cpu[0]?.model.trim()}; every part in one process (embedded stores, outbox delivery); ` +
    `${WORKSPACES} workspaces × ${KEYS_PER_WORKSPACE} production keys; ${RUNS} closed loop${RUNS > 1 ? 's' : ''}, each on a fresh Relay process`);
  const runs: ClosedRun[] = [];
  let profile: string | null = null;
  for (let run = 1; run <= RUNS; run++) {
    const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-pipeline-'));
    const tracker = new Tracker();
    try {
      const { child, ready } = await startChild(dataDir);
      const control = new Pool(ready.url, { connections: WORKSPACES, pipelining: 1 });
      try {
        const readKeys = readKeysOf(ready);
        runs.push(await closedRun(run, ready, child, control, readKeys, tracker, dataDir));
        if (run === RUNS && PHASES >= 2) await openAndDrain(ready, child, control, readKeys, tracker, dataDir, runs);
      } finally {
        await control.close();
        await stopChild(child);
        if (run === RUNS) profile = profileOf(ready.pid);
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
  if (PHASES < 2) {
    const { cpuPerEmail, mainStatements } = medians(runs);
    const last = runs[runs.length - 1].closed;
    console.log(`\nsummary: CPU per email ${cpuText(runs)} (target ≤ ${TARGET_CPU_MS} ms: ${cpuPerEmail <= TARGET_CPU_MS ? 'met' : 'MISSED'}), ` +
      `${f(mainStatements, 1)} SQL statements per email on the main thread (target ≤ ${TARGET_MAIN_STATEMENTS}), ` +
      `closed loop ${f(last.admitted / last.seconds)} admissions/s (last run)`);
  }
  if (CPU_PROF) {
    const { printProfileSummary } = await import('./cpu-profile.ts');
    if (profile) printProfileSummary('relay (every part, last run)', profile);
    else console.log(`\nno profile of the relay process found in ${CPU_PROF}`);
  }
}

/** The runs' medians (of an even count, the higher middle one); NaN when a run has none (not settled, counter off). */
function medians(runs: ClosedRun[]): { cpuPerEmail: number; mainStatements: number } {
  const median = (values: number[]) => (values.some(Number.isNaN) ? NaN : percentile([...values].sort((a, b) => a - b), 50));
  return { cpuPerEmail: median(runs.map((r) => r.cpuPerEmail)), mainStatements: median(runs.map((r) => r.mainStatements)) };
}

function cpuText(runs: ClosedRun[]): string {
  const median = `${f(medians(runs).cpuPerEmail, 2)} ms`;
  return runs.length === 1 ? median : `${median}, the median of ${runs.map((r) => f(r.cpuPerEmail, 2)).join(', ')}`;
}

/** Phases 2 and 3 on the last closed loop's Relay process, and the summary of all three. */
async function openAndDrain(ready: Ready, child: ChildProcess, control: Pool, readKeys: string[], tracker: Tracker, dataDir: string, runs: ClosedRun[]): Promise<void> {
  const { closed } = runs[runs.length - 1];
  const { cpuPerEmail, mainStatements } = medians(runs);
  const rate = RATE_SET ?? Math.max(1, Math.round((0.8 * closed.admitted) / closed.seconds));
  // 2. + 3. Open loop, then drain.
  const open = await openLoop(ready, child, tracker, control, rate);
  const sortedSeconds = [...open.perSecond].sort((a, b) => a - b);
  console.log(`\n2. open loop: ${f(rate)} emails/s offered${RATE_SET === null ? ' (80 % of phase 1)' : ''} for ${OPEN_SECONDS} s (${OPEN_CONNECTIONS} connections, at most ${f(MAX_IN_FLIGHT)} in flight)`);
  console.log(`   offered ${f(open.offered)}, sent ${f(open.sent)}, behind schedule (not sent) ${f(open.behind)}, max in flight ${f(open.maxInFlight)}; statuses ${JSON.stringify(open.statuses)}`);
  console.log(`   admitted ${f(open.admitted)}: ${f(open.sustained)}/s sustained (first send → last 202); per second min ${f(sortedSeconds[0])}, median ${f(percentile(sortedSeconds, 50))}, max ${f(sortedSeconds[sortedSeconds.length - 1])}`);
  console.log(`   202s per second: ${open.perSecond.join(' ')}`);
  console.log(`   admission latency p50 ${f(open.p50, 2)} ms, p99 ${f(open.p99, 2)} ms (load generator sends late by p99 ${f(open.slipP99, 1)} ms, max ${f(open.slipMax, 1)} ms)`);
  console.log(`   projection lag (202 → first listed): p50 ${f(open.lag.p50)} ms, p99 ${f(open.lag.p99)} ms, max ${f(open.lag.max)} ms; ` +
    `${f(open.lag.notByPolling)} not seen by polling (found by paging), ${f(open.lag.never)} never listed, ${f(open.lag.early)} listed before their 202 arrived`);
  console.log(`   polling: ${f(open.poll.pages)} list pages (${f(open.poll.perSecond)}/s, limit ${POLL_LIMIT}, every ${POLL_MS} ms per project), latency p50 ${f(open.poll.p50, 1)} ms, p99 ${f(open.poll.p99, 1)} ms` +
    (open.poll.errors > 0 ? `, ${open.poll.errors} errors (last: ${open.poll.lastError})` : ''));
  console.log(`   ${loopText(open.relay)}; load generator (this process) ${f(open.loadCores, 2)} cores`);
  console.log(`   ${open.machine}`);
  console.log(`   at the end of the offered load: ${backlogText(open.backlogAtEnd)}`);
  const rss = rssFigures(open.rss);
  console.log(rss === null
    ? '   server RSS: not available (no /proc/<pid>/status)'
    : `   server RSS after the first third (${rss.samples} samples): min ${f(rss.min, 1)} MiB, max ${f(rss.max, 1)} MiB, mean ${f(rss.mean, 1)} MiB, ` +
      `largest deviation from the mean ${f(rss.deviation * 100, 1)}%; whole phase: ${open.rss.map(([, kib]) => f(kib / 1024)).join(' ')} MiB`);
  console.log(`\n3. drain: ${open.drainMs === null ? `not drained after ${DRAIN_SECONDS} s` : `every admitted email listed ${f(open.drainMs)} ms after the offered load ended`}`);
  const lost = await checkNothingLost(control, readKeys, tracker);
  const drained = open.drainMs !== null;
  const droppedFromList = lost.lost.filter((a) => a.listedAt !== null);
  console.log(`   ${drained ? 'lost' : 'not listed yet (not conclusive: the pipeline had not drained)'}: ${lost.lost.length} of ${f(tracker.admitted.size)} ` +
    `admitted (both phases) missing from their project's full list (paged through ${f(lost.listed)} emails in ${f(lost.ms)} ms; ` +
    `${lost.duplicates} listed twice, ${lost.unknown} not admitted by this run)`);
  if (lost.lost.length > 0) {
    console.log(`   missing, first ${Math.min(10, lost.lost.length)}: ${lost.lost.slice(0, 10).map((a) => `${a.id} (phase ${a.phase}, listed before: ${a.listedBy ?? 'no'})`).join(', ')}`);
  }
  if (droppedFromList.length > 0) console.log(`   ${droppedFromList.length} of the missing had been listed before: a list that drops an email it showed`);
  console.log(`   statuses in the lists: ${JSON.stringify(lost.statuses)}`);
  console.log(`   outbox: ${f(outboxCount(dataDir, tracker))} of ${f(tracker.admitted.size)} admitted emails delivered by now; ${backlogText(await pipelineBacklog(control))}`);
  const sent = sentLatencies(dataDir, tracker.ofPhase(2));
  console.log(`   accepted → sent (phase 2, 202 → outbox file written): p50 ${f(sent.p50)} ms, p99 ${f(sent.p99)} ms, max ${f(sent.max)} ms; ${f(sent.unsent)} not in the outbox`);

  // Summary.
  const median = percentile(sortedSeconds, 50);
  const rateMet = open.sustained >= rate * 0.99 && median >= rate * 0.99 && open.behind === 0;
  const lagMet = open.lag.p99 < TARGET_LAG_P99_MS;
  const lostResult = lost.lost.length === 0 && drained ? 'met' : drained || droppedFromList.length > 0 ? 'MISSED' : 'not determined (not drained)';
  const rssMet = rss !== null && rss.deviation <= TARGET_RSS_BAND;
  const row = (target: string, measured: string, result: boolean | string) =>
    console.log(`${target.padEnd(36)} ${measured.padEnd(58)} ${typeof result === 'string' ? result : result ? 'met' : 'MISSED'}`);
  console.log(`\nsummary (${OPEN_SECONDS} s open loop at ${f(rate)}/s offered; figures from a shared machine are indicative)`);
  console.log(`${'target'.padEnd(36)} ${'measured'.padEnd(58)} result`);
  row(`CPU per email ≤ ${TARGET_CPU_MS} ms`, `${cpuText(runs)} (phase 1)`, cpuPerEmail <= TARGET_CPU_MS);
  row(`≤ ${TARGET_MAIN_STATEMENTS} SQL statements per email, main`, `${f(mainStatements, 1)}`, mainStatements <= TARGET_MAIN_STATEMENTS);
  row(`${f(rate)} admissions/s sustained (offered)`, `${f(open.sustained)}/s (per second median ${f(median)}, min ${f(sortedSeconds[0])}), ${f(open.behind)} behind`, rateMet);
  row(`projection lag p99 < ${TARGET_LAG_P99_MS} ms`, `p99 ${f(open.lag.p99)} ms (p50 ${f(open.lag.p50)}, max ${f(open.lag.max)})`, lagMet);
  row(`accepted → sent p99 < ${TARGET_SENT_P99_MS} ms`, `p99 ${f(sent.p99)} ms (p50 ${f(sent.p50)}), ${f(sent.unsent)} unsent`, sent.p99 < TARGET_SENT_P99_MS);
  row('0 emails lost', drained ? `${lost.lost.length} lost of ${f(tracker.admitted.size)}` : `${lost.lost.length} of ${f(tracker.admitted.size)} unlisted after ${DRAIN_SECONDS} s`, lostResult);
  row(`server RSS flat within ±${TARGET_RSS_BAND * 100} %`, rss === null ? 'n/a' : `${f(rss.min)}–${f(rss.max)} MiB, mean ${f(rss.mean)}, ±${f(rss.deviation * 100, 1)}%`, rssMet);
  console.log('(sustained counts as met from 99% of the target on: an open loop offering exactly the target rate cannot exceed it)');
}

// Last: everything above is initialized by now.
if (process.argv[2] === 'serve') {
  await serveRelay(process.argv[3]);
} else {
  await main();
}
