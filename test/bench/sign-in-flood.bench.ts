// Sends while sign-ins flood: POST /v1/emails latency (one connection, closed loop, the time one
// admission takes) without sign-ins, then with 32 parallel wrong sign-ins in a closed loop:
//   one address   every attempt from one client address against one account: the throttle's
//                 case (after a few failures they are refused, each refusal held a second);
//   spread        each attempt from another loopback address for another (unknown) account,
//                 so that no throttle ever applies and every attempt is hashed: the hashing's
//                 worst case (one thread hashing all the time, the queue behind it full).
// The API runs alone in its own process (as `relay api` does; an admission's fdatasync runs
// on libuv's thread pool, which scrypt used to share). Printed per run: p50/p95 of the sends,
// the server's CPU per send, the sign-in answers, and how much of the machine the hypervisor
// took (steal), for each of BENCH_ROUNDS rounds of the three; then the medians. Target: with
// either flood the sends' p50 stays within 2× of the quiet one.
//
//   npm run bench -- sign-in-flood      BENCH_SECONDS=5 BENCH_WARMUP_SECONDS=1 BENCH_FLOOD=32 BENCH_ROUNDS=3
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, Pool } from 'undici';
import { closedLoop, machineCpu, machineText, percentile, processCpuSeconds, sendEmailRequest, stopChild, type MachineCpu } from './bench-child.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);
const FLOOD = Number(process.env.BENCH_FLOOD ?? 32);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const VICTIM = 'victim@flood.bench.test';

interface Ready { url: string; keys: string[]; domains: string[] }

async function serve(dataDir: string): Promise<Ready> {
  const { loadConfig } = await import('../../infra/config.ts');
  const { startRelay } = await import('../../apps/relay.ts');
  const { benchTenants } = await import('./bench-tenants.ts');
  const { createUser } = await import('../../apps/services/management/users.ts');
  const relay = await startRelay(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent', PORT: '0', HOST: '127.0.0.1' }), ['api']);
  const tenants = await benchTenants(relay, { workspaces: 4, keysPerWorkspace: 2, domainOf: (w) => `w${w}.flood.bench.test` });
  await createUser(relay.stores.documents, { email: VICTIM, password: 'the right password, for once' }, new Date());
  process.on('SIGTERM', () => void relay.stop().then(() => process.exit(0)));
  return { url: relay.url!, ...tenants };
}

type Flood = 'none' | 'one address' | 'spread';

interface Result {
  flood: Flood; sends: number; p50: number; p95: number; cpuMsPerSend: number; machine: string;
  signIns: Record<string, number>; signInsPerSecond: number;
}

/** `FLOOD` workers posting wrong sign-ins until stopped; returns their answers by status. */
function startFlood(url: string, flood: Exclude<Flood, 'none'>): { stop(): Promise<Record<string, number>>; count: () => number } {
  const statuses: Record<string, number> = {};
  let stopped = false;
  let answered = 0;
  const worker = async (i: number) => {
    let client: Client | null = null;
    let clientAddress = '';
    for (let n = 0; !stopped; n++) {
      // One address per worker for "one address"; for "spread" a new one every 10 attempts
      // (the address throttle allows 20) and a new account every attempt.
      const address = flood === 'one address' ? '127.9.9.9' : `127.${16 + (i % 200)}.${Math.floor(n / 2500) % 250}.${(Math.floor(n / 10) % 250) + 1}`;
      if (address !== clientAddress) {
        await client?.close();
        client = new Client(url, { localAddress: address });
        clientAddress = address;
      }
      const email = flood === 'one address' ? VICTIM : `nobody-${i}-${n}@flood.bench.test`;
      let status: string;
      try {
        const response = await client!.request({
          path: '/v1/session', method: 'POST', headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email, password: 'a wrong password, again' }),
        });
        await response.body.dump();
        status = String(response.statusCode);
      } catch {
        status = 'error';
      }
      statuses[status] = (statuses[status] ?? 0) + 1;
      answered++;
    }
    await client?.close();
  };
  const workers = Array.from({ length: FLOOD }, (_, i) => worker(i));
  return {
    count: () => answered,
    async stop() {
      stopped = true;
      await Promise.all(workers);
      return statuses;
    },
  };
}

