// RELAY_MONGODB_URL is "read at start by the driver: an option it does not know or cannot read is
// refused" (docs/configuration.md). But the driver reads its whole-number options with parseInt
// (node_modules/mongodb/lib/utils.js parseInteger), which stops at the first non-digit and takes
// no unit, so a duration written with one is accepted and misread: socketTimeoutMS=10s is a 10 ms
// socket timeout, serverSelectionTimeoutMS=30s is 30 ms, connectTimeoutMS=1e4 is 1 ms,
// socketTimeoutMS=0x10 is 0 (no timeout at all). Relay starts on that, and operations then fail
// (or never time out) far from the setting's cause. docs/configuration.md invites writing
// socketTimeoutMS ("the URL's own value wins"). RELAY_EVENTSTORE_URL refuses exactly this
// (infra/esdb/event-store.ts:95-123, "defaultDeadline=10s … which the client would read as 10").
//
// Where: infra/mongodb/document-store.ts:534-542 (mongoUrlProblem only asks the driver) and
// infra/config.ts:447-448.
//
// Expected: the driver's integer options (…MS, maxPoolSize, minPoolSize, maxConnecting, w,
// zlibCompressionLevel, …) must be whole numbers as written (/^\d+$/, or -1 where the driver
// allows it): else exit 78 with "relay: invalid configuration: RELAY_MONGODB_URL:
// socketTimeoutMS: expected a whole number of milliseconds, without a unit; got "10s", which
// the driver would read as 10 milliseconds", never showing the URL's password.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { runRelayWithin } from './support/relay-process.ts';

const PASSWORD = 'S3cretMongoPw';

const test = suite<{ dataDir: string }>('RELAY_MONGODB_URL: a duration the driver would misread is refused at start');
test.before.each((ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-config-mongodb-durations-'));
});
test.after.each((ctx) => {
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

// Port 1 on loopback: nothing answers, so a URL accepted here makes the start fail connecting
// (exit 1, after at most the 2 s of server selection the query sets), never 78.
for (const [option, value, readAs] of [
  ['socketTimeoutMS', '10s', '10 ms'],
  ['connectTimeoutMS', '1e4', '1 ms'],
  ['socketTimeoutMS', '0x10', '0: no timeout'],
  ['serverSelectionTimeoutMS', '30s', '30 ms'],
] as const) {
  test(`relay api with ${option}=${value} (which the driver reads as ${readAs}) in RELAY_MONGODB_URL exits 78 naming the variable and the option`, async ({ dataDir }) => {
    const selection = option === 'serverSelectionTimeoutMS' ? '' : '&serverSelectionTimeoutMS=2000';
    const run = await runRelayWithin(['api'], { RELAY_DATA_DIR: dataDir, RELAY_MONGODB_URL: `mongodb://admin:${PASSWORD}@127.0.0.1:1/relay?${option}=${value}${selection}` });
    assert.is(run.code, 78, `exit code (78: configuration):\n${run.output}`);
    assert.match(run.output, new RegExp(`^relay: invalid configuration: RELAY_MONGODB_URL: .*${option}`, 'm'), run.output);
    assert.not.ok(run.output.includes(PASSWORD), run.output);
  });
}

test.run();
