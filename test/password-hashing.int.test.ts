// Password hashing runs on a thread of its own, never on libuv's thread pool (where the durable
// commit before every 202 waits for its fdatasync), one hash at a time with a bounded queue.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, openSync, closeSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { hashPassword, verifyPassword } from '../apps/services/management/passwords.ts';
import { RelayError } from '../domain/errors.ts';
import { MAX_WAITING_HASHES } from '../infra/secrets/scrypt-thread.ts';
import { startFixture } from './support/fixture-process.ts';

const test = suite('password hashing off the shared pools');

test('a password is hashed and verified while libuv\'s only pool thread is blocked', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-pool-'));
  const fifo = join(dir, 'fifo');
  execFileSync('mkfifo', [fifo]);
  const fixture = startFixture(new URL('./fixtures/hash-while-pool-blocked.ts', import.meta.url), [fifo], { UV_THREADPOOL_SIZE: '1' });
  try {
    const line = await fixture.waitForLine((l) => l.startsWith('verified'), 'the password is verified with the pool blocked', 60_000);
    assert.is(line, 'verified true false');
    assert.not.ok(fixture.lines.includes('pool released'), 'the pool was still blocked when hashing finished');
  } finally {
    // Opening the writing end lets the blocked open() finish, and the fixture end.
    closeSync(openSync(fifo, 'w'));
    await fixture.exited;
    rmSync(dir, { recursive: true, force: true });
  }
  assert.ok(fixture.lines.includes('pool released'));
});

test(`one hash runs, ${MAX_WAITING_HASHES} wait, and more are refused at once with 503 service_unavailable`, async () => {
  const hash = await hashPassword('a password long enough');
  const outcomes = await Promise.all(Array.from({ length: MAX_WAITING_HASHES + 10 }, () => verifyPassword('a wrong password here', hash).then(
    (ok) => `verified ${ok}`,
    (error) => (error instanceof RelayError ? `${error.code} ${error.details.retryAfterSeconds}` : `error ${error}`),
  )));
  assert.equal(outcomes.filter((o) => o === 'verified false').length, MAX_WAITING_HASHES + 1);
  assert.equal(outcomes.filter((o) => o === 'service_unavailable 1').length, 9);
  // The queue drained: the next one is hashed again.
  assert.ok(await verifyPassword('a password long enough', hash));
});

test.run();
