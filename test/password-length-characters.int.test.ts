// MANAGEMENT-API: "Passwords: at least 12 and at most 1024 characters"; INTERFACE-DECISIONS:
// characters are Unicode code points, so an emoji is one. Pins: `relay user create` takes a
// password of 1024 emoji (2,048 UTF-16 units) and refuses 1025; the user then signs in with it
// through POST /v1/session, whose schema counts the same way (a password that can be set can
// be used); a sign-in with more than 1024 characters is refused by that schema.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp } from './support/app.ts';
import { errorCode } from './support/management.ts';
import { runRelay } from './support/relay-process.ts';

const test = suite('password lengths in characters');

test('a password of 1024 emoji is created by relay user create and signs in; 1025 are refused at both', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-password-'));
  try {
    const password = '🔑'.repeat(1024);
    const created = await runRelay(['user', 'create', '--email', 'emoji@password.test', '--password', password, '--json'], { RELAY_DATA_DIR: dataDir });
    assert.is(created.code, 0, created.stderr.slice(0, 300));
    const tooLong = await runRelay(['user', 'create', '--email', 'longer@password.test', '--password', `${password}🔑`], { RELAY_DATA_DIR: dataDir });
    assert.is(tooLong.code, 1, tooLong.stderr.slice(0, 300));
    assert.match(tooLong.stderr, /at most 1024 characters/);

    const t = await startTestApp({}, { dataDir });
    try {
      const signIn = (body: { email: string; password: string }) => t.app.inject({ method: 'POST', url: '/v1/session', payload: body });
      const signedIn = await signIn({ email: 'emoji@password.test', password });
      assert.is(signedIn.statusCode, 200, signedIn.body.slice(0, 300));
      assert.is(signedIn.json().user.email, 'emoji@password.test');
      const refused = await signIn({ email: 'emoji@password.test', password: `${password}🔑` });
      assert.is(refused.statusCode, 400, refused.body.slice(0, 300));
      assert.is(errorCode(refused), 'validation_error');
      assert.match(refused.json().error.message, /^body\.password: must be 1 to 1024 characters/);
    } finally {
      await t.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
