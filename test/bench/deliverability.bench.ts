// The deliverability projection's two costs (issue 26):
//
// 1. Rebuild: `relay projections rebuild deliverability --into …` (a child process, the real
//    command) over BENCH_EVENTS (default 1,000,000) events of a generated history on the
//    embedded default: events per second, its CPU, and its RSS sampled every 250 ms
//    (/proc/<pid>/status), flat meaning within ±10 % of the mean over the run's second half:
//    by then the first pass's per-document counts and the bounded set of held documents
//    (maxHeld) are in memory, so what grows after that grows with the events read.
//    Targets: ≥ 20,000 events/s, RSS flat.
// 2. Live: what the `deliverability` consumer group adds to an email's CPU in the pipeline bench
//    (test/bench/pipeline.bench.ts, closed loop only, BENCH_PIPELINE_SECONDS each): the processor
//    runs as a process of its own on the same data directory (BENCH_WITHOUT + BENCH_SIDECAR), so
//    its CPU and everything else's are measured over the same window of the same run, a ratio
//    that the machine's load moves less than two runs compared. Target: < 10 % added.
// Both print the hypervisor's steal: figures only compare with runs that got as much CPU.
//
//   npm run bench -- deliverability     BENCH_EVENTS=1000000 BENCH_PIPELINE_SECONDS=15 BENCH_ROUNDS=2
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openStores } from '../../apps/runtime.ts';
import { loadConfig } from '../../infra/config.ts';
import { appendHistory, generateHistory } from '../support/history.ts';
import { machineCpu, machineText, processCpuSeconds } from './bench-child.ts';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const PIPELINE_SECONDS = Number(process.env.BENCH_PIPELINE_SECONDS ?? 15);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const TARGET_RATE = 20_000;
const TARGET_RSS_BAND = 0.1;
const TARGET_ADDED_CPU = 0.1;
const root = fileURLToPath(new URL('../..', import.meta.url));
const f = (n: number, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

function rssKib(pid: number): number | null {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN);
  } catch {
    return null;
  }
}

async function seed(dataDir: string): Promise<number> {
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
  let events = 0;
  const began = performance.now();
  try {
    // In chunks: the generated history itself must not fill this process's memory.
    for (let chunk = 0; events < EVENTS; chunk++) {
      const plans = generateHistory({ emails: 5000, projectId: `prj_bench${chunk % 20}`, seed: 1000 + chunk, idPrefix: `em_b${chunk}_`, start: new Date(Date.UTC(2026, 10, 1) + chunk * 3_600_000).toISOString(), spacingMs: 700 });
      let sum = 0;
      const kept = [];
      for (const plan of plans) {
        if (events + sum >= EVENTS) break;
        kept.push(plan);
        sum += plan.events.length;
      }
      events += await appendHistory(stores.events, kept, 128);
    }
  } finally {
    await stores.close();
  }
  console.log(`seeded ${f(events)} events in ${f((performance.now() - began) / 1000, 1)} s`);
  return events;
}

