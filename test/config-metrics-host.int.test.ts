// docs/configuration.md: "a bad value stops the process at start (exit 78) with a message naming
// the variable". A host name a listener cannot resolve is such a value: HOST (the HTTP server),
// RELAY_METRICS_HOST (the metrics listener) and RELAY_INBOUND_SMTP_HOST (the feedback SMTP
// server) each stop the start with exit 78 and a message naming that variable.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { runRelayWithin } from './support/relay-process.ts';

/** `relay <args>` on a data directory of its own, removed after. */
async function relay(args: string[], env: Record<string, string>): Promise<{ code: number | null | 'running'; output: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-config-listen-host-'));
  try {
    return await runRelayWithin(args, { RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'warn', ...env });
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
