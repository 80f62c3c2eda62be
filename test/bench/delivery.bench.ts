// Delivery latency and throughput: what `relay start` (API + forwarder + projector + sender +
// retention in one process, embedded stores) takes from accepting an email to handing it to a
// smarthost, through the `smtp` transport (RELAY_DELIVERY=smtp, RELAY_SMTP_URL=smtp://127.0.0.1:<port>?tls=none,
// nodemailer's pool) to a minimal smtp-server sink on loopback.
//
//   node test/bench/delivery.bench.ts          (or: npm run bench -- delivery)
//   BENCH_RATES=1,100 BENCH_SECONDS=20 BENCH_WARMUP_SECONDS=3 BENCH_BACKLOG=6000 BENCH_WORKSPACES=60
//   BENCH_SAMPLE=50 BENCH_DRAIN_TIMEOUT_SECONDS=120 BENCH_CPU_PROF=<dir> (profile the Relay children)
//   BENCH_PHASES=latency,one-process,split (the phases to run, below; default all three)
//   BENCH_PIPELINE_THREAD=1  the forwarder, processors and retention on their own thread, as
//                            `relay start` runs them (the transport then lives on that thread,
//                            so the per-send timings below stay empty)
//
// Three processes: Relay, the sink, and this one (load). The sink records, for every message,
// the email id in its Message-ID (Relay writes `<emailId@domain>`) and Date.now() when the
// message's data ended; this process records Date.now() when each POST /v1/emails answered 202.
// Same machine, same clock: accepted→sent = sink arrival − 202.
//
// 1. Latency: for each rate in BENCH_RATES, an open-loop load (a POST is started on schedule,
//    whether or not earlier ones were answered) for BENCH_WARMUP_SECONDS, then BENCH_SECONDS
//    measured; every email started in the measured window counts, and the run waits until the
//    sink has them all. "sends/s" is what the sink received per second during that window. A
//    sample of BENCH_SAMPLE emails is read back with GET /v1/emails/{id}: `sentAt − createdAt`
//    cross-checks the figure (it also counts admission before the 202 and recording the
//    outcome after the sink's reply), and the `email.processing` timeline entry (the claim)
//    splits it into queueing before the claim, and claim → sink (body, DKIM, SMTP).
// 2. Throughput: BENCH_BACKLOG emails are admitted while Relay runs without its sender (every
//    part but `sender`); Relay is then restarted with every part, and the sender drains the
//    backlog through the same pool. The figure is the sink's rate between its 10th and 90th
//    percentile arrivals (the steady part: no start-up, no tail). The new events the sender
//    appends are forwarded and projected meanwhile, as in production.
// 3. Throughput, sender in its own process (`split`): as 2, on a fresh backlog, but drained as
//    in distributed mode: one Relay child runs the sender only (`relay processor sender`),
//    another every other part (forwarder, projector, retention, api), which keeps forwarding
//    and projecting the sender's events. Both on the same embedded data dir (the sqlite log
//    coordinates consumer groups across processes). Same figure, and each child's stats.
//
// Where the time goes: the Relay child reports, per measured window, its event-loop
// utilization and delay and how long each transport.send took (nodemailer's pool queue + the
// SMTP transaction; the bench wraps the transport instance, Relay's code is unchanged).
// BENCH_CPU_PROF=<dir> also runs the Relay children under `node --cpu-prof` and prints a
// summary of each profile (test/bench/cpu-profile.ts; `node test/bench/cpu-profile.ts <file>`).
//
// Rate limits and quotas are real: emails go round-robin over BENCH_WORKSPACES activated
// workspaces with two production keys each (100/s per key, 200/s per workspace, 5,000
// recipients per workspace-month), so that they are not what is measured. One recipient per
// email: one email is one SMTP transaction.
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Pool } from 'undici';
import { askStats, percentile, stopChild } from './bench-child.ts';

