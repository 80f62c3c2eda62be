// Distributed mode under load: `relay api`, `relay forwarder` and `relay processor projector` as
// separate processes on the embedded event store + Kafka + FerretDB (or MongoDB), with
// BENCH_EMAILS emails already stored, then, at the same time for BENCH_SECONDS:
//   admission   POST /v1/emails from BENCH_CONNECTIONS connections, closed loop: 202s per second
//   lag         202 → the email written to the read model (the projector's `projected` log line,
//               same machine clock): p50/p99 over every email admitted in the window
//   list        GET /v1/emails?limit=10 (a project-wide key), one request at a time: p50/p99
// and then `relay projections rebuild emails --into <scratch>`: events per second (its --json).
// CPU per email admitted in the window, from the window's start until its emails are projected:
// each Relay process's own (/proc), apart from the engines' (Kafka's JVM, FerretDB, PostgreSQL;
// shared engines, so their figure includes whatever else used them meanwhile).
//
//   npm run bench -- distributed
//   BENCH_EMAILS=100000 BENCH_SECONDS=30 BENCH_CONNECTIONS=32 BENCH_SEED_CONNECTIONS=64
//   BENCH_WARMUP_SECONDS=3 BENCH_LAG_TIMEOUT_SECONDS=120 BENCH_KEEP=1 (leave database, topic and data dir)
//   BENCH_LIST=0 (no list reader: admission and lag without its scans competing)
//
// Engines: RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL from the environment, else the running
// engines of infra/engines (`eval "$(bash infra/engines/engines.sh up)"` starts them; FerretDB on
// PostgreSQL by default, as in CI, or on SQLite with RELAY_FERRETDB_BACKEND=sqlite). Each run
// uses a fresh database, log namespace and data directory, removed at the end.
//
// Seeding goes through the API too (same admission code, BENCH_SEED_CONNECTIONS at once), with
// the forwarder and projector running; the measured window starts once the projector has caught
// up with the seed. Rate limits and monthly allowances are real: the load is spread over enough
// workspaces (two production keys each; 100/s per key, 200/s per workspace, 5,000 recipients per
// month) that neither is what is measured; non-202 answers are counted and printed.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { engineCpuBetween, engineCpuByPid, percentile, processCpuSeconds } from './bench-child.ts';
import { freePort } from '../support/free-port.ts';

const EMAILS = Number(process.env.BENCH_EMAILS ?? 100_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 30);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const SEED_CONNECTIONS = Number(process.env.BENCH_SEED_CONNECTIONS ?? 64);
const LAG_TIMEOUT_SECONDS = Number(process.env.BENCH_LAG_TIMEOUT_SECONDS ?? 120);
const KEEP = process.env.BENCH_KEEP === '1';
const LIST = process.env.BENCH_LIST !== '0';
/** Recipients a workspace may take in a month, with room to spare. */
const PER_WORKSPACE = 4_500;
/** Admissions per second the window is provisioned for (allowances, not a limit on the load). */
const PROVISIONED_RATE = 600;

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'apps/cli/main.ts');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------
// Engines and processes

async function engines(): Promise<{ brokers: string; mongoUrl: string }> {
  let brokers = process.env.RELAY_KAFKA_BROKERS;
  let mongoUrl = process.env.BENCH_MONGODB_URL ?? process.env.RELAY_MONGODB_URL;
  if (!brokers || !mongoUrl) {
    // The engines infra/engines started, if they run.
    const env = await run('bash', [join(ROOT, 'infra/engines/engines.sh'), 'env']);
    brokers ??= /RELAY_KAFKA_BROKERS=(\S+)/.exec(env.stdout)?.[1];
    mongoUrl ??= /RELAY_MONGODB_URL=(\S+)/.exec(env.stdout)?.[1];
  }
  if (!brokers || !mongoUrl) {
    throw new Error('no Kafka or MongoDB: set RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL, or start the engines: eval "$(bash infra/engines/engines.sh up)"');
  }
  return { brokers, mongoUrl };
}

function run(command: string, args: string[], env?: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { cwd: ROOT, env: env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

interface Part {
  name: string;
  child: ChildProcess;
  url: string;
}

/** The environment of every Relay process of this run: nothing inherited but what is not Relay's. */
function relayEnv(base: Record<string, string>, extra: Record<string, string> = {}): Record<string, string> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k, v]) => v !== undefined && !k.startsWith('RELAY_') && k !== 'PORT' && k !== 'HOST')) as Record<string, string>;
  return { ...inherited, ...base, ...extra };
}

