// Memory under stalled uploads: BENCH_UPLOADS sockets (200) with a valid API key each announce
// a 10 MiB body, send all of it but the last KiB, and stall. The API runs in its own process
// (embedded stores, production limits from apps/api/connection-limits.ts); this process
// samples its RSS while the uploads are held, until the request timeout has closed them.
//
//   node test/bench/stalled-uploads.bench.ts        (or: npm run bench -- stalled)
//   BENCH_UPLOADS=200 BENCH_HOLD_SECONDS=40
//   BENCH_UNBOUNDED=1   the same without the body budget (what the API did before it), for comparison
//
// What it shows: body bytes in flight are capped (64 MiB, of which large bodies 48 MiB), so
// only 4 of the 10 MiB uploads are admitted and the rest are answered 503 at once; RSS stays
// under baseline + the documented bound; the admitted ones are cut at the 30 s request
// timeout (408) and their memory is given back.
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const MiB = 1024 * 1024;
const UPLOADS = Number(process.env.BENCH_UPLOADS ?? 200);
const HOLD_SECONDS = Number(process.env.BENCH_HOLD_SECONDS ?? 40);
const UNBOUNDED = process.env.BENCH_UNBOUNDED === '1';
const BODY = 10 * MiB;

interface Ready { url: string; key: string; domain: string }
interface Memory { rss: number; peak: number }

// ---------------------------------------------------------------------------------------
// The API (child process)

async function serve(dataDir: string): Promise<void> {
  const { loadConfig } = await import('../../infra/config.ts');
  const { openServices, openStores } = await import('../../apps/runtime.ts');
  const { prepareStores } = await import('../../apps/services/prepare-stores.ts');
  const { buildApi } = await import('../../apps/api/server.ts');
  const { createWorkspace, setWorkspaceActivation } = await import('../../apps/services/management/workspaces.ts');
  const { createProject } = await import('../../apps/services/management/projects.ts');
  const { createDomain, markDomainVerified, connectDomain } = await import('../../apps/services/management/domains.ts');
  const { createApiKey } = await import('../../apps/services/management/api-keys.ts');
  const config = loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent', PORT: '0' });
  const stores = await openStores(config);
  await prepareStores(stores.documents);
  const services = await openServices(config, stores);
  const { createRelayMetrics } = await import('../../apps/relay-metrics.ts');
  const ctx = { config, events: stores.events, documents: stores.documents, services, now: () => new Date(), readiness: async () => ({ checks: {}, parts: {} }), metrics: createRelayMetrics() };
  const api = await buildApi(ctx, {
    logLevel: false,
    limits: { ...(UNBOUNDED ? { bodyBytesInFlight: Number.MAX_SAFE_INTEGER, largeBodyBytesInFlight: Number.MAX_SAFE_INTEGER } : {}), ...JSON.parse(process.env.BENCH_LIMITS ?? "{}") },
  });
  const url = await api.listen({ host: '127.0.0.1', port: 0 });
  const now = new Date();
  const owner = { _id: 'usr_bench', email: 'bench@bench.test', passwordHash: 'x', createdAt: now.toISOString() };
  const { workspace } = await createWorkspace(stores.documents, owner, 'Bench', now);
  await setWorkspaceActivation(stores.documents, workspace._id, true, now);
  const project = await createProject(stores.documents, { workspaceId: workspace._id, name: 'bench', environment: 'production' }, now);
  const domain = await createDomain(stores.documents, { workspaceId: workspace._id, name: 'stalled.bench.test' }, now, services.secrets);
  await markDomainVerified(stores.documents, domain._id, 'benchmark fixture', now);
  await connectDomain(stores.documents, domain._id, project._id);
  const { secret } = await createApiKey(stores.documents, { project, name: 'bench', permissions: ['email:send'] }, now);
  process.on('message', (message) => {
    if (message !== 'memory') return;
    const status = readFileSync('/proc/self/status', 'utf8');
    const peakKiB = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
    process.send!({ rss: process.memoryUsage().rss, peak: peakKiB * 1024 } satisfies Memory);
  });
  process.on('SIGTERM', () => void api.close().then(() => services.close()).then(() => stores.close()).then(() => process.exit(0)));
  process.send!({ url, key: secret, domain: domain.name } satisfies Ready);
}

