// The feedback SMTP server under a flood, next to the API in one `relay start` process (every
// part, embedded stores, outbox delivery): does the API stay responsive and memory bounded?
//
//   node test/bench/inbound-flood.bench.ts        (or: npm run bench -- inbound-flood)
//   BENCH_BASELINE_SECONDS=15 BENCH_FLOOD_SECONDS=60 BENCH_PROBE_RATE=20
//   BENCH_REPORTERS=20 BENCH_SLOW_SESSIONS=200 BENCH_REPORT_MIB=4
//   BENCH_CPU_PROF=<dir>   runs the Relay child under `node --cpu-prof` (node test/bench/cpu-profile.ts <file>)
//
// 1. Baseline: /healthz and POST /v1/emails are each probed BENCH_PROBE_RATE times a second, on
//    a fixed schedule (a probe starts on time whether or not the last one was answered), for
//    BENCH_BASELINE_SECONDS: latency percentiles.
// 2. Flood, for BENCH_FLOOD_SECONDS, with the same probes:
//    - BENCH_REPORTERS clients (from 127.0.2.x) each send 4 MiB bounce reports to a valid return
//      path, one after the other on one session: a DSN returning the original message with a
//      3.9 MiB attachment, a fresh Message-ID each.
//    - BENCH_SLOW_SESSIONS sessions (10 per address, from 127.0.1.x) opened at once: half send
//      NOOP every 25 s, half send 1 MiB of a report and then one byte of DATA every 20 s.
//    Their SMTP replies are tallied. The server's limits (docs/inbound.md) are production's:
//    200 connections in all, so the reporters' 20 leave room for 180 slow sessions.
// The Relay child's RSS is sampled every second (growth over the baseline printed), its event
// loop delay and CPU reported, and the machine's steal for each phase.
//
// Targets (issue 22): under the flood /healthz p99 < 50 ms and POST /v1/emails p99 < 100 ms.
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { SmtpSession } from '../support/smtp-session.ts';
import { askStats, machineCpu, machineText, percentile, rssKiB, stopChild, threadCpuSeconds } from './bench-child.ts';
import { freePort } from '../support/free-port.ts';

const BASELINE_SECONDS = Number(process.env.BENCH_BASELINE_SECONDS ?? 15);
const FLOOD_SECONDS = Number(process.env.BENCH_FLOOD_SECONDS ?? 60);
const PROBE_RATE = Number(process.env.BENCH_PROBE_RATE ?? 20);
const REPORTERS = Number(process.env.BENCH_REPORTERS ?? 20);
const SLOW_SESSIONS = Number(process.env.BENCH_SLOW_SESSIONS ?? 200);
const REPORT_MIB = Number(process.env.BENCH_REPORT_MIB ?? 4);
const CPU_PROF = process.env.BENCH_CPU_PROF ? resolve(process.env.BENCH_CPU_PROF) : null;
const TARGET_HEALTHZ_P99_MS = 50;
const TARGET_SEND_P99_MS = 100;

interface Ready { url: string; key: string; domain: string; inboundPort: number; pid: number }
interface LoopStats { loopDelayP99: number; loopDelayMax: number; utilization: number; heapUsed: number; arrayBuffers: number }

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ms = (n: number) => (Number.isFinite(n) ? `${n.toFixed(1)} ms` : 'n/a');
const mib = (kib: number) => `${(kib / 1024).toFixed(0)} MiB`;

// ---------------------------------------------------------------------------------------
// Relay (child process): every part of `relay start`, embedded stores, outbox delivery.

