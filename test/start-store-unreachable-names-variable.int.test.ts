// A distributed store that cannot be reached at start stops the process with the driver's bare
// message, which names neither the store nor the variable that points at it:
//   relay api, RELAY_MONGODB_URL unreachable:   "relay: connect ECONNREFUSED 127.0.0.1:1"
//   relay forwarder, RELAY_KAFKA_BROKERS down:  "relay: Connection error: connect ECONNREFUSED 127.0.0.1:1"
// each followed by "(RELAY_LOG_LEVEL=debug shows where it failed)". With three store URLs set
// (docs/distributed.md), often all on one host, the operator cannot tell which one to fix, while
// a listener that cannot bind is reported naming its variable (infra/config.ts ListenError).
//
// Where: apps/runtime.ts:333-349 (openDocumentStore, openLog: the connect errors propagate as
// they are) and apps/cli/main.ts:75 (describeFailure prints e.message).
//
// Expected: one line naming the store and its variable, e.g. "relay: cannot connect to the
// document store (RELAY_MONGODB_URL, 127.0.0.1:1): connect ECONNREFUSED", never the URL's
// password; a non-zero exit (1: the store is down, not necessarily misconfigured).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { freePort, runRelayWithin } from './support/relay-process.ts';

const PASSWORD = 'S3cretStorePw';

const test = suite<{ dataDir: string }>('a store unreachable at start is named in the message');
test.before.each((ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-store-unreachable-'));
});
test.after.each((ctx) => {
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

test('relay api with RELAY_MONGODB_URL where nothing listens exits non-zero naming RELAY_MONGODB_URL', async ({ dataDir }) => {
  const down = `127.0.0.1:${await freePort()}`; // nothing listens there
  // Server selection cut to 1 s so that the start gives up quickly.
  const run = await runRelayWithin(['api'], { RELAY_DATA_DIR: dataDir, RELAY_MONGODB_URL: `mongodb://admin:${PASSWORD}@${down}/relay?serverSelectionTimeoutMS=1000` });
  assert.ok(typeof run.code === 'number' && run.code !== 0, `exit code ${run.code}:\n${run.output}`);
  assert.match(run.output, /^relay: .*RELAY_MONGODB_URL/m, run.output);
  assert.not.ok(run.output.includes(PASSWORD), run.output);
});

test('relay forwarder with RELAY_KAFKA_BROKERS where nothing listens exits non-zero naming RELAY_KAFKA_BROKERS', async ({ dataDir }) => {
  const down = `127.0.0.1:${await freePort()}`;
  const run = await runRelayWithin(['forwarder'], { RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'error', RELAY_KAFKA_BROKERS: down });
  assert.ok(typeof run.code === 'number' && run.code !== 0, `exit code ${run.code}:\n${run.output}`);
  assert.match(run.output, /^relay: .*RELAY_KAFKA_BROKERS/m, run.output);
});

test.run();
