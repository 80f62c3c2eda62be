// docs/configuration.md: "a bad value stops the process at start (exit 78) with a message naming
// the variable". A resolver in RELAY_DNS_SERVERS listens on a port from 1 to 65535, written
// ip:port or [ipv6]:port: a port outside that range is such a bad value, not a resolver that
// fails at the first lookup (or one the resolver library reads as another port).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { runRelayWithin } from './support/relay-process.ts';

async function relayApi(env: Record<string, string>): Promise<{ code: number | null | 'running'; output: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-config-dns-servers-'));
  try {
    return await runRelayWithin(['api'], { RELAY_DATA_DIR: dataDir, ...env });
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

for (const servers of ['127.0.0.1:70000', '9.9.9.9, [::1]:65536']) {
  test(`relay api with RELAY_DNS_SERVERS=${servers} exits 78 naming the variable and the port range`, async () => {
    const { code, output } = await relayApi({ RELAY_DNS_SERVERS: servers });
    assert.is(code, 78, `exit code (78: configuration):\n${output}`);
    assert.match(output, /^relay: invalid configuration: RELAY_DNS_SERVERS: ".+": the port must be from 1 to 65535$/m, output);
  });
}

test.run();