async function serveRelay(dataDir: string): Promise<void> {
  process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));
  const { loadConfig } = await import('../../infra/config.ts');
  const { startRelay, ALL_PARTS } = await import('../../apps/relay.ts');
  const { benchTenants } = await import('./bench-tenants.ts');
  const { verpAddress, VERP_MAC_PURPOSE } = await import('../../domain/delivery/verp.ts');
  const inboundPort = await freePort();
  const relay = await startRelay(loadConfig({
    RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'warn', PORT: '0', RELAY_INBOUND_SMTP_PORT: String(inboundPort),
  }), ALL_PARTS);
  process.on('SIGTERM', () => {
    setTimeout(() => process.exit(1), 30_000).unref();
    relay.stop().then(() => process.exit(0), () => process.exit(1));
  });
  const { keys, domains } = await benchTenants(relay, { workspaces: 1, keysPerWorkspace: 1, domainOf: () => 'flood.bench.test' });
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  let elu = performance.eventLoopUtilization();
  process.on('message', (m: { cmd?: string; ids?: string[] }) => {
    if (m.cmd === 'return-paths') {
      const mac = (data: string) => relay.services.secrets.mac(VERP_MAC_PURPOSE, data);
      process.send!({ returnPaths: m.ids!.map((emailId) => verpAddress({ emailId, recipientIndex: 0, mailFromDomain: `bounce.${domains[0]}` }, mac)) });
    } else if (m.cmd === 'stats-reset') {
      delay.reset();
      elu = performance.eventLoopUtilization();
    } else if (m.cmd === 'stats') {
      // The histogram times a 10 ms timer: what is past 10 ms is delay.
      const late = (ns: number) => Math.max(0, ns / 1e6 - 10);
      const memory = process.memoryUsage();
      process.send!({
        stats: {
          loopDelayP99: late(delay.percentile(99)), loopDelayMax: late(delay.max),
          utilization: performance.eventLoopUtilization(elu).utilization, heapUsed: memory.heapUsed, arrayBuffers: memory.arrayBuffers,
        } satisfies LoopStats,
      });
    }
  });
  process.send!({ url: relay.url!, key: keys[0], domain: domains[0], inboundPort, pid: process.pid } satisfies Ready);
}

// ---------------------------------------------------------------------------------------
// This process: probes, reporters, slow sessions, figures.

interface Probe { latencies: number[]; failures: Record<string, number> }

/** Starts `request` `rate` times a second on a fixed schedule until `stop()`; latencies in ms. */
function probe(rate: number, request: () => Promise<string>): { stop(): Promise<Probe> } {
  const result: Probe = { latencies: [], failures: {} };
  const inFlight = new Set<Promise<void>>();
  const started = performance.now();
  let n = 0;
  let stopped = false;
  const tick = setInterval(() => {
    const due = Math.floor(((performance.now() - started) / 1000) * rate);
    while (n < due && !stopped) {
      n++;
      const begun = performance.now();
      const one = request().then((status) => {
        if (status === 'ok') result.latencies.push(performance.now() - begun);
        else result.failures[status] = (result.failures[status] ?? 0) + 1;
      }, (error: Error) => {
        result.failures[error.message] = (result.failures[error.message] ?? 0) + 1;
      }).finally(() => inFlight.delete(one));
      inFlight.add(one);
    }
  }, 5);
  return {
    async stop() {
      stopped = true;
      clearInterval(tick);
      await Promise.all(inFlight);
      result.latencies.sort((a, b) => a - b);
      return result;
    },
  };
}