const PIPELINE_THREAD = process.env.BENCH_PIPELINE_THREAD === '1';
const RATES = (process.env.BENCH_RATES ?? '1,100').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const BACKLOG = Number(process.env.BENCH_BACKLOG ?? 6000);
const WORKSPACES = Number(process.env.BENCH_WORKSPACES ?? 60);
const SAMPLE = Number(process.env.BENCH_SAMPLE ?? 50);
const DRAIN_TIMEOUT_SECONDS = Number(process.env.BENCH_DRAIN_TIMEOUT_SECONDS ?? 120);
const CPU_PROF = process.env.BENCH_CPU_PROF ? resolve(process.env.BENCH_CPU_PROF) : null;
const PHASE_NAMES = ['latency', 'one-process', 'split'] as const;
type Phase = (typeof PHASE_NAMES)[number];
const PHASES = new Set((process.env.BENCH_PHASES ?? PHASE_NAMES.join(',')).split(',').map((p) => p.trim()).filter(Boolean));
for (const p of PHASES) {
  if (!(PHASE_NAMES as readonly string[]).includes(p)) throw new Error(`BENCH_PHASES: unknown phase ${p} (known: ${PHASE_NAMES.join(', ')})`);
}
const runs = (phase: Phase) => PHASES.has(phase);

/** Which parts a Relay child runs: `relay start`, all but the sender, or the sender alone. */
type Layout = 'all' | 'no-sender' | 'sender';

interface Ready { url: string; keys: string[]; domains: string[]; parts?: string[] }
/** [email id, arrival ms since the epoch] */
type Arrival = [string, number];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------
// The sink (child process): takes every message, answers 250, reports arrivals in batches.

async function serveSink(): Promise<void> {
  const { SMTPServer } = await import('smtp-server');
  let arrivals: Arrival[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    hideDSN: false,
    disableReverseLookup: true,
    logger: false,
    closeTimeout: 200,
    onData(stream, _session, callback) {
      // The Message-ID is in the header, near the start: keep the first 16 KiB only.
      let head = '';
      stream.on('data', (chunk: Buffer) => {
        if (head.length < 16_384) head += chunk.toString('latin1');
      });
      stream.on('end', () => {
        const at = Date.now();
        const id = /\r\nMessage-ID:\s*<([^@>]+)@/i.exec(head)?.[1] ?? '?';
        arrivals.push([id, at]);
        callback(null, 'Ok: queued');
      });
    },
  });
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  // Batched so that reporting costs next to nothing per message; times are taken at arrival.
  setInterval(() => {
    if (arrivals.length === 0) return;
    process.send!(arrivals);
    arrivals = [];
  }, 100);
  process.send!({ port: (server.server.address() as { port: number }).port });
  process.on('SIGTERM', () => process.exit(0));
  process.on('disconnect', () => process.exit(0));
}

// ---------------------------------------------------------------------------------------
// Relay (child process): `relay start`'s parts, smtp transport to the sink.