async function rebuild(dataDir: string, events: number): Promise<void> {
  const machineBefore = machineCpu();
  const began = performance.now();
  const child = spawn(process.execPath, [join(root, 'apps/cli/main.ts'), 'projections', 'rebuild', 'deliverability', '--into', 'deliverability_bench', '--json'], {
    cwd: root, env: { ...process.env, RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  const samples: Array<[number, number]> = [];
  let cpu: number | null = null;
  let answered = false;
  const timer = setInterval(() => {
    // Until it answers: then it frees its memory and exits.
    if (answered) return;
    const kib = rssKib(child.pid!);
    if (kib !== null && Number.isFinite(kib)) samples.push([performance.now() - began, kib]);
    cpu = processCpuSeconds(child.pid!) ?? cpu;
  }, 250);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    answered = true;
    stdout += d;
  });
  child.stderr.on('data', (d) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearInterval(timer);
  const seconds = (performance.now() - began) / 1000;
  if (code !== 0) throw new Error(`the rebuild failed (exit ${code}): ${stderr.slice(-2000)}`);
  const result = JSON.parse(stdout.trim().split('\n').pop()!) as { events: number; documents: number; seconds: number };
  const rate = result.events / seconds;
  const kept = samples.filter(([t]) => t >= (seconds * 1000) / 2).map(([, kib]) => kib / 1024);
  const mean = kept.reduce((a, b) => a + b, 0) / Math.max(1, kept.length);
  const deviation = kept.length ? Math.max(Math.max(...kept) - mean, mean - Math.min(...kept)) / mean : NaN;
  console.log(`\n1. rebuild of deliverability from ${f(events)} events (relay projections rebuild deliverability --into, a process of its own)`);
  console.log(`   ${f(result.events)} events → ${f(result.documents)} documents in ${f(seconds, 1)} s: ${f(rate)} events/s; CPU ${cpu === null ? 'n/a' : `${f(cpu, 1)} s (${f((cpu * 1e6) / result.events, 1)} µs per event: ${f(result.events / cpu)} events per CPU-second)`}`);
  console.log(`   RSS over the second half (${kept.length} samples): min ${f(Math.min(...kept), 1)} MiB, max ${f(Math.max(...kept), 1)} MiB, mean ${f(mean, 1)} MiB, largest deviation ${f(deviation * 100, 1)} %; ` +
    `whole run every second: ${samples.filter((_, i) => i % 4 === 0).map(([, kib]) => f(kib / 1024)).join(' ')} MiB`);
  console.log(`   ${machineText(machineBefore, machineCpu())}; load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log(`   ≥ ${f(TARGET_RATE)} events/s: ${rate >= TARGET_RATE ? 'met' : 'MISSED'}; RSS flat within ±${TARGET_RSS_BAND * 100} %: ${deviation <= TARGET_RSS_BAND ? 'met' : 'MISSED'}`);
}

/** One pipeline run (closed loop only) with the deliverability processor in a process of its own: both CPU figures of one run. */
async function pipelineRun(): Promise<{ relay: number; deliverability: number; machine: string }> {
  const child = spawn(process.execPath, [join(root, 'test/bench/pipeline.bench.ts')], {
    cwd: root,
    env: { ...process.env, BENCH_PHASES: '1', BENCH_SECONDS: String(PIPELINE_SECONDS), BENCH_WITHOUT: 'deliverability', BENCH_SIDECAR: 'deliverability' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  const number = (pattern: RegExp) => Number(pattern.exec(out)?.[1]?.replace(/,/g, '') ?? NaN);
  const relay = number(/CPU per email, end to end[^:]*: ([\d.,]+) ms/);
  const deliverability = number(/CPU per email of the deliverability processor[^:]*: ([\d.,]+) ms/);
  const machine = /machine: [^\n]*/.exec(out)?.[0] ?? 'machine: n/a';
  if (code !== 0 || !Number.isFinite(relay) || !Number.isFinite(deliverability)) throw new Error(`the pipeline bench did not report both CPU figures (exit ${code}):\n${out.slice(-3000)}`);
  console.log(`   run: every other part ${f(relay, 3)} ms of CPU per email, the deliverability processor ${f(deliverability, 3)} ms (+${f((deliverability / relay) * 100, 1)} %); ${machine}`);
  return { relay, deliverability, machine };
}

async function live(): Promise<void> {
  console.log(`\n2. the live projection's CPU per email: the pipeline bench (closed loop of ${PIPELINE_SECONDS} s) with the deliverability processor as a process of its own, ${ROUNDS} runs`);
  const runs: Array<{ relay: number; deliverability: number }> = [];
  for (let round = 0; round < ROUNDS; round++) runs.push(await pipelineRun());
  const added = runs.map((r) => r.deliverability / r.relay);
  console.log(`   load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log(`   the deliverability processor adds ${added.map((a) => `${f(a * 100, 1)} %`).join(', ')} to the CPU per email of the rest (in a process of its own: its own commits and syncs, an upper bound of what it adds inside relay start); ` +
    `< ${TARGET_ADDED_CPU * 100} %: ${Math.max(...added) < TARGET_ADDED_CPU ? 'met' : 'MISSED'}`);
}

const cpu = cpus();
console.log(`deliverability: node ${process.version}, ${cpu.length} × ${cpu[0]?.model.trim()}`);
const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-deliverability-'));
try {
  if (process.env.BENCH_SKIP_REBUILD !== '1') await rebuild(dataDir, await seed(dataDir));
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
if (process.env.BENCH_SKIP_LIVE !== '1') await live();
