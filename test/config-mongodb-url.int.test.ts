// RELAY_MONGODB_URL is read by the MongoDB driver while Relay loads its configuration, not first
// when the document store opens: an option the driver refuses (one it does not know, or one
// given no value) stops the start with exit 78 and a message naming the variable, and neither
// the message nor anything else printed holds the URL's password.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { runRelayWithin } from './support/relay-process.ts';

const PASSWORD = 'S3cretMongoPw';

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
    const run = await runRelayWithin(['api'], { RELAY_DATA_DIR: dataDir, RELAY_MONGODB_URL: `mongodb://admin:${PASSWORD}@127.0.0.1:1/relay?${query}` });
    assert.is(run.code, 78, `exit code (78: configuration):\n${run.output}`);
    assert.match(run.output, /relay: invalid configuration: RELAY_MONGODB_URL: /, run.output);
    assert.match(run.output, named, run.output);
    assert.not.ok(run.output.includes(PASSWORD), run.output);
  });
}

test.run();
