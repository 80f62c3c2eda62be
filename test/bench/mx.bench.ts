// Head-of-line isolation under `mx` delivery: BENCH_MX_MESSAGES emails (default 10,000, one
// recipient each) to BENCH_MX_SITES sites (default 20: domains s0.test … s19.test, each with
// its own MX host), all served on loopback by one real SMTP server (RELAY_MX_PORT) that answers
// by recipient domain, through `relay start`'s parts in this process (embedded stores, the
// real sender, dispatcher and mx transport). Two runs on fresh data:
//   1. every site accepts at once;
//   2. site s0 answers `421 4.7.28 rate limited` to every second transaction.
// The figure: the other sites' messages per second, from the first admission to the last of
// them arriving at the sink, and the ratio of run 2 to run 1 (isolation holds when ≥ 0.9).
// Site limits are raised by a shaping file so that the machine, not the defaults, is measured;
// retries are scaled down (RELAY_DELIVERY_RETRY_SCALE) so s0's mail is retried within the run.
//
//   node test/bench/mx.bench.ts          (or: npm run bench -- mx)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestApp } from '../support/app.ts';
import { deliveryTenant, send } from '../support/delivery.ts';
import { startDnsServer, type ZoneRecord } from '../support/dns-server.ts';
import { smtpError, startSmtpSink } from '../support/smtp-sink.ts';
import { machineCpu, machineText } from './bench-child.ts';

const MESSAGES = Number(process.env.BENCH_MX_MESSAGES ?? 10_000);
const SITES = Number(process.env.BENCH_MX_SITES ?? 20);
const TENANTS = 10;
const IN_FLIGHT = 32;
const TIMEOUT_MS = Number(process.env.BENCH_MX_TIMEOUT_SECONDS ?? 900) * 1000;

interface RunResult { seconds: number; others: number; perSecond: number; throttled: number; machine: string; cpuMsPerMessage: number }

async function run(throttling: boolean): Promise<RunResult> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-mx-bench-'));
  const shaping = join(dir, 'shaping.conf');
  writeFileSync(shaping, '*.test connections=8 messages_per_connection=1000 messages_per_minute=1000000\n');
  const dns = await startDnsServer([]);
  dns.negativeTtl = 300; // as real zones: absent MTA-STS and TLS-RPT records are cached
  let s0Transactions = 0;
  let throttled = 0;
  const arrivals: number[] = [];
  const sink = await startSmtpSink({
    onRcptTo: (address) => {
      if (!throttling || !address.address.endsWith('@s0.test')) return;
      if (++s0Transactions % 2 === 0) {
        throttled++;
        return smtpError(421, '4.7.28 rate limited');
      }
    },
    onData: (_raw, session) => {
      if (!session.envelope.rcptTo.some((r) => r.address.endsWith('@s0.test'))) arrivals.push(Date.now());
      return {};
    },
  });
  const t = await startTestApp({
    RELAY_DELIVERY: 'mx', RELAY_DNS_SERVERS: dns.address, RELAY_MX_PORT: String(sink.port), RELAY_MX_ALLOW: '127.0.0.1',
    RELAY_SHAPING_FILE: shaping, RELAY_DELIVERY_RETRY_SCALE: '0.001',
  }, { processors: true });
  try {
    const tenants: Awaited<ReturnType<typeof deliveryTenant>>[] = [];
    for (let i = 0; i < TENANTS; i++) tenants.push(await deliveryTenant(t));
    const zone: ZoneRecord[] = tenants.flatMap((x) => x.zone);
    for (let s = 0; s < SITES; s++) zone.push({ name: `s${s}.test`, type: 'MX', data: { preference: 10, exchange: `mx.s${s}.test` }, ttl: 300 }, { name: `mx.s${s}.test`, type: 'A', data: '127.0.0.1', ttl: 300 });
    dns.setZone(zone);
    const others = Math.floor(MESSAGES - MESSAGES / SITES);
    const cpuAtStart = process.cpuUsage();
    const machineAtStart = machineCpu();
    const started = Date.now();
    let next = 0;
    await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
      for (let i = next++; i < MESSAGES; i = next++) {
        const tenant = tenants[i % TENANTS];
        await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: `r${i}@s${i % SITES}.test`, subject: 'bench', text: 'hello' });
      }
    }));
    while (arrivals.length < others) {
      if (Date.now() - started > TIMEOUT_MS) throw new Error(`only ${arrivals.length} of ${others} arrived in ${TIMEOUT_MS / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const seconds = (Math.max(...arrivals) - started) / 1000;
    const cpu = process.cpuUsage(cpuAtStart);
    return { seconds, others, perSecond: others / seconds, throttled, machine: machineText(machineAtStart, machineCpu()), cpuMsPerMessage: (cpu.user + cpu.system) / 1000 / others };
  } finally {
    await t.close();
    await sink.close();
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(`mx: ${MESSAGES} messages to ${SITES} sites on one loopback SMTP server, ${cpus().length} CPUs, ${new Date().toISOString()}`);
const plain = await run(false);
console.log(`  no throttling:       the other ${plain.others} delivered in ${plain.seconds.toFixed(1)} s: ${plain.perSecond.toFixed(0)}/s, ${plain.cpuMsPerMessage.toFixed(2)} ms CPU each (${plain.machine})`);
const throttledRun = await run(true);
console.log(`  s0 throttling (421): the other ${throttledRun.others} delivered in ${throttledRun.seconds.toFixed(1)} s: ${throttledRun.perSecond.toFixed(0)}/s, ${throttledRun.cpuMsPerMessage.toFixed(2)} ms CPU each, ${throttledRun.throttled} 421s (${throttledRun.machine})`);
const ratio = throttledRun.perSecond / plain.perSecond;
console.log(`  ratio: ${ratio.toFixed(3)} (isolation holds at ≥ 0.90)`);