async function startPart(name: string, args: string[], env: Record<string, string>, onLine?: (line: string) => void): Promise<Part> {
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env: { ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let tail = '';
  const keep = (d: Buffer) => (tail = (tail + d.toString()).slice(-4000));
  child.stderr!.on('data', keep);
  const lines = createInterface({ input: child.stdout! });
  lines.on('line', (line) => {
    tail = (tail + line + '\n').slice(-4000);
    onLine?.(line);
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}:\n${tail}`);
    try {
      if ((await fetch(`${url}/readyz`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${name} was not ready within 60 s:\n${tail}`);
    await sleep(200);
  }
  return { name, child, url };
}

async function stopPart(part: Part): Promise<void> {
  if (part.child.exitCode !== null || part.child.signalCode !== null) return;
  const exited = new Promise((r) => part.child.once('exit', r));
  part.child.kill('SIGTERM');
  const timer = setTimeout(() => part.child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

// ---------------------------------------------------------------------------------------
// Load

interface Tenants { keys: string[]; domains: string[] }

function emailBody(domain: string, i: number): string {
  return JSON.stringify({
    from: `Acme <noreply@${domain}>`, to: [`user${i}@example.com`],
    subject: 'Your order has shipped', text: `Hello, your order ${i} is on its way.`, html: `<p>Hello, your order <b>${i}</b> is on its way.</p>`,
    tags: { kind: 'shipping' }, metadata: { orderId: i },
  });
}

/** Closed loop: `connections` workers post emails until `stop()` holds; calls `onAdmitted` on each 202. */
async function admit(
  pool: Pool, tenants: Tenants, connections: number, stop: () => boolean,
  onAnswer: (status: number, id: string | null, at: number) => void,
): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: connections }, async () => {
    while (!stop()) {
      const n = next++;
      const k = n % tenants.keys.length;
      try {
        const response = await pool.request({
          path: '/v1/emails', method: 'POST', body: emailBody(tenants.domains[k], n),
          headers: { 'content-type': 'application/json', authorization: `Bearer ${tenants.keys[k]}` },
        });
        const text = await response.body.text();
        const at = Date.now();
        onAnswer(response.statusCode, response.statusCode === 202 ? (JSON.parse(text) as { id: string }).id : null, at);
      } catch {
        onAnswer(0, null, Date.now());
      }
    }
  }));
}