async function measure(ready: Ready, server: ChildProcess, flood: Flood): Promise<Result> {
  const floodRun = flood === 'none' ? null : startFlood(ready.url, flood);
  const pool = new Pool(ready.url, { connections: 1, pipelining: 1 });
  const bodies = ready.domains.map((domain, i) => JSON.stringify({
    from: `Acme <noreply@${domain}>`, to: [`user${i}@example.com`], subject: 'Your order has shipped', text: 'Hello, your order 1234 is on its way.',
  }));
  let cpuAtStart: number | null = null;
  let cpuUsed = NaN;
  let machineAtStart: MachineCpu | null = null;
  let machine = '';
  let signInsAtStart = 0;
  let signInsMeasured = 0;
  const run = await closedLoop({
    connections: 1, warmupSeconds: WARMUP_SECONDS, seconds: SECONDS,
    onMeasure: () => {
      cpuAtStart = processCpuSeconds(server.pid!);
      machineAtStart = machineCpu();
      signInsAtStart = floodRun?.count() ?? 0;
    },
    onMeasured: async () => {
      const cpu = processCpuSeconds(server.pid!);
      if (cpu !== null && cpuAtStart !== null) cpuUsed = cpu - cpuAtStart;
      machine = machineText(machineAtStart, machineCpu());
      signInsMeasured = (floodRun?.count() ?? 0) - signInsAtStart;
    },
    request: sendEmailRequest(pool, ready.keys, bodies),
  });
  await pool.close();
  const signIns = (await floodRun?.stop()) ?? {};
  const statuses = Object.keys(run.statuses).filter((s) => s !== '202');
  if (statuses.length > 0) console.log(`note: sends answered ${JSON.stringify(run.statuses)}`);
  return {
    flood, sends: run.requests, p50: percentile(run.latencies, 50), p95: percentile(run.latencies, 95),
    cpuMsPerSend: (cpuUsed * 1000) / run.requests, machine, signIns, signInsPerSecond: signInsMeasured / run.seconds,
  };
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-flood-'));
  const child = fork(fileURLToPath(import.meta.url), ['serve', dataDir], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const ready = await new Promise<Ready>((resolve, reject) => {
    child.once('message', (m) => resolve(m as Ready));
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  const results: Result[] = [];
  try {
    // Rounds of the three, so that a machine whose load changes meanwhile (a shared VM) weighs on each alike.
    for (let round = 0; round < ROUNDS; round++) {
      for (const flood of ['none', 'one address', 'spread'] as const) results.push(await measure(ready, child, flood));
    }
  } finally {
    await stopChild(child);
    rmSync(dataDir, { recursive: true, force: true });
  }
  const cpu = cpus();
  console.log(`sign-in flood: node ${process.version}, ${cpu.length} × ${cpu[0]?.model.trim()}, ${SECONDS} s per run after ${WARMUP_SECONDS} s warm-up, ${FLOOD} parallel sign-ins`);
  console.log(`${'sign-ins'.padEnd(12)} ${'sends'.padStart(6)} ${'p50 ms'.padStart(8)} ${'p95 ms'.padStart(8)} ${'server CPU ms/send'.padStart(19)} ${'sign-ins/s'.padStart(11)}  sign-in answers`);
  for (const r of results) {
    console.log(`${r.flood.padEnd(12)} ${String(r.sends).padStart(6)} ${r.p50.toFixed(2).padStart(8)} ${r.p95.toFixed(2).padStart(8)} ${(Number.isFinite(r.cpuMsPerSend) ? r.cpuMsPerSend.toFixed(3) : 'n/a').padStart(19)} ${r.signInsPerSecond.toFixed(0).padStart(11)}  ${JSON.stringify(r.signIns)}`);
  }
  console.log('(server CPU: the API process, every thread (the hashing thread included), over the measured window, per send; each run\'s machine figures:)');
  for (const r of results) console.log(`  ${r.flood}: ${r.machine}`);
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const p50Of = (flood: Flood) => median(results.filter((r) => r.flood === flood).map((r) => r.p50));
  const quiet = p50Of('none');
  console.log(`median p50 over ${ROUNDS} rounds: none ${quiet.toFixed(2)} ms`);
  for (const flood of ['one address', 'spread'] as const) {
    console.log(`${flood}: median p50 ${p50Of(flood).toFixed(2)} ms, ${(p50Of(flood) / quiet).toFixed(2)}× the quiet runs' (target ≤ 2×)`);
  }
}

// Last: everything above is initialized by now.
if (process.argv[2] === 'serve') {
  process.send!(await serve(process.argv[3]));
} else {
  await main();
}
