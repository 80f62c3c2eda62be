// What one POST /v1/emails can cost the server's event loop: the worst-case ALLOWED body (10 MiB
// exactly: 50 recipients of 320-character mailboxes, a 998-emoji subject, 50 custom headers at
// the 16,384-character total, 20 tags at their limits, metadata at every limit at once: 10
// levels, 1,000 keys, 64 KiB; 10,000,000 characters of text and html filling the rest), next to a
// minimal body, 10 MiB of text and html alone (the size without the other limits) and the hostile bodies
// that are now refused (400,000 metadata keys, metadata nested 10,000 deep, 200,000 headers).
//
//   node test/bench/admission-worst-case.bench.ts      BENCH_RUNS=10 BENCH_WARMUP=2
//
// The API runs alone in a child process (as `relay api`, embedded stores); this process sends
// one request at a time. Around each request the child resets a monitorEventLoopDelay histogram
// (1 ms resolution) and its event-loop utilization, and reports:
//   max block  the longest the event loop could not run a timer (the histogram's max): what
//              every other request on the process waits, at worst, because of this one;
//   busy       the event loop's active time during the request (CPU on the loop, all steps).
// Also timed here, in-process: the scan of apps/api/json-body.ts (exact numbers, and the bounds
// that refuse a hostile body before JSON.parse) on the same text. When the send route parses
// with it, its cost is also inside the other columns.
// Figures only: nothing here passes or fails on speed.
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { scanJson } from '../../apps/api/json-body.ts';
import { SEND_BODY_BOUNDS } from '../../apps/api/plugins/emails.schemas.ts';
import { worstCaseSendBody } from '../support/worst-case-send.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 10);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
const MiB = 1024 * 1024;

interface Ready { url: string; key: string; domain: string }
type Probe = { kind: 'reset' } | { kind: 'read' };
interface Reading { maxBlockMs: number; busyMs: number }

// ---------------------------------------------------------------------------------------
// Server (child process)