// ---------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const { brokers, mongoUrl } = await engines();
  const runId = randomBytes(4).toString('hex');
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-distributed-'));
  const database = new URL(mongoUrl);
  database.pathname = `/relay_bench_${runId}`;
  const namespace = `bench_${runId}`;
  const base = {
    RELAY_DATA_DIR: dataDir, RELAY_KAFKA_BROKERS: brokers, RELAY_MONGODB_URL: database.toString(),
    RELAY_LOG_NAMESPACE: namespace, RELAY_SECRET_KEY: randomBytes(32).toString('base64'),
    RELAY_LOG_LEVEL: 'warn', RELAY_INBOUND_SMTP_PORT: '0',
  };
  const env = relayEnv(base);
  const workspaces = Math.max(4, Math.ceil((EMAILS + (SECONDS + WARMUP_SECONDS + 10) * PROVISIONED_RATE) / PER_WORKSPACE));
  const parts: Part[] = [];
  const projected = new Map<string, number>();
  let projectedCount = 0;
  console.log(`distributed: ${EMAILS} emails to seed over ${workspaces} workspaces; Kafka ${brokers}, documents ${database.host}${database.pathname}, event store embedded (${dataDir})`);
  try {
    parts.push(await startPart('api', ['api'], env));
    parts.push(await startPart('forwarder', ['forwarder'], env));
    // Debug level for its `projected` lines: when each email reached the read model.
    parts.push(await startPart('projector', ['processor', 'projector'], relayEnv(base, { RELAY_LOG_LEVEL: 'debug' }), (line) => {
      if (!line.includes('"projected"')) return;
      try {
        const entry = JSON.parse(line) as { msg?: string; streamId?: string; revision?: number; time?: number };
        if (entry.msg !== 'projected' || entry.revision !== 0 || !entry.streamId || !entry.time) return;
        projectedCount++;
        projected.set(entry.streamId.slice('email-'.length), entry.time);
      } catch {
        // not a log line
      }
    }));
    const api = parts[0];

    // Tenants, made on the same stores with the same secret key as the processes.
    const { loadConfig } = await import('../../infra/config.ts');
    const { openServices, openStores } = await import('../../apps/runtime.ts');
    const { benchTenants } = await import('./bench-tenants.ts');
    const config = loadConfig(base);
    const stores = await openStores(config);
    const services = await openServices(config, stores);
    let tenants: Tenants;
    let readKey: string;
    try {
      tenants = await benchTenants({ stores, services }, { workspaces, keysPerWorkspace: 2, domainOf: (w) => `w${w}.bench.test`, permissions: ['email:send', 'email:read'] });
      readKey = tenants.keys[0];
    } finally {
      await services.close();
      await stores.close();
    }

    // Seed.
    const pool = new Pool(api.url, { connections: Math.max(CONNECTIONS, SEED_CONNECTIONS) + 2, pipelining: 1 });
    const seedStatuses: Record<string, number> = {};
    let seeded = 0;
    const seedStarted = Date.now();
    let lastReport = seedStarted;
    await admit(pool, tenants, SEED_CONNECTIONS, () => seeded >= EMAILS, (status) => {
      seedStatuses[status] = (seedStatuses[status] ?? 0) + 1;
      if (status === 202) seeded++;
      if (Date.now() - lastReport > 10_000) {
        lastReport = Date.now();
        console.log(`  seeding: ${seeded}/${EMAILS} (${(seeded / ((lastReport - seedStarted) / 1000)).toFixed(0)}/s), projected ${projectedCount}`);
      }
    });
    const seedSeconds = (Date.now() - seedStarted) / 1000;
    console.log(`  seeded ${seeded} emails in ${seedSeconds.toFixed(1)} s (${(seeded / seedSeconds).toFixed(0)}/s) ${JSON.stringify(seedStatuses)}; waiting for the projector`);
    const caughtUp = Date.now() + LAG_TIMEOUT_SECONDS * 1000 * 5;
    while (projectedCount < seeded && Date.now() < caughtUp) await sleep(250);
    console.log(`  projector: ${projectedCount}/${seeded} seeded emails in the read model`);

    // The measured window: admission, lag and list at once.
    const admittedAt = new Map<string, number>();
    const statuses: Record<string, number> = {};
    let measuring = false;
    let stopping = false;
    let accepted = 0;
    const listTimes: number[] = [];
    const listStatuses: Record<string, number> = {};
    const lister = (async () => {
      const listPool = new Pool(api.url, { connections: 1, pipelining: 1 });
      try {
        while (LIST && !stopping) {
          const started = performance.now();
          const response = await listPool.request({ path: '/v1/emails?limit=10', method: 'GET', headers: { authorization: `Bearer ${readKey}` } });
          await response.body.dump();
          if (measuring) {
            listTimes.push(performance.now() - started);
            listStatuses[response.statusCode] = (listStatuses[response.statusCode] ?? 0) + 1;
          }
        }
      } finally {
        await listPool.close();
      }
    })();
    const load = admit(pool, tenants, CONNECTIONS, () => stopping, (status, id, at) => {
      if (!measuring) return;
      statuses[status] = (statuses[status] ?? 0) + 1;
      if (status === 202 && id) {
        accepted++;
        admittedAt.set(id, at);
      }
    });
    await sleep(WARMUP_SECONDS * 1000);
    const projectedBefore = projectedCount;
    const relayCpuBefore = parts.map((part) => processCpuSeconds(part.child.pid!));
    const enginesBefore = engineCpuByPid();
    measuring = true;
    const windowStarted = performance.now();
    await sleep(SECONDS * 1000);
    measuring = false;
    const windowSeconds = (performance.now() - windowStarted) / 1000;
    stopping = true;
    await Promise.all([load, lister]);
    await pool.close();

    const lagDeadline = Date.now() + LAG_TIMEOUT_SECONDS * 1000;
    const pendingLag = () => [...admittedAt.keys()].filter((id) => !projected.has(id)).length;
    while (pendingLag() > 0 && Date.now() < lagDeadline) await sleep(250);
    const lags = [...admittedAt].flatMap(([id, at]) => (projected.has(id) ? [(projected.get(id)! - at) / 1000] : [])).sort((a, b) => a - b);
    const notProjected = pendingLag();
    const relayCpu = parts.map((part, i) => [part.name, ((processCpuSeconds(part.child.pid!) ?? NaN) - (relayCpuBefore[i] ?? NaN)) * 1000 / accepted] as const);
    const engineCpu = Object.entries(engineCpuBetween(enginesBefore, engineCpuByPid())).map(([engine, seconds]) => [engine, (seconds * 1000) / accepted] as const);

    // Rebuild into a scratch collection, as an analyst would, then drop it.
    const scratch = `bench_rebuild_${runId}`;
    const rebuildStarted = performance.now();
    const rebuilt = await run(process.execPath, [CLI, 'projections', 'rebuild', 'emails', '--into', scratch, '--json'], env);
    const rebuildWall = (performance.now() - rebuildStarted) / 1000;
    if (rebuilt.code !== 0) throw new Error(`rebuild failed (exit ${rebuilt.code}): ${rebuilt.stderr.slice(-2000)}`);
    const rebuild = JSON.parse(rebuilt.stdout.trim().split('\n').pop()!) as { events: number; documents: number; seconds: number };
    const dropped = await run(process.execPath, [CLI, 'projections', 'drop', scratch], env);
    if (dropped.code !== 0) console.log(`note: could not drop ${scratch}: ${dropped.stderr.trim()}`);

    // Summary.
    listTimes.sort((a, b) => a - b);
    const admissionRate = accepted / windowSeconds;
    const rebuildRate = rebuild.events / rebuild.seconds;
    const cpu = cpus();
    console.log(`\ndistributed: node ${process.version}, ${cpu.length} × ${cpu[0]?.model.trim()}; api, forwarder, projector and this load generator on one machine`);
    console.log(`${seeded} emails seeded (${(seeded / seedSeconds).toFixed(0)}/s through the API, ${projectedBefore} projected before the window); window ${windowSeconds.toFixed(1)} s after ${WARMUP_SECONDS} s warm-up, ${CONNECTIONS} connections`);
    // A verdict only for what was measured.
    const verdict = (value: number, met: boolean) => (Number.isNaN(value) ? null : met);
    const rows: Array<[string, string, string, boolean | null]> = [
      ['admission (202s per second)', `${admissionRate.toFixed(0)}/s`, '≥ 300/s', admissionRate >= 300],
      ['projection lag p50 / p99', `${fmtS(percentile(lags, 50))} / ${fmtS(percentile(lags, 99))}`, 'p99 < 1 s', verdict(percentile(lags, 99), percentile(lags, 99) < 1)],
      ['GET /v1/emails?limit=10 p50 / p99', `${fmtMs(percentile(listTimes, 50))} / ${fmtMs(percentile(listTimes, 99))}`, 'p99 < 100 ms', verdict(percentile(listTimes, 99), percentile(listTimes, 99) < 100)],
      ['projections rebuild --into', `${rebuildRate.toFixed(0)} events/s`, '≥ 2,000/s', rebuildRate >= 2000],
    ];
    console.log(`${'metric'.padEnd(36)} ${'measured'.padEnd(22)} ${'target'.padEnd(14)} verdict`);
    for (const [name, measured, target, met] of rows) console.log(`${name.padEnd(36)} ${measured.padEnd(22)} ${target.padEnd(14)} ${met === null ? 'not measured' : met ? 'meets' : 'misses'}`);
    console.log(`admission answers ${JSON.stringify(statuses)}; lag over ${lags.length} emails${notProjected ? `, ${notProjected} not projected within ${LAG_TIMEOUT_SECONDS} s` : ''}; list over ${listTimes.length} requests ${JSON.stringify(listStatuses)}`);
    const sum = (rows: ReadonlyArray<readonly [string, number]>) => rows.reduce((total, [, ms]) => total + ms, 0);
    console.log(`CPU per admitted email (window start → its emails projected): Relay ${sum(relayCpu).toFixed(2)} ms (${relayCpu.map(([name, ms]) => `${name} ${ms.toFixed(2)}`).join(', ')}), ` +
      `engines ${sum(engineCpu).toFixed(2)} ms (${engineCpu.map(([name, ms]) => `${name} ${ms.toFixed(2)}`).join(', ')}; shared engines: other users of them count too)`);
    console.log(`rebuild: ${rebuild.events} events → ${rebuild.documents} documents in ${rebuild.seconds} s (${rebuildWall.toFixed(1)} s with the process start)`);
  } finally {
    for (const part of parts.reverse()) await stopPart(part);
    if (!KEEP) await cleanUp(database.toString(), brokers, namespace, dataDir);
    else console.log(`kept: database ${database.pathname.slice(1)}, namespace ${namespace}, data dir ${dataDir}`);
  }
}

