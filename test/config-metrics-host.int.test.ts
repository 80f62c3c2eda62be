// docs/configuration.md: "a bad value stops the process at start (exit 78) with a message naming
// the variable". A host name a listener cannot resolve is such a value: HOST (the HTTP server),
// RELAY_METRICS_HOST (the metrics listener) and RELAY_INBOUND_SMTP_HOST (the feedback SMTP
// server) each stop the start with exit 78 and a message naming that variable.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));

async function relay(args: string[], env: Record<string, string>): Promise<{ code: number | null | 'running'; output: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-config-listen-host-'));
  try {
    const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RELAY_') && !['PORT', 'HOST', 'NODE_ENV'].includes(k)));
    const child = spawn(process.execPath, [MAIN, ...args], {
      env: { ...base, RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'warn', PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([
      new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c))),
      new Promise<'running'>((resolve) => (timer = setTimeout(() => resolve('running'), 30_000))),
    ]);
    clearTimeout(timer);
    if (code === 'running') {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('close', resolve));
    }
    return { code, output };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

test('relay api with a RELAY_METRICS_HOST that does not resolve exits 78 naming the variable', async () => {
  const { code, output } = await relay(['api'], { RELAY_METRICS_PORT: '0', RELAY_METRICS_HOST: 'metrics.invalid' });
  assert.is(code, 78, `exit code (78: configuration):\n${output}`);
  assert.match(output, /RELAY_METRICS_HOST/, output);
  assert.match(output, /^relay: invalid configuration: RELAY_METRICS_HOST: cannot resolve "metrics\.invalid"/m, output);
});

for (const [args, variable] of [[['api'], 'HOST'], [['inbound'], 'RELAY_INBOUND_SMTP_HOST']] as const) {
  test(`relay ${args.join(' ')} with a ${variable} that does not resolve exits 78 naming the variable`, async () => {
    const { code, output } = await relay([...args], { [variable]: 'listener.invalid' });
    assert.is(code, 78, `exit code (78: configuration):\n${output}`);
    assert.match(output, new RegExp(`^relay: invalid configuration: ${variable}: cannot resolve "listener\\.invalid"`, 'm'), output);
  });
}

test.run();
