// RELAY_INBOUND_TLS_CERT and RELAY_INBOUND_TLS_KEY name PEM files. A file that does not exist,
// one that is not PEM, or a key that is not the certificate's stops `relay inbound` at start
// with exit 78 and a message naming the variable (docs/configuration.md), as every bad setting
// does, not with Node's bare error and exit 1.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { makeTestCa } from './support/https-receiver.ts';
import { freePort, runRelayWithin, spawnRelay, waitForReady } from './support/relay-process.ts';

async function inbound(files: (dir: string) => Record<string, string>): Promise<{ code: number | null | 'running'; output: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-inbound-tls-'));
  try {
    return await runRelayWithin(['inbound'], { RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'warn', ...files(dataDir) });
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

test('RELAY_INBOUND_TLS_CERT naming a file that does not exist: exit 78 naming the variable', async () => {
  const { code, output } = await inbound((dir) => {
    writeFileSync(join(dir, 'key.pem'), 'not used\n');
    return { RELAY_INBOUND_TLS_CERT: join(dir, 'missing-cert.pem'), RELAY_INBOUND_TLS_KEY: join(dir, 'key.pem') };
  });
  assert.is(code, 78, `exit code (78: configuration):\n${output}`);
  assert.match(output, /^relay: invalid configuration: RELAY_INBOUND_TLS_CERT/m, output);
});

test('RELAY_INBOUND_TLS_KEY naming a file that is not PEM: exit 78 naming a TLS variable', async () => {
  const { code, output } = await inbound((dir) => {
    writeFileSync(join(dir, 'cert.pem'), 'hello\n');
    writeFileSync(join(dir, 'key.pem'), 'hello\n');
    return { RELAY_INBOUND_TLS_CERT: join(dir, 'cert.pem'), RELAY_INBOUND_TLS_KEY: join(dir, 'key.pem') };
  });
  assert.is(code, 78, `exit code (78: configuration):\n${output}`);
  assert.match(output, /^relay: invalid configuration: RELAY_INBOUND_TLS_(CERT|KEY)/m, output);
});

test('a key that is not the certificate\'s: exit 78 naming RELAY_INBOUND_TLS_KEY; a matching pair starts', async () => {
  const ca = makeTestCa();
  try {
    const one = ca.issue(['feedback.relay.test']);
    const other = ca.issue(['other.relay.test']);
    const mismatched = await inbound((dir) => {
      writeFileSync(join(dir, 'cert.pem'), one.cert);
      writeFileSync(join(dir, 'key.pem'), other.key);
      return { RELAY_INBOUND_TLS_CERT: join(dir, 'cert.pem'), RELAY_INBOUND_TLS_KEY: join(dir, 'key.pem') };
    });
    assert.is(mismatched.code, 78, mismatched.output);
    assert.match(mismatched.output, /^relay: invalid configuration: RELAY_INBOUND_TLS_KEY: the key in .* is not the key of the certificate/m, mismatched.output);
    // The matching pair: the process gets ready.
    const dataDir = mkdtempSync(join(tmpdir(), 'relay-inbound-tls-'));
    writeFileSync(join(dataDir, 'cert.pem'), one.cert);
    writeFileSync(join(dataDir, 'key.pem'), one.key);
    const port = await freePort();
    const run = spawnRelay(['inbound'], { RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_INBOUND_TLS_CERT: join(dataDir, 'cert.pem'), RELAY_INBOUND_TLS_KEY: join(dataDir, 'key.pem') });
    try {
      await waitForReady(`http://127.0.0.1:${port}`, run);
    } finally {
      await run.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  } finally {
    ca.remove();
  }
});

test.run();
