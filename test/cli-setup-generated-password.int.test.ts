// `relay setup` without a password generates the new user's. The user stays whatever setup
// does next, and a rerun reuses it without a password, so the generated one is told by the run
// that created the user, whatever its outcome: on stderr, and with --json in the JSON too, when
// setup stops at DNS (exit 3: "publish the DNS records and run setup again") or fails later.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { authenticateUser } from '../apps/services/management/users.ts';
import { loadConfig } from '../infra/config.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { runRelay } from './support/relay-process.ts';

const test = suite<{ dataDir: string; dns: TestDnsServer }>('relay setup and the password it generated');
test.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
});
test.before.each((ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-cli-setup-password-'));
});
test.after.each((ctx) => rmSync(ctx.dataDir, { recursive: true, force: true }));
test.after(async (ctx) => {
  await ctx.dns.close();
});

const toldOnStderr = (stderr: string) => [...stderr.matchAll(/^generated password for ops@acme\.test: (\S+)$/gm)].map((m) => m[1]);

async function signsIn(dataDir: string, password: string): Promise<void> {
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
  try {
    await authenticateUser(stores.documents, 'ops@acme.test', password);
  } finally {
    await stores.close();
  }
}

test('told when setup stops at DNS, in the JSON and on stderr; a rerun reuses the user and tells none', async ({ dataDir, dns }) => {
  const env = { RELAY_DATA_DIR: dataDir, RELAY_DNS_SERVERS: dns.address };
  const first = await runRelay(['setup', '--json', '--email', 'ops@acme.test', '--domain', 'pending.test'], env);
  assert.is(first.code, 3, first.stderr);
  assert.match(first.stderr, /created user ops@acme\.test/);
  const outcome = JSON.parse(first.stdout);
  assert.is(outcome.error, 'domain_not_verified');
  assert.type(outcome.password, 'string', first.stdout);
  assert.equal(toldOnStderr(first.stderr), [outcome.password], first.stderr);
  await signsIn(dataDir, outcome.password);

  const second = await runRelay(['setup', '--json', '--email', 'ops@acme.test', '--domain', 'pending.test', '--trust-domain'], env);
  assert.is(second.code, 0, second.stderr);
  assert.match(second.stderr, /reusing user ops@acme\.test/);
  assert.is(JSON.parse(second.stdout).password, undefined);
  assert.equal(toldOnStderr(second.stderr), []);
});

test('told on stderr when setup fails after it created the user', async ({ dataDir, dns }) => {
  // A mail host the configuration takes but no MX record can name (one label): the records to
  // check in DNS cannot be built, which only shows once the domain is there, after the user.
  const env = { RELAY_DATA_DIR: dataDir, RELAY_DNS_SERVERS: dns.address, RELAY_MAIL_HOST: 'localhost' };
  const run = await runRelay(['setup', '--email', 'ops@acme.test', '--domain', 'pending.test'], env);
  assert.is(run.code, 1, run.stderr);
  assert.match(run.stderr, /created user ops@acme\.test/);
  assert.match(run.stderr, /^relay: validation_error: the records of the domain pending\.test cannot be built: mxHost "localhost"/m);
  const told = toldOnStderr(run.stderr);
  assert.is(told.length, 1, run.stderr);
  await signsIn(dataDir, told[0]);
});

test.run();
