// RELAY_EVENTSTORE_URL may hold a password (esdb://user:pass@host…), like every URL variable
// (docs/configuration.md): it never reaches the terminal or the log, and a bad value is refused
// at start with exit 78 and a message naming the variable. Relay reads the connection string
// with the EventStoreDB client's own parser while it loads its configuration: an option the
// client does not know (a misspelling it would ignore) or a value it cannot read is refused
// there, naming the option; so is a duration it would misread (it reads whole milliseconds and
// stops at a unit: defaultDeadline=10s would be 10 ms). The client writes the connection string it is given to stderr for
// tlsVerifyCert=false; it is given the string without the user name and password, which it
// receives separately.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { exitWithin, spawnRelay } from './support/relay-process.ts';

const relayApi = (env: Record<string, string>) => spawnRelay(['api'], { RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json', PORT: '0', ...env });

const PASSWORD = 'S3cretEsdbPw';

const test = suite<{ dataDir: string }>('RELAY_EVENTSTORE_URL is checked at start and never echoed');
test.before.each((ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-config-esdb-url-'));
});
test.after.each((ctx) => {
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

// Port 1 on loopback: nothing answers, and the client connects lazily, so `relay api` starts.
test('relay api with tlsVerifyCert=false (a common development setting) in RELAY_EVENTSTORE_URL never prints the password', async ({ dataDir }) => {
  const run = relayApi({ RELAY_DATA_DIR: dataDir, RELAY_EVENTSTORE_URL: `esdb://admin:${PASSWORD}@127.0.0.1:1?tls=true&tlsVerifyCert=false` });
  try {
    // Positive marker: the process got past opening its stores and listens.
    await waitUntil(() => /"msg":"listening"/.test(run.output()), 'relay api listens', 30_000);
  } finally {
    await run.stop();
  }
  // The client did write its connection string (its warning quotes it): the path that used to show the password ran.
  assert.match(run.output(), /esdb:\/\/127\.0\.0\.1:1\?tls=true&tlsVerifyCert=false/, run.output());
  assert.not.ok(run.output().includes(PASSWORD), `the event store password reached the process output:\n${run.output()}`);
});

for (const [what, query, named] of [
  ['a misspelt option (tsl=false), which the client would ignore', 'tls=false&tsl=false', /unknown option "tsl"/],
  ['an unreadable option value (tls=fasle)', 'tls=fasle', /tls: expected true or false/],
  ['an unknown node preference', 'tls=false&nodePreference=boss', /nodePreference: expected leader or follower/],
  // The client reads durations with parseInt, in milliseconds: "10s" would be a 10 ms deadline.
  ['a deadline with a unit (defaultDeadline=10s), which the client would read as 10 ms', 'tls=false&defaultDeadline=10s', /defaultDeadline: expected a whole number of milliseconds .*got "10s", which the client would read as 10 milliseconds/],
  ['a keep-alive with a unit (keepAliveInterval=30s)', 'keepAliveInterval=30s&tls=false', /keepAliveInterval: expected a whole number of milliseconds/],
] as const) {
  test(`${what} in RELAY_EVENTSTORE_URL exits 78 naming the variable and the option`, async ({ dataDir }) => {
    const run = relayApi({ RELAY_DATA_DIR: dataDir, RELAY_EVENTSTORE_URL: `esdb://admin:${PASSWORD}@127.0.0.1:1?${query}` });
    const code = await exitWithin(run, 30_000);
    assert.is(code, 78, `exit code (78: configuration):\n${run.output()}`);
    assert.match(run.output(), /relay: invalid configuration: RELAY_EVENTSTORE_URL: /, run.output());
    assert.match(run.output(), named, run.output());
    assert.not.ok(run.output().includes(PASSWORD), run.output());
  });
}

test.run();
