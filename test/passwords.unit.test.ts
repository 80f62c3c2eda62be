// Password hashing: scrypt in PHC format, random salt, constant-time verification, and
// refusal of malformed or over-expensive stored hashes.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { hashPassword, needsRehash, SCRYPT_PARAMS, verifyAgainstDecoy, verifyPassword } from '../apps/services/management/passwords.ts';
import { passwordProblem, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '../domain/management.ts';

test('a hash verifies its own password and no other', async () => {
  const hash = await hashPassword('correct horse battery staple');
  assert.ok(await verifyPassword('correct horse battery staple', hash));
  assert.not.ok(await verifyPassword('correct horse battery stapl', hash));
  assert.not.ok(await verifyPassword('Correct horse battery staple', hash));
  assert.not.ok(await verifyPassword('', hash));
});

test('the stored form carries the scrypt parameters and never the password', async () => {
  const hash = await hashPassword('a long enough secret');
  assert.match(hash, new RegExp(`^\\$scrypt\\$ln=${SCRYPT_PARAMS.ln},r=${SCRYPT_PARAMS.r},p=${SCRYPT_PARAMS.p}\\$[A-Za-z0-9_-]{22}\\$[A-Za-z0-9_-]{43}$`));
  assert.not.ok(hash.includes('a long enough secret'));
  assert.is(SCRYPT_PARAMS.ln >= 15, true, 'N must be at least 2^15');
});

test('each hash has its own salt', async () => {
  const [a, b] = await Promise.all([hashPassword('same password here'), hashPassword('same password here')]);
  assert.is.not(a, b);
  assert.is.not(a.split('$')[3], b.split('$')[3]);
  assert.ok(await verifyPassword('same password here', a));
  assert.ok(await verifyPassword('same password here', b));
});

test('Unicode passwords verify in either normalization form', async () => {
  const composed = 'p\u00e4ssw\u00f6rd-l\u00e4nger';
  const decomposed = composed.normalize('NFD');
  assert.is.not(composed, decomposed);
  assert.ok(await verifyPassword(decomposed, await hashPassword(composed)));
});

test('malformed or tampered hashes verify nothing', async () => {
  const good = await hashPassword('some password 1');
  const [, , params, salt, key] = good.split('$');
  for (const bad of [
    '',
    'plaintext',
    `$bcrypt$${params}$${salt}$${key}`,
    `$scrypt$${params}$${salt}`,
    `$scrypt$ln=30,r=8,p=1$${salt}$${key}`, // would need 32 GiB: refused, not attempted
    `$scrypt$ln=15,r=8,p=1$${salt}$${key.slice(0, 8)}`,
    `$scrypt$ln=15,r=8,p=1$${salt}$${key.slice(0, -2)}AA`,
  ]) {
    assert.not.ok(await verifyPassword('some password 1', bad), bad);
  }
});

test('hashes with older parameters ask to be redone', async () => {
  assert.not.ok(needsRehash(await hashPassword('some password 2')));
  const weaker = `$scrypt$ln=14,r=8,p=1$${'A'.repeat(22)}$${'B'.repeat(43)}`;
  assert.ok(needsRehash(weaker));
  assert.ok(needsRehash('garbage'));
});

test('a hash made with lower parameters still verifies', async () => {
  // Hand-made with ln=10 through the same format, as an older release would have stored it.
  const { scryptSync, randomBytes } = await import('node:crypto');
  const salt = randomBytes(16);
  const key = scryptSync('legacy password', salt, 32, { N: 2 ** 10, r: 8, p: 1 });
  const legacy = `$scrypt$ln=10,r=8,p=1$${salt.toString('base64url')}$${key.toString('base64url')}`;
  assert.ok(await verifyPassword('legacy password', legacy));
  assert.not.ok(await verifyPassword('legacy passwore', legacy));
  assert.ok(needsRehash(legacy));
});

test('the decoy check never succeeds', async () => {
  assert.is(await verifyAgainstDecoy('anything at all'), false);
});

test('password policy: length only', () => {
  assert.is(passwordProblem('x'.repeat(PASSWORD_MIN_LENGTH)), null);
  assert.match(passwordProblem('x'.repeat(PASSWORD_MIN_LENGTH - 1)) ?? '', /at least/);
  assert.is(passwordProblem('aaaaaaaaaaaaaaaa'), null, 'no composition rules');
  assert.match(passwordProblem('x'.repeat(1025)) ?? '', /at most/);
});

test('password lengths count characters (code points): an emoji is one, at both bounds', () => {
  assert.is(passwordProblem('🔑'.repeat(PASSWORD_MAX_LENGTH)), null, `${PASSWORD_MAX_LENGTH} emoji (${2 * PASSWORD_MAX_LENGTH} UTF-16 units)`);
  assert.is(passwordProblem('🔑'.repeat(PASSWORD_MAX_LENGTH + 1)), `password must be at most ${PASSWORD_MAX_LENGTH} characters`);
  assert.is(passwordProblem('🔑'.repeat(PASSWORD_MIN_LENGTH - 1)), `password must be at least ${PASSWORD_MIN_LENGTH} characters`, `${2 * (PASSWORD_MIN_LENGTH - 1)} UTF-16 units`);
  assert.is(passwordProblem('🔑'.repeat(PASSWORD_MIN_LENGTH)), null);
});

test.run();
