// Which alerts of ops/prometheus/relay-rules.yml fire on what a real process's
// /metrics serves, held for an hour. The scraped samples become promtool input series (labelled
// as Prometheus would: job, instance), timestamps made relative to the scrape; every alert is
// then expected quiet, and promtool's failures name those that fire.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import type { Sample } from './metrics.ts';

const run = promisify(execFile);
const RULES = fileURLToPath(new URL('../../ops/prometheus/relay-rules.yml', import.meta.url));

export async function promtoolMissing(): Promise<string | undefined> {
  try {
    await run('promtool', ['--version']);
    return undefined;
  } catch {
    return 'promtool is not installed';
  }
}

const alertNames = (): string[] => (parseYaml(readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Array<{ alert?: string }> }> })
  .groups.flatMap((g) => g.rules).flatMap((r) => (r.alert ? [r.alert] : []));

const isTimestamp = (name: string) => /_timestamp_seconds$|^relay_part_last_progress_seconds$|^process_start_time_seconds$/.test(name);

const labelText = (labels: Record<string, string>) => Object.entries(labels).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(',');

/** The alerts that fire at `evalMinutes` when every sample holds its value from minute 0 on. */
export async function firingAlerts(samples: Sample[], scrapedAtMs: number, evalMinutes = 60): Promise<string[]> {
  const target = { job: 'relay', instance: 'relay-under-test:3000' };
  const minutes = evalMinutes + 5;
  const series = [{ series: `up{${labelText(target)}}`, values: `1x${minutes}` }];
  for (const s of samples) {
    if (!Number.isFinite(s.value)) continue;
    const value = isTimestamp(s.name) ? s.value - scrapedAtMs / 1000 : s.value;
    series.push({ series: `${s.name}{${labelText({ ...s.labels, ...target })}}`, values: `${value}x${minutes}` });
  }
  const dir = mkdtempSync(join(tmpdir(), 'relay-alerts-'));
  try {
    const file = join(dir, 'test.yml');
    writeFileSync(file, JSON.stringify({
      rule_files: [RULES],
      evaluation_interval: '1m',
      tests: [{
        interval: '1m',
        input_series: series,
        alert_rule_test: alertNames().map((alertname) => ({ eval_time: `${evalMinutes}m`, alertname, exp_alerts: [] })),
      }],
    }));
    try {
      await run('promtool', ['test', 'rules', file]);
      return [];
    } catch (error) {
      const output = `${(error as { stdout?: string }).stdout ?? ''}${(error as { stderr?: string }).stderr ?? ''}`;
      const fired = [...output.matchAll(/alertname: (\w+)/g)].map((m) => m[1]);
      if (fired.length === 0) throw new Error(`promtool failed: ${output}`);
      return [...new Set(fired)];
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
