// The forwarder's failures are structured log lines of the process (apps/pipeline/forwarder.ts),
// with `part: 'forwarder'`, where it stands and the error, and none of the message: a real
// `relay start` (the forwarder on the pipeline thread) on a data directory whose log has a file
// of its own (log.db, so the forwarder copies the events into it), whose log.db another
// connection holds the write lock of. The forwarder's publish of the email's events then fails
// ("database is locked") and is retried until the lock goes; then it forwards them.
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { exitWithin, freePort, postEmail, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';

const test = suite('forwarder failures in the log');

/** The process's JSON log lines of the forwarder. */
const forwarderLines = (relay: RelayProcess) => relay.output().split('\n').filter((line) => line.startsWith('{'))
  .map((line) => JSON.parse(line) as Record<string, any>).filter((line) => line.part === 'forwarder');

test('a publish the log refuses is a warn line of the forwarder with its positions, stream and error, and no message content', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-forwarder-log-'));
  closeSync(openSync(join(dataDir, 'log.db'), 'a'));
  let relay: RelayProcess | null = null;
  let holder: DatabaseSync | null = null;
  try {
    const env = { RELAY_DATA_DIR: dataDir };
    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], env);
    assert.is(setup.code, 0, setup.stderr);
    const apiKey = JSON.parse(setup.stdout).apiKey as string;
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    relay = spawnRelay(['start'], { ...env, PORT: String(port), RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json' });
    await waitForReady(url, relay, 60_000);

    holder = new DatabaseSync(join(dataDir, 'log.db'), { timeout: 10_000 });
    holder.exec('BEGIN IMMEDIATE');
    const content = { to: 'private.reader@example.test', subject: 'Quarterly numbers 7f3a', text: 'the secret body 91c2' };
    await postEmail(url, apiKey, { from: 'hello@example.test', ...content });
    const failed = () => forwarderLines(relay!).find((line) => line.msg?.startsWith('forwarder: publishing to the log failed'));
    // The lock is waited for up to sqlite's busy timeout (5 s) before the publish fails.
    await waitUntil(() => failed() !== undefined, 'the forwarder logs its failed publish', 30_000);
    const line = failed()!;
    assert.is(line.level, 40, JSON.stringify(line)); // warn
    assert.is(line.thread, 'pipeline', 'written by the pipeline thread, to the process\'s stdout');
    assert.is(line.topic, 'relay.events');
    assert.match(line.err?.message ?? '', /locked/, JSON.stringify(line));
    assert.type(line.position, 'string');
    assert.type(line.lastPosition, 'string');
    assert.ok(line.events >= 1, JSON.stringify(line));
    assert.type(line.streamId, 'string');
    assert.type(line.eventId, 'string');
    assert.type(line.retryInMs, 'number');

    holder.exec('ROLLBACK');
    holder.close();
    holder = null;
    await waitUntil(() => forwarderLines(relay!).some((line) => line.msg?.startsWith('forwarder recovered')), 'the forwarder publishes once the lock is gone', 30_000);

    const all = JSON.stringify(forwarderLines(relay));
    for (const value of Object.values(content)) assert.not.ok(all.includes(value), `a forwarder line holds "${value}": ${all}`);
    relay.child.kill('SIGTERM');
    assert.is(await exitWithin(relay, 30_000), 0, relay.output().slice(-2000));
  } finally {
    holder?.close();
    await relay?.kill();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