async function serveRelay(dataDir: string, sinkPort: string, mode: 'setup' | 'resume', layout: Layout): Promise<void> {
  // Orphaned (the bench process died): stop rather than keep serving.
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  const { loadConfig } = await import('../../infra/config.ts');
  const { startRelay, ALL_PARTS } = await import('../../apps/relay.ts');
  const { benchTenants } = await import('./bench-tenants.ts');
  const parts = layout === 'all' ? ALL_PARTS : layout === 'sender' ? ALL_PARTS.filter((p) => p === 'sender') : ALL_PARTS.filter((p) => p !== 'sender');
  const relay = await startRelay(loadConfig({
    RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'error', PORT: '0',
    RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${sinkPort}?tls=none`,
    // Any free port for a part that listens besides the API (the feedback SMTP server).
    RELAY_INBOUND_SMTP_PORT: '0',
  }), parts, { pipelineThread: PIPELINE_THREAD });
  let stopping = false;
  process.on('SIGTERM', () => {
    if (stopping) return;
    stopping = true;
    setTimeout(() => process.exit(1), 15_000).unref();
    relay.stop().then(() => process.exit(0), () => process.exit(1));
  });
  const { keys, domains } = mode === 'setup'
    ? await benchTenants(relay, { workspaces: WORKSPACES, keysPerWorkspace: 2, domainOf: (w) => `w${w}.bench.test`, permissions: ['email:send', 'email:read'] })
    : { keys: [] as string[], domains: [] as string[] };
  instrument(relay.services.transport());
  process.send!({ url: relay.url!, keys, domains, parts } satisfies Ready);
}

/** What the Relay process saw between a stats-reset and a stats request (bench instrumentation only). */
interface RelayStats {
  /** Share of wall time the event loop was busy. */
  utilization: number;
  loopDelayP50: number; loopDelayP99: number; loopDelayMax: number;
  /** transport.send: nodemailer's pool queue + the SMTP transaction, per message. */
  sends: number; sendP50: number; sendP99: number; maxConcurrentSends: number;
}

/**
 * Wraps the transport instance the sender already holds (it calls `transport.send` on each
 * message), and watches the event loop; answers {stats} on IPC. Changes nothing Relay does.
 */
function instrument(transport: { send(m: unknown): Promise<unknown> }): void {
  const original = transport.send.bind(transport);
  let sendTimes: number[] = [];
  let concurrent = 0;
  let maxConcurrent = 0;
  transport.send = async (m: unknown) => {
    const started = performance.now();
    maxConcurrent = Math.max(maxConcurrent, ++concurrent);
    try {
      return await original(m);
    } finally {
      concurrent--;
      sendTimes.push(performance.now() - started);
    }
  };
  const delay = monitorEventLoopDelay({ resolution: 10 });
  const late = (ns: number) => Math.max(0, ns / 1e6 - 10);
  delay.enable();
  let elu = performance.eventLoopUtilization();
  process.on('message', (m: { cmd?: string }) => {
    if (m.cmd === 'stats-reset') {
      sendTimes = [];
      maxConcurrent = concurrent;
      delay.reset();
      elu = performance.eventLoopUtilization();
    } else if (m.cmd === 'stats') {
      const sorted = [...sendTimes].sort((a, b) => a - b);
      process.send!({
        stats: {
          utilization: performance.eventLoopUtilization(elu).utilization,
          // The histogram times a 10 ms timer: what is past 10 ms is delay.
          loopDelayP50: late(delay.percentile(50)), loopDelayP99: late(delay.percentile(99)), loopDelayMax: late(delay.max),
          sends: sorted.length, sendP50: percentile(sorted, 50), sendP99: percentile(sorted, 99), maxConcurrentSends: maxConcurrent,
        } satisfies RelayStats,
      });
    }
  });
}

const relayStats = (c: ChildProcess) => askStats<RelayStats>(c);

// ---------------------------------------------------------------------------------------
// This process: children, load, figures.

/** Children still running: killed if this process exits without having stopped them. */
const children = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

function child(args: string[], profile: boolean): ChildProcess {
  const execArgv = profile && CPU_PROF ? [...process.execArgv, '--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`] : process.execArgv;
  const c = fork(fileURLToPath(import.meta.url), args, { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv });
  children.add(c);
  c.once('exit', () => children.delete(c));
  return c;
}

function firstMessage<T>(c: ChildProcess, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`${what} exited with ${code} before it was ready`));
    c.once('exit', onExit);
    c.once('message', (m) => {
      c.off('exit', onExit);
      resolve(m as T);
    });
  });
}


/** The newest profile a child wrote since `since` (node names them CPU.<date>.<time>.<pid>.…). */
function newestProfile(pid: number | undefined, since: number): string | null {
  if (!CPU_PROF || pid === undefined) return null;
  const files = readdirSync(CPU_PROF).filter((f) => f.endsWith('.cpuprofile') && f.includes(`.${pid}.`))
    .map((f) => join(CPU_PROF, f)).filter((f) => statSync(f).mtimeMs >= since);
  return files.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0] ?? null;
}

