// Admission throughput and latency: POST /v1/emails on the embedded stores against a bare
// fastify route that parses the same JSON and answers 202, on the same machine in the same
// run, under the same closed-loop load (undici Pool, fixed connections, fixed duration).
// Each server runs in its own child process; this process only generates load.
//
//   node test/bench/admission.bench.ts          (or: npm run bench)
//   BENCH_CONNECTIONS=1,32 BENCH_SECONDS=5 BENCH_WARMUP_SECONDS=1 BENCH_WORKSPACES=40 BENCH_RUNS=5
//   BENCH_SQL_STATS=1   also count the SQL statements per admission (test/bench/sql-stats.ts; off by
//                       default: counting costs CPU the share would then include)
//   BENCH_API_PROCESSES=2  POST /v1/emails on that many API processes, each on a data directory of its
//                       own, the load spread over them: what both cores give when nothing is shared
//                       (a ceiling for any split of admission over processes, not a way to run Relay)
//   BENCH_FLOOR=1       also load the floor of a durable admission on this stack (./admission-floor.ts:
//                       fastify, node:sqlite and node:crypto doing an admission's essential work, none of
//                       Relay's code) in every round, and print its share of the bare route too
//
// Both servers run for the whole bench; each of BENCH_RUNS rounds loads the bare route, then
// POST /v1/emails, at each connection count, so that the two are measured alternately, close in
// time, and each round's share of the bare route compares like with like; the median share is
// the figure.
//
// One connection shows the time one admission takes; 32 show throughput under saturation
// (where latency is mostly queueing: connections ÷ throughput). Each run also prints the
// server's CPU time per request and how much of the machine's CPU the hypervisor took
// (steal): on a shared VM a rate only compares with runs that got as much CPU.
//
// Rate limits and quotas are real: the load is spread over BENCH_WORKSPACES workspaces with
// two production keys each (200 requests per second per workspace), so that the limits are
// not what is measured. Only the API part runs (as `relay api` does); the forwarder and the
// projector are not competing for the cores.
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { askStats, closedLoop, machineCpu, machineText, percentile, processCpuSeconds, sendEmailRequest, type MachineCpu } from './bench-child.ts';
import { sqlTotal, type SqlStats } from './sql-stats.ts';

const CONNECTIONS = (process.env.BENCH_CONNECTIONS ?? '1,32').split(',').map(Number);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
const WORKSPACES = Number(process.env.BENCH_WORKSPACES ?? 40);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const SQL_STATS = process.env.BENCH_SQL_STATS === '1';
const API_PROCESSES = Number(process.env.BENCH_API_PROCESSES ?? 1);
const FLOOR = process.env.BENCH_FLOOR === '1';

interface Ready { url: string; keys: string[]; domains: string[] }

// ---------------------------------------------------------------------------------------
// Servers (child processes)

async function serveBare(): Promise<Ready> {
  const { default: Fastify } = await import('fastify');
  const { MAX_REQUEST_BYTES } = await import('../../apps/api/server.ts');
  const app = Fastify({ logger: false, bodyLimit: MAX_REQUEST_BYTES });
  let n = 0;
  app.post('/v1/emails', async (request, reply) => {
    void request.body;
    return reply.status(202).send({ id: `em_${++n}`, status: 'queued', test_mode: false });
  });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { url, keys: ['bare'], domains: ['bare.example.test'] };
}

async function serveRelay(dataDir: string): Promise<Ready> {
  const { loadConfig } = await import('../../infra/config.ts');
  const { startRelay } = await import('../../apps/relay.ts');
  const { benchTenants } = await import('./bench-tenants.ts');
  const sql = await import('./sql-stats.ts');
  if (SQL_STATS) sql.countSql();
  const relay = await startRelay(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent', PORT: '0' }), ['api']);
  const { keys, domains } = await benchTenants(relay, { workspaces: WORKSPACES, keysPerWorkspace: 2, domainOf: (w) => `w${w}.bench.test` });
  process.on('message', (m: { cmd?: string }) => {
    if (m.cmd === 'sql-reset') sql.resetSqlStats();
    else if (m.cmd === 'sql-stats') process.send!({ stats: sql.sqlStats() });
  });
  process.on('SIGTERM', () => void relay.stop().then(() => process.exit(0)));
  return { url: relay.url!, keys, domains };
}


// ---------------------------------------------------------------------------------------
// Load (this process)

function startServer(kind: 'bare' | 'relay' | 'floor', dataDir: string): Promise<{ child: ChildProcess; ready: Ready }> {
  const child = fork(fileURLToPath(import.meta.url), ['serve', kind, dataDir], { execArgv: process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (ready) => resolve({ child, ready: ready as Ready }));
    child.once('exit', (code) => reject(new Error(`${kind} server exited with ${code}`)));
  });
}