async function serve(dataDir: string): Promise<void> {
  const { loadConfig } = await import('../../infra/config.ts');
  const { startRelay } = await import('../../apps/relay.ts');
  const relay = await startRelay(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent', PORT: '0' }), ['api']);
  const { benchTenants } = await import('./bench-tenants.ts');
  const [key] = (await benchTenants(relay, { workspaces: 1, keysPerWorkspace: 1, domainOf: () => 'worst.bench.test' })).keys;

  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  let elu = performance.eventLoopUtilization();
  process.on('message', (probe: Probe) => {
    if (probe.kind === 'reset') {
      histogram.reset();
      elu = performance.eventLoopUtilization();
      process.send!({ kind: 'reset' });
    } else {
      const used = performance.eventLoopUtilization(elu);
      process.send!({ maxBlockMs: histogram.max / 1e6, busyMs: used.active } satisfies Reading);
    }
  });
  process.on('SIGTERM', () => void relay.stop().then(() => process.exit(0)));
  process.send!({ url: relay.url!, key, domain: 'worst.bench.test' } satisfies Ready);
}

// ---------------------------------------------------------------------------------------
// Bodies (the worst case: test/support/worst-case-send.ts)

const minimalBody = (domain: string) => Buffer.from(JSON.stringify({ from: `noreply@${domain}`, to: 'someone@example.com', subject: 'Hi', text: 'Hi' }));
/** 10 MiB of text and html and nothing else at a limit: what the size alone costs. */
function sizeOnlyBody(domain: string): Buffer {
  const base = { from: `noreply@${domain}`, to: 'someone@example.com', subject: 'Hi', text: 't'.repeat(10_000_000), html: '' };
  return Buffer.from(JSON.stringify({ ...base, html: 'h'.repeat(10 * MiB - Buffer.byteLength(JSON.stringify(base))) }));
}

function hostile(domain: string, metadata: string, headers: string): Buffer {
  return Buffer.from(JSON.stringify({ from: `noreply@${domain}`, to: 'someone@example.com', subject: 'Hi', text: 'Hi', metadata: '@M', headers: '@H' })
    .replace('"@M"', metadata).replace('"@H"', headers));
}
const manyKeys = (n: number, prefix: string, value: string) => `{${Array.from({ length: n }, (_, i) => `"${prefix}${i}":${value}`).join(',')}}`;

// ---------------------------------------------------------------------------------------
// Load (this process)

function ask(child: ChildProcess, probe: Probe): Promise<unknown> {
  return new Promise((resolve) => {
    child.once('message', resolve);
    child.send(probe);
  });
}

interface Row { name: string; bytes: number; status: string; maxBlock: number[]; busy: number[]; scan: number[] }

async function measure(child: ChildProcess, ready: Ready, name: string, payload: Buffer): Promise<Row> {
  const row: Row = { name, bytes: payload.length, status: '', maxBlock: [], busy: [], scan: [] };
  const json = payload.toString('utf8');
  const statuses = new Set<number>();
  for (let run = 0; run < WARMUP + RUNS; run++) {
    await ask(child, { kind: 'reset' });
    const response = await request(`${ready.url}/v1/emails`, {
      method: 'POST', body: payload,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ready.key}` },
    });
    const text = await response.body.text();
    // Let timers that were held back fire and be recorded before reading.
    await new Promise((r) => setTimeout(r, 20));
    const reading = (await ask(child, { kind: 'read' })) as Reading;
    statuses.add(response.statusCode);
    if (response.statusCode >= 500) throw new Error(`${name}: ${response.statusCode} ${text.slice(0, 200)}`);
    const started = performance.now();
    scanJson(json, SEND_BODY_BOUNDS);
    const scanMs = performance.now() - started;
    if (run >= WARMUP) {
      row.maxBlock.push(reading.maxBlockMs);
      row.busy.push(reading.busyMs);
      row.scan.push(scanMs);
    }
  }
  row.status = [...statuses].join(',');
  return row;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const max = (values: number[]) => Math.max(...values);

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-worst-'));
  const child = fork(fileURLToPath(import.meta.url), ['serve', dataDir], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const rows: Row[] = [];
  try {
    const ready = await new Promise<Ready>((resolve, reject) => {
      child.once('message', (m) => resolve(m as Ready));
      child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
    });
    const scenarios: Array<[string, Buffer]> = [
      ['minimal body', minimalBody(ready.domain)],
      ['10 MiB of text and html alone', sizeOnlyBody(ready.domain)],
      ['worst-case allowed body', worstCaseSendBody(ready.domain)],
      ['refused: 400,000 metadata keys', hostile(ready.domain, manyKeys(400_000, 'key', '"value-value"'), '{}')],
      ['refused: metadata 10,000 deep', hostile(ready.domain, `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`, '{}')],
      ['refused: 200,000 headers', hostile(ready.domain, '{}', manyKeys(200_000, 'X-H', '"v"'))],
    ];
    for (const [name, payload] of scenarios) rows.push(await measure(child, ready, name, payload));
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(dataDir, { recursive: true, force: true });
  }
  const cpu = cpus();
  console.log(`admission worst case: node ${process.version}, ${cpu.length} × ${cpu[0]?.model.trim()}, ${RUNS} requests each after ${WARMUP} warm-up`);
  const pair = (values: number[]) => `${median(values).toFixed(1)} / ${max(values).toFixed(1)}`;
  console.log(`${'body'.padEnd(32)} ${'bytes'.padStart(9)} ${'status'.padStart(6)} ${'max block ms'.padStart(14)} ${'busy ms'.padStart(14)} ${'scan ms'.padStart(10)}   (median / max)`);
  for (const r of rows) {
    console.log(`${r.name.padEnd(32)} ${String(r.bytes).padStart(9)} ${r.status.padStart(6)} ${pair(r.maxBlock).padStart(14)} ${pair(r.busy).padStart(14)} ${pair(r.scan).padStart(10)}`);
  }
  console.log('scan: apps/api/json-body.ts scanJson with SEND_BODY_BOUNDS on the same text, timed in this process (when the send route parses with it, the API runs this scan before JSON.parse and refuses the hostile bodies there)');
  const worstRow = rows.find((r) => r.name === 'worst-case allowed body')!;
  console.log(`a worst-case allowed body costs at most ${Math.ceil(max(worstRow.maxBlock))} ms of event loop in one stretch (${Math.ceil(max(worstRow.busy))} ms busy in all)`);
}

if (process.argv[2] === 'serve') await serve(process.argv[3]);
else await main();