// ---------------------------------------------------------------------------------------
// The uploads (this process)

function startServer(dataDir: string): Promise<{ child: ChildProcess; ready: Ready }> {
  const child = fork(fileURLToPath(import.meta.url), ['serve', dataDir], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  return new Promise((resolve, reject) => {
    child.once('message', (ready) => resolve({ child, ready: ready as Ready }));
    child.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
}

const memoryOf = (child: ChildProcess) => new Promise<Memory>((resolve) => {
  child.once('message', (m) => resolve(m as Memory));
  child.send('memory');
});

interface Upload { socket: Socket; status: number | null; closedAt: number | null }

function stalledUpload(ready: Ready, payload: Buffer, started: number): Upload {
  const { port } = new URL(ready.url);
  const upload: Upload = { socket: connect(Number(port), '127.0.0.1'), status: null, closedAt: null };
  let head = '';
  upload.socket.on('data', (d: Buffer) => {
    if (upload.status !== null) return;
    head += d.toString('latin1');
    const match = /^HTTP\/1\.1 (\d{3})/.exec(head);
    if (match) upload.status = Number(match[1]);
  });
  upload.socket.on('error', () => {});
  upload.socket.on('close', () => (upload.closedAt = Date.now() - started));
  upload.socket.write([
    'POST /v1/emails HTTP/1.1', 'Host: bench', `Authorization: Bearer ${ready.key}`,
    'Content-Type: application/json', `Content-Length: ${BODY}`, '', '',
  ].join('\r\n'));
  upload.socket.write(payload);
  return upload;
}

const mib = (bytes: number) => `${(bytes / MiB).toFixed(0)} MiB`;

function tally(uploads: Upload[]): string {
  const counts: Record<string, number> = {};
  for (const u of uploads) {
    const key = `${u.status ?? 'no answer'}${u.closedAt === null ? ' open' : ' closed'}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return Object.entries(counts).map(([k, n]) => `${n} × ${k}`).join(', ');
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-stalled-'));
  const { child, ready } = await startServer(dataDir);
  try {
    // Warm up: one real send, so the baseline includes compiled code.
    const warm = await fetch(`${ready.url}/v1/emails`, {
      method: 'POST', headers: { authorization: `Bearer ${ready.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ from: `app@${ready.domain}`, to: 'someone@example.org', subject: 'warm-up', text: 'hi' }),
    });
    if (warm.status !== 202) throw new Error(`warm-up send: ${warm.status} ${await warm.text()}`);
    const baseline = await memoryOf(child);
    console.log(`${UNBOUNDED ? 'WITHOUT the body budget' : 'production limits'}: ${UPLOADS} uploads announcing 10 MiB, each stalled 1 KiB short`);
    console.log(`baseline RSS ${mib(baseline.rss)}`);
    // One buffer shared by every socket: this process holds 10 MiB, not 2 GiB.
    const payload = Buffer.alloc(BODY - 1024, 0x20);
    const started = Date.now();
    const uploads = Array.from({ length: UPLOADS }, () => stalledUpload(ready, payload, started));
    let peak = baseline.rss;
    for (let second = 1; second <= HOLD_SECONDS; second++) {
      await new Promise((r) => setTimeout(r, 1000));
      const memory = await memoryOf(child);
      peak = Math.max(peak, memory.rss);
      if (second % 5 === 0 || second === 1) console.log(`t=${String(second).padStart(2)} s  RSS ${mib(memory.rss).padStart(8)}  ${tally(uploads)}`);
    }
    const end = await memoryOf(child);
    console.log(`peak RSS ${mib(Math.max(peak, end.peak))} (sampled ${mib(peak)}, VmHWM ${mib(end.peak)}); growth over baseline ${mib(Math.max(peak, end.peak) - baseline.rss)}`);
    console.log(`at the end: RSS ${mib(end.rss)}; ${tally(uploads)}`);
    for (const u of uploads) u.socket.destroy();
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'serve') await serve(process.argv[3]);
else await main();
