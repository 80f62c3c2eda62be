// DKIM keys are made on a thread of their own, never on libuv's thread pool (where the durable
// commit before every 202 waits for its fdatasync), one at a time, with a bounded queue in which
// each workspace has a line of its own.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { KeyGenerationBusyError, MAX_WAITING_KEYS, MAX_WAITING_KEYS_PER_WORKSPACE, generateDkimKeyPairOnThread } from '../infra/dns/dkim-keys.ts';
import { startFixture } from './support/fixture-process.ts';

const test = suite('DKIM keys off the shared pools');

test('a key is made while libuv\'s only pool thread is blocked', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-dkim-pool-'));
  const fifo = join(dir, 'fifo');
  execFileSync('mkfifo', [fifo]);
  const fixture = startFixture(new URL('./fixtures/dkim-key-while-pool-blocked.ts', import.meta.url), [fifo], { UV_THREADPOOL_SIZE: '1' });
  try {
    const line = await fixture.waitForLine((l) => l.startsWith('made'), 'the key is made with the pool blocked', 60_000);
    assert.is(line, 'made true true 2048');
    assert.not.ok(fixture.lines.includes('pool released'), 'the pool was still blocked when the key was made');
  } finally {
    // Opening the writing end lets the blocked open() finish, and the fixture end.
    closeSync(openSync(fifo, 'w'));
    await fixture.exited;
    rmSync(dir, { recursive: true, force: true });
  }
  assert.ok(fixture.lines.includes('pool released'));
});

const outcome = (work: Promise<unknown>) => work.then(() => 'made', (error) => (error instanceof KeyGenerationBusyError ? 'busy' : `error ${error}`));
const count = (outcomes: string[], what: string) => outcomes.filter((o) => o === what).length;

test(`one key is made at a time; ${MAX_WAITING_KEYS_PER_WORKSPACE} of a workspace and ${MAX_WAITING_KEYS} in all wait, more are refused at once`, async () => {
  const small = { modulusLength: 1024 };
  const flooder = Array.from({ length: 1 + MAX_WAITING_KEYS_PER_WORKSPACE + 5 }, () => outcome(generateDkimKeyPairOnThread('ws_flood', small)));
  // Each behind the flood's running key and its waiting ones, in a line of its own.
  const others = Array.from({ length: MAX_WAITING_KEYS - MAX_WAITING_KEYS_PER_WORKSPACE }, (_, i) => outcome(generateDkimKeyPairOnThread(`ws_other${i}`, small)));
  const oneTooMany = outcome(generateDkimKeyPairOnThread('ws_late', small));
  const flooded = await Promise.all(flooder);
  assert.is(count(flooded, 'made'), 1 + MAX_WAITING_KEYS_PER_WORKSPACE, flooded.join(' '));
  assert.is(count(flooded, 'busy'), 5, flooded.join(' '));
  assert.ok((await Promise.all(others)).every((o) => o === 'made'));
  assert.is(await oneTooMany, 'busy');
  // The queue drained: the next one is made again.
  assert.is(await outcome(generateDkimKeyPairOnThread('ws_late', small)), 'made');
});

test('a key too short for RFC 8301 is refused', async () => {
  const refused = await generateDkimKeyPairOnThread('ws_short', { modulusLength: 512 }).then(() => null, (error: unknown) => error);
  assert.instance(refused, RangeError);
});

test.run();
