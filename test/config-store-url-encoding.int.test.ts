// docs/configuration.md: a bad value stops the process at start with exit 78 and a message naming
// the variable, which never repeats a URL variable's value; RELAY_MONGODB_URL and
// RELAY_EVENTSTORE_URL are "read at start" by their adapter's parser. The parsers also refuse
// what is wrong in the user information (a password with an unescaped ":", a broken
// percent-encoding) or in an option's percent-encoding, and those refusals must be told the same
// way: exit 78, naming the variable, without the user name or password.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { runRelayWithin } from './support/relay-process.ts';


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
    const run = await runRelayWithin(['api'], { RELAY_DATA_DIR: dataDir, [variable]: value });
    // Positive marker: the process stopped on its own (it did not get past its start).
    assert.type(run.code, 'number', `the process exited:\n${run.output}`);
    assert.match(run.output, new RegExp(`relay: invalid configuration: ${variable}: `), run.output);
    assert.is(run.code, 78, `exit code (78: configuration):\n${run.output}`);
    for (const secret of secrets) assert.not.ok(run.output.includes(secret), `"${secret}" reached the output:\n${run.output}`);
  });
}

test.run();
