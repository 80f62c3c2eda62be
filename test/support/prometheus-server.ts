// A private Prometheus server (Debian's prometheus package) scraping running Relay processes, for
// tests of what ops/ (the alert rules, the Grafana dashboard) do against a real server: its own
// TSDB in a temporary directory, its web API on a free loopback port, scrape and evaluation
// every second, and a copy of ops/prometheus/relay-rules.yml in which every alert's `for:` is
// shortened (`forSeconds`, 2 s by default) so that a condition held for a few evaluations fires.
// Queried through its HTTP API (/api/v1/targets, /rules, /alerts, /query).
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { waitUntil } from './eventually.ts';
import { freePort } from './free-port.ts';

export const RULES = fileURLToPath(new URL('../../ops/prometheus/relay-rules.yml', import.meta.url));
export const DASHBOARD = fileURLToPath(new URL('../../ops/grafana/relay-dashboard.json', import.meta.url));

const BINARY = process.env.PROMETHEUS_BIN ?? '/usr/bin/prometheus';

/** Why the suite cannot run (no Prometheus server), or undefined. */
export function prometheusMissing(): string | undefined {
  try {
    accessSync(BINARY, constants.X_OK);
    return undefined;
  } catch {
    return `${BINARY} is not installed (Debian: apt-get install prometheus; .ci/run installs it)`;
  }
}

export interface PromSample { metric: Record<string, string>; value: [number, string] }
export interface PromAlert { labels: Record<string, string>; state: 'pending' | 'firing'; value: string }
export interface PromRule { name: string; type: 'alerting' | 'recording'; health: string; lastError?: string; query: string; state?: string }
export interface PromTarget { labels: Record<string, string>; health: string; lastError: string; scrapeUrl: string }

export interface PrometheusServer {
  url: string;
  output(): string;
  query(expr: string): Promise<PromSample[]>;
  alerts(): Promise<PromAlert[]>;
  rules(): Promise<PromRule[]>;
  targets(): Promise<PromTarget[]>;
  /** Waits until every target has been scraped healthy at least once. */
  scraped(timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export interface PrometheusOptions {
  /** host:port of each Relay process's /metrics. */
  targets: string[];
  /** The scrape job's name (the rules assume one that starts with "relay"). */
  job?: string;
  /** Every alert's `for:` becomes this many seconds (the rules' own durations are minutes to a day). */
  forSeconds?: number;
}

/** relay-rules.yml with each `for:` duration replaced: the rest (expressions, labels) as shipped. */
export function shortenedRules(forSeconds: number): string {
  return readFileSync(RULES, 'utf8').replace(/^(\s+for:\s*)\S+\s*$/gm, `$1${forSeconds}s`);
}

async function api<T>(base: string, path: string): Promise<T> {
  const response = await fetch(`${base}${path}`);
  const body = await response.json() as { status: string; data: T; error?: string };
  if (body.status !== 'success') throw new Error(`Prometheus ${path}: ${body.error ?? response.status}`);
  return body.data;
}

export async function startPrometheus(options: PrometheusOptions): Promise<PrometheusServer> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-prometheus-'));
  const rules = join(dir, 'relay-rules.yml');
  writeFileSync(rules, shortenedRules(options.forSeconds ?? 2));
  const config = join(dir, 'prometheus.yml');
  writeFileSync(config, JSON.stringify({
    global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
    rule_files: [rules],
    scrape_configs: [{ job_name: options.job ?? 'relay', static_configs: [{ targets: options.targets }] }],
  }));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child: ChildProcess = spawn(BINARY, [
    `--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`,
    '--log.level=warn',
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const server: PrometheusServer = {
    url,
    output: () => output,
    async query(expr) {
      return (await api<{ result: PromSample[] }>(url, `/api/v1/query?query=${encodeURIComponent(expr)}`)).result;
    },
    async alerts() {
      return (await api<{ alerts: PromAlert[] }>(url, '/api/v1/alerts')).alerts;
    },
    async rules() {
      return (await api<{ groups: Array<{ rules: PromRule[] }> }>(url, '/api/v1/rules')).groups.flatMap((g) => g.rules);
    },
    async targets() {
      return (await api<{ activeTargets: PromTarget[] }>(url, '/api/v1/targets')).activeTargets;
    },
    async scraped(timeoutMs = 30_000) {
      await waitUntil(async () => {
        const targets = await server.targets();
        return targets.length === options.targets.length && targets.every((t) => t.health === 'up');
      }, `Prometheus scraped ${options.targets.join(', ')} healthy`, timeoutMs);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await waitUntil(async () => {
      if (child.exitCode !== null) throw new Error(`prometheus exited early:\n${output}`);
      try {
        return (await fetch(`${url}/-/ready`)).status === 200;
      } catch {
        return false;
      }
    }, `Prometheus at ${url} is ready`, 30_000);
  } catch (error) {
    await server.stop();
    throw error;
  }
  return server;
}
