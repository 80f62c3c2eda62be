// docs/configuration.md: a bad value stops the process at start with exit 78 and a message naming
// the variable, which never repeats a URL variable's value; RELAY_MONGODB_URL and
// RELAY_EVENTSTORE_URL are "read at start" by their adapter's parser. The parsers also refuse
// what is wrong in the user information (a password with an unescaped ":", a broken
// percent-encoding) or in an option's percent-encoding, and those refusals must be told the same
// way: exit 78, naming the variable, without the user name or password.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';

const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));

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

const test = suite<{ dataDir: string }>('store URLs the adapters refuse for their user information or encoding');
test.before.each((ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-store-url-'));
});
test.after.each((ctx) => {
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

// Port 1 on loopback: nothing answers there.
for (const [what, variable, value, secrets] of [
  ['a MongoDB password with an unescaped ":"', 'RELAY_MONGODB_URL', 'mongodb://admin:S3cret:MongoPw@127.0.0.1:1/relay', ['S3cret', 'MongoPw']],
  ['a MongoDB password with a broken percent-encoding', 'RELAY_MONGODB_URL', 'mongodb://admin:S3cret%ZZMongoPw@127.0.0.1:1/relay', ['S3cret', 'MongoPw']],
  ['a MongoDB user name with an unescaped "["', 'RELAY_MONGODB_URL', 'mongodb://relay[ops]:S3cretMongoPw@127.0.0.1:1/relay', ['relay[ops]', 'S3cretMongoPw']],
  ['an EventStoreDB option with a broken percent-encoding', 'RELAY_EVENTSTORE_URL', 'esdb://admin:S3cretEsdbPw@127.0.0.1:1?tls=false&connectionName=relay-100%', ['S3cretEsdbPw']],
] as const) {
  test(`${what} exits 78 naming ${variable}, and never shows the user information`, async ({ dataDir }) => {
    const run = await relayApi({ RELAY_DATA_DIR: dataDir, [variable]: value });
    // Positive marker: the process stopped on its own (it did not get past its start).
    assert.type(run.code, 'number', `the process exited:\n${run.output}`);
    assert.match(run.output, new RegExp(`relay: invalid configuration: ${variable}: `), run.output);
    assert.is(run.code, 78, `exit code (78: configuration):\n${run.output}`);
    for (const secret of secrets) assert.not.ok(run.output.includes(secret), `"${secret}" reached the output:\n${run.output}`);
  });
}

test.run();
