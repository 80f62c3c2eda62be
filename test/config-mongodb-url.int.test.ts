// RELAY_MONGODB_URL is read by the MongoDB driver while Relay loads its configuration, not first
// when the document store opens: an option the driver refuses (one it does not know, or one
// given no value) stops the start with exit 78 and a message naming the variable, and neither
// the message nor anything else printed holds the URL's password.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';

const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));
const PASSWORD = 'S3cretMongoPw';

async function relayApi(env: Record<string, string>): Promise<{ code: number | null | 'running'; output: string }> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RELAY_') && !['PORT', 'HOST', 'NODE_ENV'].includes(k)));
  const child = spawn(process.execPath, [MAIN, 'api'], {
    env: { ...base, RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json', PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', ...env },
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
}

const test = suite<{ dataDir: string }>('RELAY_MONGODB_URL is checked at start and never echoed');
test.before.each((ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-config-mongodb-url-'));
});
test.after.each((ctx) => {
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

// Port 1 on loopback: were the URL accepted, the start would fail connecting (exit 1), not 78.
for (const [what, query, named] of [
  ['an option the driver does not know', 'bogusOption=1', /bogusoption is not supported/],
  ['an option with no value', 'replicaSet=', /"replicaSet" cannot be specified with no value/],
] as const) {
  test(`relay api with ${what} in RELAY_MONGODB_URL exits 78 naming the variable`, async ({ dataDir }) => {
    const run = await relayApi({ RELAY_DATA_DIR: dataDir, RELAY_MONGODB_URL: `mongodb://admin:${PASSWORD}@127.0.0.1:1/relay?${query}` });
    assert.is(run.code, 78, `exit code (78: configuration):\n${run.output}`);
    assert.match(run.output, /relay: invalid configuration: RELAY_MONGODB_URL: /, run.output);
    assert.match(run.output, named, run.output);
    assert.not.ok(run.output.includes(PASSWORD), run.output);
  });
}

test.run();