interface Result {
  name: string; requests: number; seconds: number; p50: number; p95: number; p99: number; statuses: Record<string, number>;
  /** The server process's CPU time per answered request over the measured window (ms, every thread); NaN where not measurable. */
  cpuMsPerRequest: number;
  machine: string;
  /** The server's SQL over the measured window (BENCH_SQL_STATS=1, POST /v1/emails only). */
  sql: SqlStats | null;
}


interface Server { child: ChildProcess; ready: Ready }

/** The closed loop against the servers together, each taking every n-th request on a pool of its own. */
async function load(name: string, servers: Server[], connections: number): Promise<Result> {
  const [{ child: server }] = servers;
  const pools = servers.map(({ ready }) => new Pool(ready.url, { connections: Math.ceil(connections / servers.length), pipelining: 1 }));
  const requests = servers.map(({ ready }, s) => sendEmailRequest(pools[s], ready.keys, ready.domains.map((domain, i) => JSON.stringify({
    from: `Acme <noreply@${domain}>`, to: [`user${i}@example.com`], cc: `audit@example.com`,
    subject: 'Your order has shipped', text: 'Hello, your order 1234 is on its way.', html: '<p>Hello, your order <b>1234</b> is on its way.</p>',
    tags: { kind: 'shipping' }, metadata: { orderId: 1234 },
  }))));
  const cpuOfServers = () => {
    const each = servers.map(({ child }) => processCpuSeconds(child.pid!));
    return each.includes(null) ? null : (each as number[]).reduce((a, b) => a + b, 0);
  };
  let cpuAtStart: number | null = null;
  let cpuUsed = NaN;
  let machineAtStart: MachineCpu | null = null;
  let machine = '';
  const counted = SQL_STATS && name.startsWith('POST') && servers.length === 1;
  let sql: SqlStats | null = null;
  const run = await closedLoop({
    connections, warmupSeconds: WARMUP_SECONDS, seconds: SECONDS,
    onMeasure: () => {
      if (counted) server.send({ cmd: 'sql-reset' });
      cpuAtStart = cpuOfServers();
      machineAtStart = machineCpu();
    },
    onMeasured: async () => {
      const cpu = cpuOfServers();
      if (cpu !== null && cpuAtStart !== null) cpuUsed = cpu - cpuAtStart;
      machine = machineText(machineAtStart, machineCpu());
      if (counted) sql = await askStats<SqlStats>(server, 'sql-stats');
    },
    request: (n) => requests[n % servers.length](Math.floor(n / servers.length)),
  });
  await Promise.all(pools.map((pool) => pool.close()));
  const { latencies, seconds, statuses } = run;
  return {
    name, requests: latencies.length, seconds, p50: percentile(latencies, 50), p95: percentile(latencies, 95), p99: percentile(latencies, 99), statuses,
    cpuMsPerRequest: (cpuUsed * 1000) / latencies.length, machine, sql,
  };
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-'));
  const servers: Array<{ child: ChildProcess; ready: Ready }> = [];
  /** [round][connections index] → bare, relay and (BENCH_FLOOR=1) floor results. */
  const rounds: Array<Array<{ bare: Result; relay: Result; floor?: Result }>> = [];
  try {
    servers.push(await startServer('bare', dataDir));
    const floor = FLOOR ? await startServer('floor', mkdtempSync(join(dataDir, 'floor-'))) : null;
    for (let p = 0; p < API_PROCESSES; p++) servers.push(await startServer('relay', API_PROCESSES === 1 ? dataDir : mkdtempSync(join(dataDir, `api${p}-`))));
    const [bare, ...relays] = servers;
    if (floor) servers.push(floor);
    const relayName = API_PROCESSES === 1 ? 'POST /v1/emails (embedded)' : `POST /v1/emails (${API_PROCESSES} processes)`;
    for (let round = 1; round <= RUNS; round++) {
      const row: Array<{ bare: Result; relay: Result; floor?: Result }> = [];
      for (const connections of CONNECTIONS) {
        row.push({
          bare: await load(`bare fastify route (202), ${connections} conn`, [bare], connections),
          relay: await load(`${relayName}, ${connections} conn`, relays, connections),
          ...(floor ? { floor: await load(`floor of an admission, ${connections} conn`, [floor], connections) } : {}),
        });
      }
      rounds.push(row);
    }
  } finally {
    for (const { child } of servers) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
  const cpu = cpus();
  console.log(`admission: node ${process.version}, ${cpu.length} × ${cpu[0]?.model.trim()}, ${SECONDS} s per run after ${WARMUP_SECONDS} s warm-up, ${RUNS} rounds`);
  console.log(`${'round target'.padEnd(46)} ${'req/s'.padStart(9)} ${'p50 ms'.padStart(8)} ${'p95 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'CPU ms/req'.padStart(11)}  statuses; machine`);
  const rate = (r: Result) => r.requests / r.seconds;
  rounds.forEach((row, round) => {
    for (const pair of row) {
      for (const r of [pair.bare, pair.relay, ...(pair.floor ? [pair.floor] : [])]) {
        const cpuMs = Number.isFinite(r.cpuMsPerRequest) ? r.cpuMsPerRequest.toFixed(3) : 'n/a';
        console.log(`${`${round + 1}  ${r.name}`.padEnd(46)} ${rate(r).toFixed(0).padStart(9)} ${r.p50.toFixed(2).padStart(8)} ${r.p95.toFixed(2).padStart(8)} ${r.p99.toFixed(2).padStart(8)} ${cpuMs.padStart(11)}  ${JSON.stringify(r.statuses)}; ${r.machine.replace(/^machine: /, '')}`);
      }
    }
  });
  console.log('(CPU ms/req: the server process, every thread, over the measured window)');
  CONNECTIONS.forEach((c, i) => {
    const shares = rounds.map((row) => rate(row[i].relay) / rate(row[i].bare)).sort((a, b) => a - b);
    const median = percentile(shares, 50);
    console.log(`${c} conn: POST /v1/emails reaches ${(median * 100).toFixed(1)}% of the bare route's throughput (median of ${shares.length} rounds; each: ${rounds.map((row) => `${((rate(row[i].relay) / rate(row[i].bare)) * 100).toFixed(1)}%`).join(', ')})`);
    if (!FLOOR) return;
    const floorShares = rounds.map((row) => rate(row[i].floor!) / rate(row[i].bare));
    const costs = rounds.map((row) => row[i].relay.cpuMsPerRequest / row[i].floor!.cpuMsPerRequest);
    console.log(`${c} conn: the floor reaches ${(percentile([...floorShares].sort((a, b) => a - b), 50) * 100).toFixed(1)}% (each: ${floorShares.map((s) => `${(s * 100).toFixed(1)}%`).join(', ')}); POST /v1/emails costs ${percentile([...costs].sort((a, b) => a - b), 50).toFixed(2)}× the floor's CPU per request (each: ${costs.map((x) => `${x.toFixed(2)}×`).join(', ')})`);
  });
  if (rounds.some((row) => row.some(({ relay }) => Object.keys(relay.statuses).some((s) => s !== '202')))) console.log('note: some admissions were not 202 (see statuses)');
  if (SQL_STATS) printSql(rounds.at(-1)!.map(({ relay }) => relay));
}

/** Statements per admission (the last round), the costliest first. */
function printSql(results: Result[]): void {
  for (const r of results) {
    if (!r.sql) continue;
    const tally = sqlTotal(r.sql);
    const per = (n: number) => n / r.requests;
    console.log(`${r.name}, last round: per admission ${per(tally.statements).toFixed(1)} SQL statements, ${per(tally.ms).toFixed(3)} ms in them, ${per(tally.transactions).toFixed(3)} write transactions, ${per(tally.writes).toFixed(2)} group-commit writes; the costliest (count, ms):`);
    for (const s of r.sql.statements.slice(0, 12)) console.log(`  ${per(s.count).toFixed(2).padStart(6)} ${per(s.ms).toFixed(3).padStart(7)} ms  ${s.sql}`);
  }
}

// Last: everything above is initialized by now.
if (process.argv[2] === 'serve') {
  const kind = process.argv[3];
  const ready = kind === 'relay' ? await serveRelay(process.argv[4]) : kind === 'floor' ? await (await import('./admission-floor.ts')).serveFloor(process.argv[4]) : await serveBare();
  process.send!(ready);
  process.on('SIGTERM', () => process.exit(0));
} else {
  await main();
}
