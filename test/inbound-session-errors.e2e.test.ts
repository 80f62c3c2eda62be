// A session of the feedback SMTP server that ends with an error of its connection (the client
// resets it in the middle of a transaction, or its STARTTLS handshake fails) is the client's
// doing, which anyone who reaches port 25 can repeat at will: `relay inbound` logs it at debug,
// never at error (where one line each, with a stack, would fill the log and trip alerts on error
// lines), and there is nothing to retry.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { makeTestCa } from './support/https-receiver.ts';
import { freePort, spawnRelay, waitForReady } from './support/relay-process.ts';
import { SmtpSession } from './support/smtp-session.ts';

const RESETS = 20;
const ENDED = 'feedback SMTP session ended by an error of its connection';

interface LogLine { level: number; msg: string; code?: string }

test('peers that reset their sessions mid-transaction or fail STARTTLS: one debug line each, no error line', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-inbound-session-errors-'));
  const ca = makeTestCa();
  const { cert, key } = ca.issue(['feedback.relay.test']);
  writeFileSync(join(dataDir, 'cert.pem'), cert);
  writeFileSync(join(dataDir, 'key.pem'), key);
  const port = await freePort();
  const smtpPort = await freePort();
  const run = spawnRelay(['inbound'], {
    RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_INBOUND_SMTP_PORT: String(smtpPort), RELAY_LOG_LEVEL: 'debug', RELAY_LOG_FORMAT: 'json',
    RELAY_INBOUND_TLS_CERT: join(dataDir, 'cert.pem'), RELAY_INBOUND_TLS_KEY: join(dataDir, 'key.pem'),
  });
  const lines = () => run.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as LogLine);
  try {
    await waitForReady(`http://127.0.0.1:${port}`, run);
    for (let i = 0; i < RESETS; i++) {
      const { session } = await SmtpSession.open(smtpPort);
      await session.command('EHLO peer.example');
      assert.is((await session.command('MAIL FROM:<>')).code, 250);
      const closed = session.closed();
      session.socket.resetAndDestroy();
      await closed;
    }
    // A handshake that fails: what follows STARTTLS is no TLS at all.
    const { session } = await SmtpSession.open(smtpPort);
    await session.command('EHLO peer.example');
    assert.is((await session.command('STARTTLS')).code, 220);
    session.write('this is not a TLS ClientHello');
    await session.closed();
    // Each session's end is told, at whatever level, before anything is judged.
    await waitUntil(() => lines().filter((l) => l.msg.startsWith(ENDED) || l.level >= 50).length >= RESETS + 1, `the ${RESETS + 1} sessions' ends are told`);
  } finally {
    await run.stop();
    ca.remove();
    rmSync(dataDir, { recursive: true, force: true });
  }
  const errors = lines().filter((l) => l.level >= 50);
  assert.equal(errors, [], `${errors.length} error lines for ${RESETS + 1} peers that ended their sessions, e.g. ${JSON.stringify(errors[0])}`);
  const ended = lines().filter((l) => l.msg.startsWith(ENDED));
  assert.is(ended.length, RESETS + 1, JSON.stringify(ended));
  assert.ok(ended.every((l) => l.level === 20), JSON.stringify(ended));
  assert.is(ended.filter((l) => l.code === 'ECONNRESET').length, RESETS, JSON.stringify(ended));
});

test.run();