class Sink {
  readonly arrivals = new Map<string, number>();
  /** Every arrival in order of report (ids are unique, but count repeats too). */
  readonly times: number[] = [];
  duplicates = 0;
  unknown = 0;
  readonly process: ChildProcess;
  readonly port: number;
  constructor(process: ChildProcess, port: number) {
    this.process = process;
    this.port = port;
    process.on('message', (batch) => {
      for (const [id, at] of batch as Arrival[]) {
        if (id === '?') this.unknown++;
        else if (this.arrivals.has(id)) this.duplicates++;
        else this.arrivals.set(id, at);
        this.times.push(at);
      }
    });
  }
  static async start(): Promise<Sink> {
    const c = child(['sink'], false);
    const { port } = await firstMessage<{ port: number }>(c, 'sink');
    return new Sink(c, port);
  }
  /** Waits until every id arrived, or nothing new came for `stallMs`, or `timeoutMs` passed. */
  async waitFor(ids: string[], timeoutMs: number, stallMs = 10_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    let seen = -1;
    let lastProgress = Date.now();
    for (;;) {
      const missing = ids.filter((id) => !this.arrivals.has(id)).length;
      if (missing === 0 || Date.now() > deadline) return missing;
      if (missing !== seen) {
        seen = missing;
        lastProgress = Date.now();
      } else if (Date.now() - lastProgress > stallMs) return missing;
      await sleep(100);
    }
  }
}

interface Sent { id: string; key: string; acceptedAt: number }

function bodiesFor(ready: Ready): string[] {
  return ready.domains.map((domain, i) => JSON.stringify({
    from: `Acme <noreply@${domain}>`, to: [`user${i}@example.com`],
    subject: 'Your order has shipped', text: 'Hello, your order 1234 is on its way.', html: '<p>Hello, your order <b>1234</b> is on its way.</p>',
    tags: { kind: 'shipping' }, metadata: { orderId: 1234 },
  }));
}