const fmtS = (s: number) => (Number.isNaN(s) ? '–' : `${s.toFixed(2)} s`);
const fmtMs = (ms: number) => (Number.isNaN(ms) ? '–' : `${ms.toFixed(0)} ms`);

async function cleanUp(mongoUrl: string, brokers: string, namespace: string, dataDir: string): Promise<void> {
  const { MongoClient } = await import('mongodb');
  const client = new MongoClient(mongoUrl);
  try {
    await client.connect();
    await client.db().dropDatabase();
  } catch (error) {
    console.log(`note: could not drop the bench database: ${(error as Error).message}`);
  } finally {
    await client.close().catch(() => {});
  }
  const { Kafka, logLevel } = await import('kafkajs');
  const { eventsTopic, groupOf } = await import('../../apps/pipeline/topics.ts');
  const admin = new Kafka({ brokers: brokers.split(','), logLevel: logLevel.NOTHING }).admin();
  try {
    await admin.connect();
    await admin.deleteTopics({ topics: [eventsTopic(namespace)] });
    await admin.deleteGroups([groupOf(namespace, 'projector')]).catch(() => {});
  } catch (error) {
    console.log(`note: could not delete the bench topic: ${(error as Error).message}`);
  } finally {
    await admin.disconnect().catch(() => {});
  }
  rmSync(dataDir, { recursive: true, force: true });
}

await main();