function probes(ready: Ready, pool: Pool) {
  const healthz = probe(PROBE_RATE, async () => {
    const response = await pool.request({ method: 'GET', path: '/healthz' });
    await response.body.text();
    return response.statusCode === 200 ? 'ok' : `healthz ${response.statusCode}`;
  });
  let sent = 0;
  const send = probe(PROBE_RATE, async () => {
    const response = await pool.request({
      method: 'POST', path: '/v1/emails',
      headers: { authorization: `Bearer ${ready.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ from: `app@${ready.domain}`, to: `probe${++sent}@example.org`, subject: 'probe', text: 'hi' }),
    });
    await response.body.text();
    return response.statusCode === 202 ? 'ok' : `send ${response.statusCode}`;
  });
  return {
    async stop() {
      return { healthz: await healthz.stop(), send: await send.stop() };
    },
  };
}

function probeLine(name: string, p: Probe): string {
  const failures = Object.entries(p.failures).map(([k, v]) => `${v} × ${k}`).join(', ');
  return `${name.padEnd(16)} n=${String(p.latencies.length).padStart(5)}  p50 ${ms(percentile(p.latencies, 50)).padStart(9)}  p99 ${ms(percentile(p.latencies, 99)).padStart(9)}  max ${ms(p.latencies.at(-1) ?? NaN).padStart(9)}${failures ? `  failed: ${failures}` : ''}`;
}

/** A 4 MiB-class bounce: a DSN whose returned message carries a large attachment. */
function reportBody(bytes: number): Buffer {
  const attachment = Buffer.alloc(Math.floor((bytes - 8 * 1024) * 0.72), 0x5a).toString('base64').replace(/.{76}/g, '$&\r\n');
  return Buffer.from([
    'MIME-Version: 1.0', 'Content-Type: multipart/report; report-type=delivery-status; boundary="flood"', '',
    '--flood', 'Content-Type: text/plain; charset=us-ascii', '', 'This is the mail system at host mx.example.org.', '',
    '<ann@example.org>: host mx.example.org said: 550 5.1.1 <ann@example.org>: User unknown', '',
    '--flood', 'Content-Type: message/delivery-status', '', 'Reporting-MTA: dns; mx.example.org', '',
    'Final-Recipient: rfc822; ann@example.org', 'Action: failed', 'Status: 5.1.1', 'Diagnostic-Code: smtp; 550 5.1.1 User unknown', '',
    '--flood', 'Content-Type: message/rfc822', '', 'From: app@flood.bench.test', 'To: ann@example.org', 'Subject: the original',
    'Message-ID: <original@flood.bench.test>', 'MIME-Version: 1.0', 'Content-Type: multipart/mixed; boundary="inner"', '',
    '--inner', 'Content-Type: text/plain', '', 'the original text', '--inner', 'Content-Type: application/pdf', 'Content-Transfer-Encoding: base64', '',
    attachment, '--inner--', '', '--flood--', '.', '',
  ].join('\r\n'));
}

const tally = (counts: Record<string, number>, key: string) => (counts[key] = (counts[key] ?? 0) + 1);
const replyKey = (text: string) => text.replace(/^(\d{3}(?: \d\.\d{1,3}\.\d{1,3})?).*$/s, '$1');

/** One reporter: reports back to back on one session until `until`; reconnects when cut. */
async function reporter(port: number, address: string, to: string, body: Buffer, until: number, replies: Record<string, number>): Promise<number> {
  let bytes = 0;
  while (performance.now() < until) {
    let session: SmtpSession;
    try {
      const opened = await SmtpSession.open(port, { localAddress: address });
      session = opened.session;
      if (opened.greeting.code !== 220) {
        tally(replies, `greeting ${replyKey(opened.greeting.text)}`);
        session.close();
        await sleep(1000);
        continue;
      }
    } catch {
      tally(replies, 'connect failed');
      await sleep(1000);
      continue;
    }
    try {
      await session.command('EHLO reporter.example.org');
      while (performance.now() < until) {
        const mail = await session.command('MAIL FROM:<>');
        if (mail.code !== 250) {
          tally(replies, `MAIL ${replyKey(mail.text)}`);
          await sleep(1000);
          continue;
        }
        const rcpt = await session.command(`RCPT TO:<${to}>`);
        if (rcpt.code !== 250) throw new Error(`RCPT: ${rcpt.text}`);
        await session.command('DATA');
        session.socket.write(`Message-ID: <flood.${Math.random().toString(36).slice(2)}@mx.example.org>\r\nFrom: MAILER-DAEMON@mx.example.org\r\nSubject: Undelivered Mail Returned to Sender\r\n`);
        session.socket.write(body);
        const reply = await session.reply();
        tally(replies, `DATA ${replyKey(reply.text)}`);
        if (reply.code === 250) bytes += body.length;
      }
      session.close();
    } catch (error) {
      tally(replies, `session ended: ${(error as Error).message.slice(0, 60)}`);
      session.close();
    }
  }
  return bytes;
}

/** A slow session: NOOP every 25 s, or 1 MiB of a report then a byte of DATA every 20 s. */
async function slowSession(port: number, address: string, to: string, trickle: boolean, head: Buffer, opened: Record<string, number>): Promise<SmtpSession | null> {
  try {
    const { session, greeting } = await SmtpSession.open(port, { localAddress: address });
    tally(opened, `greeting ${replyKey(greeting.text)}`);
    if (greeting.code !== 220) {
      session.close();
      return null;
    }
    await session.command('EHLO slow.example.org');
    if (trickle) {
      await session.command('MAIL FROM:<>');
      await session.command(`RCPT TO:<${to}>`);
      await session.command('DATA');
      session.socket.write(head);
      const timer = setInterval(() => session.socket.write('x'), 20_000);
      session.socket.once('close', () => clearInterval(timer));
    } else {
      const timer = setInterval(() => session.write('NOOP'), 25_000);
      session.socket.once('close', () => clearInterval(timer));
    }
    return session;
  } catch {
    tally(opened, 'connect failed');
    return null;
  }
}

/** CPU per wall second of the main thread and of the other threads, between two readings. */
function cpuSince(from: { main: number; others: number } | null, to: { main: number; others: number } | null, since: number) {
  const seconds = (performance.now() - since) / 1000;
  if (!from || !to) return { seconds, mainPerSecond: NaN, othersPerSecond: NaN };
  return { seconds, mainPerSecond: ((to.main - from.main) * 1000) / seconds, othersPerSecond: ((to.others - from.others) * 1000) / seconds };
}

async function startChild(dataDir: string): Promise<{ child: ChildProcess; ready: Ready }> {
  const execArgv = CPU_PROF ? [...process.execArgv, '--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`] : process.execArgv;
  // A session of its own: with the kernel's autogroup scheduling (on here) the load generator
  // would otherwise take its CPU from Relay's share, as it would not on a host of Relay's own.
  const child = fork(fileURLToPath(import.meta.url), ['serve', dataDir], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv, detached: true });
  const ready = await new Promise<Ready>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`relay exited with ${code} before it was ready`)));
    child.once('message', (m) => resolve(m as Ready));
  });
  return { child, ready };
}