/** POST /v1/emails; resolves at the 202 (undici resolves once the status line and headers are in). */
async function postEmail(pool: Pool, ready: Ready, bodies: string[], n: number, statuses: Record<string, number>): Promise<Sent | null> {
  const i = n % ready.keys.length;
  const response = await pool.request({
    path: '/v1/emails', method: 'POST', body: bodies[i],
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ready.keys[i]}` },
  });
  const acceptedAt = Date.now();
  statuses[response.statusCode] = (statuses[response.statusCode] ?? 0) + 1;
  const body = (await response.body.json()) as { id?: string };
  return response.statusCode === 202 && body.id ? { id: body.id, key: ready.keys[i], acceptedAt } : null;
}


interface Breakdown { n: number; total: number[]; queued: number[]; smtp: number[]; record: number[]; admit: number[] }

/** GET /v1/emails/{id} on an even sample: sentAt − createdAt, and where between them the claim was. */
async function crossCheck(pool: Pool, sink: Sink, sent: Sent[], size: number): Promise<Breakdown> {
  const step = Math.max(1, Math.floor(sent.length / size));
  const out: Breakdown = { n: 0, total: [], queued: [], smtp: [], record: [], admit: [] };
  for (let i = 0; i < sent.length && out.n < size; i += step) {
    const s = sent[i];
    const response = await pool.request({ path: `/v1/emails/${s.id}`, method: 'GET', headers: { authorization: `Bearer ${s.key}` } });
    const d = (await response.body.json()) as { createdAt: string; sentAt: string | null; events?: Array<{ type: string; occurredAt: string }> };
    if (response.statusCode !== 200 || !d.sentAt) continue;
    const created = Date.parse(d.createdAt);
    const sentAt = Date.parse(d.sentAt);
    const claimed = Date.parse(d.events?.find((e) => e.type === 'email.processing')?.occurredAt ?? '');
    const arrived = sink.arrivals.get(s.id);
    out.n++;
    out.total.push(sentAt - created);
    out.admit.push(s.acceptedAt - created);
    if (!Number.isNaN(claimed) && arrived !== undefined) {
      out.queued.push(claimed - created);
      out.smtp.push(arrived - claimed);
      out.record.push(sentAt - arrived);
    }
  }
  for (const list of [out.total, out.queued, out.smtp, out.record, out.admit]) list.sort((a, b) => a - b);
  return out;
}

interface LatencyResult {
  rate: number; emails: number; missing: number; p50: number; p95: number; p99: number; max: number;
  sendsPerSecond: number; statuses: Record<string, number>; check: Breakdown; relay: RelayStats;
}

async function latencyRun(relay: ChildProcess, ready: Ready, sink: Sink, rate: number): Promise<LatencyResult> {
  const pool = new Pool(ready.url, { connections: 64, pipelining: 1 });
  const bodies = bodiesFor(ready);
  const statuses: Record<string, number> = {};
  const warmup = Math.round(rate * WARMUP_SECONDS);
  const total = warmup + Math.round(rate * SECONDS);
  const measured: Array<Promise<Sent | null>> = [];
  const others: Array<Promise<Sent | null>> = [];
  const start = Date.now();
  const windowStart = start + (warmup * 1000) / rate;
  for (let n = 0; n < total; n++) {
    // Open loop: each POST starts at its time, answered or not (behind schedule: at once).
    const wait = start + (n * 1000) / rate - Date.now();
    if (wait > 0) await sleep(wait);
    if (n === warmup) relay.send({ cmd: 'stats-reset' });
    (n < warmup ? others : measured).push(postEmail(pool, ready, bodies, n, n < warmup ? {} : statuses));
  }
  const windowEnd = start + (total * 1000) / rate;
  const sent = (await Promise.all(measured)).filter((s): s is Sent => s !== null);
  await Promise.all(others);
  const missing = await sink.waitFor(sent.map((s) => s.id), 60_000);
  const latencies = sent.filter((s) => sink.arrivals.has(s.id)).map((s) => sink.arrivals.get(s.id)! - s.acceptedAt).sort((a, b) => a - b);
  const inWindow = sink.times.filter((t) => t >= windowStart && t < windowEnd).length;
  const relayStatsNow = await relayStats(relay);
  const check = await crossCheck(pool, sink, sent, SAMPLE);
  await pool.close();
  return {
    rate, emails: sent.length, missing, p50: percentile(latencies, 50), p95: percentile(latencies, 95), p99: percentile(latencies, 99),
    max: latencies[latencies.length - 1], sendsPerSecond: inWindow / ((windowEnd - windowStart) / 1000), statuses, check, relay: relayStatsNow,
  };
}

interface ThroughputResult {
  backlog: number; admitted: number; admitPerSecond: number; received: number; missing: number;
  steadyPerSecond: number; overallPerSecond: number; firstAfterStartMs: number; statuses: Record<string, number>;
  /** Each draining Relay child's stats over the drain, by label (one-process: one child). */
  relays: Array<[string, RelayStats]>;
  /** The parts each draining child ran. */
  parts: string[][];
}

/** How the backlog is drained: `relay start`, or the sender in its own process next to every other part. */
type DrainLayout = 'one-process' | 'split';

async function throughputRun(sink: Sink, dataDir: string, layout: DrainLayout): Promise<{ result: ThroughputResult; profiles: Array<[string, string | null]> }> {
  sink.arrivals.clear();
  sink.times.length = 0;
  // Admission with every part but the sender: the backlog waits in the log.
  const admitting = child(['relay', dataDir, String(sink.port), 'setup', 'no-sender'], false);
  const statuses: Record<string, number> = {};
  const sent: Sent[] = [];
  let admitPerSecond: number;
  try {
    const ready = await firstMessage<Ready>(admitting, 'relay (no sender)');
    const pool = new Pool(ready.url, { connections: 32, pipelining: 1 });
    const bodies = bodiesFor(ready);
    let next = 0;
    const began = Date.now();
    await Promise.all(Array.from({ length: 32 }, async () => {
      while (next < BACKLOG) {
        const s = await postEmail(pool, ready, bodies, next++, statuses);
        if (s) sent.push(s);
      }
    }));
    admitPerSecond = sent.length / ((Date.now() - began) / 1000);
    await pool.close();
  } finally {
    await stopChild(admitting);
  }
  if (sink.arrivals.size > 0) throw new Error('the sink received mail while Relay ran without its sender');

  // The sender drains the backlog: in `relay start`, or in its own process (started after the
  // other one, which keeps forwarding and projecting what it appends).
  const since = Date.now();
  const draining: Array<[string, ChildProcess]> = layout === 'one-process'
    ? [['relay process', child(['relay', dataDir, String(sink.port), 'resume', 'all'], true)]]
    : [
      ['sender process', child(['relay', dataDir, String(sink.port), 'resume', 'sender'], true)],
      ['other parts\' process', child(['relay', dataDir, String(sink.port), 'resume', 'no-sender'], true)],
    ];
  let missing: number;
  const relays: Array<[string, RelayStats]> = [];
  let partsOf: string[][];
  try {
    partsOf = (await Promise.all(draining.map(([label, c]) => firstMessage<Ready>(c, `relay (${label})`)))).map((r) => r.parts ?? []);
    for (const [, c] of draining) c.send({ cmd: 'stats-reset' });
    missing = await sink.waitFor(sent.map((s) => s.id), DRAIN_TIMEOUT_SECONDS * 1000);
    for (const [label, c] of draining) relays.push([label, await relayStats(c)]);
  } finally {
    // The sender first: the other process still forwards and projects its last events.
    for (const [, c] of draining) await stopChild(c);
  }
  const times = sent.map((s) => sink.arrivals.get(s.id)).filter((t): t is number => t !== undefined).sort((a, b) => a - b);
  const lo = Math.floor(times.length * 0.1);
  const hi = Math.floor(times.length * 0.9);
  const name = layout === 'one-process' ? 'relay start' : 'split';
  return {
    result: {
      backlog: BACKLOG, admitted: sent.length, admitPerSecond, received: times.length, missing,
      steadyPerSecond: hi > lo ? (hi - lo) / ((times[hi] - times[lo]) / 1000) : NaN,
      overallPerSecond: times.length > 1 ? (times.length - 1) / ((times[times.length - 1] - times[0]) / 1000) : NaN,
      firstAfterStartMs: times.length > 0 ? times[0] - since : NaN,
      statuses, relays, parts: partsOf,
    },
    profiles: draining.map(([label, c]) => [
      layout === 'one-process' ? 'relay start, draining the backlog' : `${name}, ${label} draining the backlog`,
      newestProfile(c.pid, since),
    ]),
  };
}

const f = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : '—');

async function main(): Promise<void> {
  if (CPU_PROF) mkdirSync(CPU_PROF, { recursive: true });
  const dirs: string[] = [];
  const dir = () => {
    const d = mkdtempSync(join(tmpdir(), 'relay-bench-delivery-'));
    dirs.push(d);
    return d;
  };
  const sink = await Sink.start();
  const latency: LatencyResult[] = [];
  const profiles: Array<[string, string | null]> = [];
  const throughputs: Array<[DrainLayout, ThroughputResult]> = [];
  try {
    if (runs('latency')) {
      const since = Date.now();
      const relay = child(['relay', dir(), String(sink.port), 'setup', 'all'], true);
      try {
        const ready = await firstMessage<Ready>(relay, 'relay');
        for (const rate of RATES) {
          latency.push(await latencyRun(relay, ready, sink, rate));
          await sleep(1000);
        }
      } finally {
        await stopChild(relay);
      }
      profiles.push(['relay start, latency runs', newestProfile(relay.pid, since)]);
    }
    if (BACKLOG > 0) {
      for (const layout of ['one-process', 'split'] as const) {
        if (!runs(layout)) continue;
        const { result, profiles: drained } = await throughputRun(sink, dir(), layout);
        throughputs.push([layout, result]);
        profiles.push(...drained);
      }
    }
  } finally {
    await stopChild(sink.process);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }

  const cpu = cpus();
  console.log(`delivery: node ${process.version}, ${cpu.length} × ${cpu[0]?.model.trim()}; relay start (embedded) → smtp transport → smtp-server sink on 127.0.0.1`);
  if (runs('latency')) {
    console.log(`latency: open loop, ${SECONDS} s measured after ${WARMUP_SECONDS} s warm-up per rate; accepted→sent = sink arrival − 202`);
    console.log(`${'offered/s'.padStart(9)} ${'emails'.padStart(7)} ${'p50 ms'.padStart(8)} ${'p95 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'max ms'.padStart(8)} ${'sends/s'.padStart(8)} ${'missing'.padStart(8)}  statuses`);
    for (const r of latency) {
      console.log(`${String(r.rate).padStart(9)} ${String(r.emails).padStart(7)} ${f(r.p50).padStart(8)} ${f(r.p95).padStart(8)} ${f(r.p99).padStart(8)} ${f(r.max).padStart(8)} ${f(r.sendsPerSecond).padStart(8)} ${String(r.missing).padStart(8)}  ${JSON.stringify(r.statuses)}`);
    }
    console.log(`cross-check, GET /v1/emails/{id} on a sample (ms, p50 / p95): sentAt − createdAt; split at the claim: createdAt→claimed, claimed→sink, sink→sentAt; 202 − createdAt`);
    for (const r of latency) {
      const c = r.check;
      const two = (l: number[]) => `${f(percentile(l, 50), 0)} / ${f(percentile(l, 95), 0)}`;
      console.log(`${String(r.rate).padStart(9)}/s  n=${c.n}  total ${two(c.total)}  queued ${two(c.queued)}  claim→sink ${two(c.smtp)}  sink→sentAt ${two(c.record)}  admission ${two(c.admit)}`);
    }
  }
  const loop = (label: string, r: RelayStats) => console.log(`${label}  event loop busy ${f(r.utilization * 100, 0)}%, delay p50/p99/max ${f(r.loopDelayP50)} / ${f(r.loopDelayP99)} / ${f(r.loopDelayMax)} ms; transport.send (pool queue + SMTP) p50/p99 ${f(r.sendP50)} / ${f(r.sendP99)} ms, ≤ ${r.maxConcurrentSends} at once`);
  if (runs('latency')) {
    console.log('relay process during each measured window:');
    for (const r of latency) loop(`${String(r.rate).padStart(9)}/s`, r.relay);
  }
  for (const [layout, t] of throughputs) {
    const by = layout === 'one-process' ? 'relay start' : `the sender in its own process + one process with every other part (${t.parts.map((p) => `[${p.join(',')}]`).join(' + ')})`;
    const heading = layout === 'one-process' ? 'throughput' : 'throughput, split';
    console.log(`${heading}: ${t.admitted} of ${t.backlog} emails admitted (${f(t.admitPerSecond, 0)}/s, sender off, ${JSON.stringify(t.statuses)}), then drained by ${by}`);
    console.log(`  sink received ${t.received} (${t.missing} missing), first ${f(t.firstAfterStartMs, 0)} ms after the restart`);
    console.log(`  steady (10th→90th percentile arrival): ${f(t.steadyPerSecond, 0)} messages/s; first→last: ${f(t.overallPerSecond, 0)} messages/s`);
    for (const [label, r] of t.relays) loop(`  ${label} while draining:`, r);
  }
  if (throughputs.length > 1) {
    console.log(`drain, steady messages/s: ${throughputs.map(([layout, t]) => `${layout} ${f(t.steadyPerSecond, 0)}`).join(', ')}`);
  }
  if (sink.duplicates > 0 || sink.unknown > 0) console.log(`note: the sink saw ${sink.duplicates} repeated Message-IDs and ${sink.unknown} messages without one`);
  if (CPU_PROF) {
    const { printProfileSummary } = await import('./cpu-profile.ts');
    for (const [label, file] of profiles) {
      if (file) printProfileSummary(label, file);
      else console.log(`\n${label}: no profile found in ${CPU_PROF}`);
    }
  }
  const failed = latency.some((r) => r.missing > 0 || r.emails === 0) || throughputs.some(([, t]) => t.missing > 0);
  if (failed) {
    console.log('some emails never reached the sink (see missing)');
    process.exitCode = 1;
  }
}

// Last: everything above is initialized by now.
if (process.argv[2] === 'sink') {
  await serveSink();
} else if (process.argv[2] === 'relay') {
  await serveRelay(process.argv[3], process.argv[4], process.argv[5] as 'setup' | 'resume', process.argv[6] as Layout);
} else {
  await main();
}
