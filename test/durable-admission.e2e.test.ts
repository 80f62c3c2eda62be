// A 202 is a promise: it leaves the server only after the writes behind it are committed
// (fsync'd: the WAL is synced before anyone is answered, infra/sqlite/group-commit.ts). The
// API runs in a fixture process whose every sqlite commit is held until this test releases it
// (test/fixtures/held-commit-api.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { embeddedFiles } from '../apps/runtime.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { startFixture, type FixtureProcess } from './support/fixture-process.ts';
import { freePort, runRelay, spawnRelay, waitForReady } from './support/relay-process.ts';

const test = suite('durable admission');
const dataDir = mkdtempSync(join(tmpdir(), 'relay-durable-'));
let apiKey = '';

test.before(async () => {
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'owner@example.test', '--password', 'a long enough password', '--workspace', 'Durable', '--project', 'web', '--environment', 'production', '--activate', '--domain', 'example.test'], { RELAY_DATA_DIR: dataDir });
  assert.is(setup.code, 0, setup.stderr);
  apiKey = JSON.parse(setup.stdout).apiKey;
});

test.after(() => rmSync(dataDir, { recursive: true, force: true }));

function send(url: string, idempotencyKey: string) {
  const settled = { done: false };
  const response = fetch(`${url}/v1/emails`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
    body: JSON.stringify({ from: 'hello@example.test', to: 'ann@example.test', subject: 'Durable', text: 'a promise' }),
  }).finally(() => (settled.done = true));
  response.catch(() => {});
  return { response, settled };
}

/** EmailAccepted events in the data directory's event store, as a fresh reader sees them. */
async function admittedEmails(): Promise<number> {
  const store = new SqliteEventStore(embeddedFiles(dataDir).events);
  try {
    return (await store.readAll({ filter: { eventTypePrefixes: ['EmailAccepted'] } })).length;
  } finally {
    await store.close();
  }
}

const heldLines = (fixture: FixtureProcess) => fixture.lines.filter((l) => l.startsWith('held '));
/**
 * The server has answered a request made after this point (GET /healthz needs no commit): an
 * answer it had written before, to another socket of this client, has arrived by then.
 */
const answeredSince = async (url: string) => void (await fetch(`${url}/healthz`)).arrayBuffer();

async function startHeld(): Promise<{ fixture: FixtureProcess; url: string }> {
  const fixture = startFixture(new URL('./fixtures/held-commit-api.ts', import.meta.url), [dataDir]);
  const ready = await fixture.waitForLine((l) => l.startsWith('ready '), 'the API to listen');
  return { fixture, url: ready.slice('ready '.length) };
}

test('no 202 leaves the server while a commit behind it is held; it comes once every commit returned', async () => {
  const { fixture, url } = await startHeld();
  try {
    const { response, settled } = send(url, 'held-then-released');
    const seen: string[] = [];
    // Each commit the admission waits for is held (one per file may be held at once); while
    // any is, the client has no answer. They are released one at a time, oldest first.
    while (!settled.done) {
      const next = seen.length + 1;
      const line = await Promise.race([
        fixture.waitForLine(() => heldLines(fixture).length >= next, `commit ${next} to be held`, 20_000).then(() => heldLines(fixture)[next - 1]),
        response.then(() => null, () => null),
      ]);
      if (line === null) break;
      seen.push(line);
      await answeredSince(url);
      assert.not.ok(settled.done, `the request was answered while "${line}" was still held`);
      fixture.child.stdin!.write('release\n');
    }
    const answered = await response;
    assert.is(answered.status, 202);
    // The rate slots, the content key, the charge and the email, all in relay.db.
    assert.ok(seen.some((l) => l.includes(' relay.db ')), seen.join('\n'));
  } finally {
    fixture.child.kill('SIGKILL');
    await fixture.exited;
  }
});

test('kill -9 while the email\'s commit is held: no 202 for that request, and no email after a restart', async () => {
  const before = await admittedEmails();
  const { fixture, url } = await startHeld();
  const { response, settled } = send(url, 'killed-before-commit');
  // Release commits until one on relay.db is held: the email's append is in it (or, should it
  // not be, the email waits behind it and is not written either).
  for (let next = 1; ; next++) {
    await fixture.waitForLine(() => heldLines(fixture).length >= next, `commit ${next} to be held`, 20_000);
    if (heldLines(fixture)[next - 1].includes(' relay.db ')) break;
    fixture.child.stdin!.write('release\n');
  }
  await answeredSince(url);
  assert.not.ok(settled.done, 'answered before the email was committed');
  fixture.child.kill('SIGKILL');
  await fixture.exited;
  const outcome = await response.then((r) => `HTTP ${r.status}`, (error: Error) => `failed: ${error.message}`);
  assert.match(outcome, /^failed/, `the client got ${outcome}`);

  // Nothing of that email is in the store; its retry is then a first admission.
  assert.is(await admittedEmails(), before);
  const port = await freePort();
  const relay = spawnRelay(['api'], { RELAY_DATA_DIR: dataDir, PORT: String(port) });
  try {
    await waitForReady(`http://127.0.0.1:${port}`, relay);
    const retry = await send(`http://127.0.0.1:${port}`, 'killed-before-commit').response;
    assert.is(retry.status, 202);
    assert.is(await admittedEmails(), before + 1);
  } finally {
    await relay.stop();
  }
});

test.run();