function ask<T>(child: ChildProcess, message: object, key: string): Promise<T> {
  return new Promise((resolve) => {
    const listen = (m: Record<string, unknown>) => {
      if (!(key in m)) return;
      child.off('message', listen);
      resolve(m[key] as T);
    };
    child.on('message', listen);
    child.send(message);
  });
}

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-bench-inbound-'));
  const { child, ready } = await startChild(dataDir);
  const pool = new Pool(ready.url, { connections: 16 });
  const rssSamples: number[] = [];
  const sampler = setInterval(() => {
    const kib = rssKiB(ready.pid);
    if (kib !== null) rssSamples.push(kib);
  }, 1000);
  const slow: SmtpSession[] = [];
  try {
    // The emails the reports are about: one per reporter, and one for the slow sessions.
    const ids: string[] = [];
    for (let i = 0; i <= REPORTERS; i++) {
      const response = await pool.request({
        method: 'POST', path: '/v1/emails', headers: { authorization: `Bearer ${ready.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ from: `app@${ready.domain}`, to: 'ann@example.org', subject: `flooded ${i}`, text: 'hi' }),
      });
      const body = await response.body.json() as { id: string };
      if (response.statusCode !== 202) throw new Error(`send: ${response.statusCode} ${JSON.stringify(body)}`);
      ids.push(body.id);
    }
    const returnPaths = await ask<string[]>(child, { cmd: 'return-paths', ids }, 'returnPaths');
    const body = reportBody(REPORT_MIB * 1024 * 1024);
    console.log(`relay start (every part, embedded stores); reports of ${(body.length / 1024 / 1024).toFixed(2)} MiB; probes ${PROBE_RATE}/s each`);

    // 1. Baseline.
    await sleep(2000);
    const baseRss = rssKiB(ready.pid) ?? NaN;
    child.send({ cmd: 'stats-reset' });
    let machine = machineCpu();
    let threads = threadCpuSeconds(ready.pid);
    let began = performance.now();
    const base = probes(ready, pool);
    await sleep(BASELINE_SECONDS * 1000);
    const baseline = await base.stop();
    const baseCpu = cpuSince(threads, threadCpuSeconds(ready.pid), began);
    const baseLoop = await askStats<LoopStats>(child);
    console.log(`\nbaseline (${BASELINE_SECONDS} s, no flood): RSS ${mib(baseRss)}; event loop busy ${(baseLoop.utilization * 100).toFixed(0)} %, delay p99 ${ms(baseLoop.loopDelayP99)}, max ${ms(baseLoop.loopDelayMax)}`);
    console.log(probeLine('GET /healthz', baseline.healthz));
    console.log(probeLine('POST /v1/emails', baseline.send));
    console.log(`Relay CPU: main thread ${ms(baseCpu.mainPerSecond)} per second, other threads ${ms(baseCpu.othersPerSecond)} per second`);
    console.log(machineText(machine, machineCpu()));

    // 2. Flood.
    const floodStartRss = rssSamples.length;
    child.send({ cmd: 'stats-reset' });
    machine = machineCpu();
    threads = threadCpuSeconds(ready.pid);
    began = performance.now();
    const until = began + FLOOD_SECONDS * 1000;
    const replies: Record<string, number> = {};
    const reporters = Array.from({ length: REPORTERS }, (_, i) => reporter(ready.inboundPort, `127.0.2.${i + 1}`, returnPaths[i], body, until, replies));
    await sleep(500);
    const opened: Record<string, number> = {};
    const head = body.subarray(0, 1024 * 1024);
    const sessions = await Promise.all(Array.from({ length: SLOW_SESSIONS }, (_, i) =>
      slowSession(ready.inboundPort, `127.0.1.${Math.floor(i / 10) + 1}`, returnPaths[REPORTERS], i % 2 === 1, head, opened)));
    for (const s of sessions) if (s) slow.push(s);
    const flood = probes(ready, pool);
    await sleep(Math.max(0, until - performance.now()));
    const flooded = await flood.stop();
    const floodLoop = await askStats<LoopStats>(child);
    const floodMachine = machineText(machine, machineCpu());
    const floodCpu = cpuSince(threads, threadCpuSeconds(ready.pid), began);
    const accepted = (await Promise.all(reporters)).reduce((a, b) => a + b, 0);
    const seconds = (performance.now() - began) / 1000;
    const stillOpen = slow.filter((s) => !s.isClosed).length;
    const peakRss = Math.max(...rssSamples.slice(floodStartRss));
    console.log(`\nflood (${seconds.toFixed(0)} s): ${REPORTERS} reporters sending ${REPORT_MIB} MiB reports back to back, ${SLOW_SESSIONS} slow sessions (half NOOP every 25 s, half trickling DATA after 1 MiB)`);
    console.log(probeLine('GET /healthz', flooded.healthz), `  target p99 < ${TARGET_HEALTHZ_P99_MS} ms`);
    console.log(probeLine('POST /v1/emails', flooded.send), `  target p99 < ${TARGET_SEND_P99_MS} ms`);
    console.log(`Relay CPU: main thread ${ms(floodCpu.mainPerSecond)} per second (baseline ${ms(baseCpu.mainPerSecond)}), other threads ${ms(floodCpu.othersPerSecond)} per second (baseline ${ms(baseCpu.othersPerSecond)})`);
    console.log(`Relay event loop: busy ${(floodLoop.utilization * 100).toFixed(0)} %, delay p99 ${ms(floodLoop.loopDelayP99)}, max ${ms(floodLoop.loopDelayMax)}`);
    console.log(`Relay heap at the end of the flood: ${(floodLoop.heapUsed / 1024 / 1024).toFixed(0)} MiB used, ${(floodLoop.arrayBuffers / 1024 / 1024).toFixed(0)} MiB in buffers`);
    console.log(`reports: ${Object.entries(replies).map(([k, v]) => `${v} × ${k}`).join(', ')}; ${(accepted / 1024 / 1024 / seconds).toFixed(1)} MiB/s accepted`);
    console.log(`slow sessions: ${Object.entries(opened).map(([k, v]) => `${v} × ${k}`).join(', ')}; ${stillOpen} still open at the end`);
    console.log(`RSS: baseline ${mib(baseRss)}, peak during the flood ${mib(peakRss)} (growth ${mib(peakRss - baseRss)}), at the end ${mib(rssKiB(ready.pid) ?? NaN)}`);
    console.log(floodMachine);
    const healthzOk = percentile(flooded.healthz.latencies, 99) < TARGET_HEALTHZ_P99_MS;
    const sendOk = percentile(flooded.send.latencies, 99) < TARGET_SEND_P99_MS;
    console.log(`targets: /healthz p99 ${healthzOk ? 'met' : 'MISSED'}, POST /v1/emails p99 ${sendOk ? 'met' : 'MISSED'}`);
  } finally {
    clearInterval(sampler);
    for (const s of slow) s.close();
    await pool.close();
    await stopChild(child);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'serve') await serveRelay(process.argv[3]);
else await main();
