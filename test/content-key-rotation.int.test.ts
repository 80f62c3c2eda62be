// Message bodies across a rotation of RELAY_SECRET_KEY (docs/operations.md, "The secret key"):
// each email's content key is sealed under the secret key, so the sender's start re-seals the
// live ones under the new key, as it does DKIM keys, and says at info how many it re-sealed and
// how many remain under another key. Once it says `remaining: 0`, the old key can be dropped
// and every body still opens. Real processes: `relay setup`, `relay api`, `relay start`.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startRelay } from '../apps/relay.ts';
import { openStores } from '../apps/runtime.ts';
import { openContent } from '../apps/services/content-vault.ts';
import type { SealedContent } from '../domain/email/events.ts';
import { loadConfig } from '../infra/config.ts';
import { parseKey, SecretBox } from '../infra/secrets/secret-box.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort, postEmail, runRelay, spawnRelay } from './support/relay-process.ts';

const test = suite('message bodies across a key rotation');

test('the sender\'s start re-seals the content keys under the new key: once it says remaining 0, the old key is not needed to open a body', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-content-rotation-'));
  const oldKey = randomBytes(32).toString('base64');
  const newKey = randomBytes(32).toString('base64');
  const newKeyId = new SecretBox({ current: parseKey(newKey), previous: [] }).keyId;
  const base = { RELAY_DATA_DIR: dataDir, RELAY_DELIVERY: 'outbox', RELAY_INBOUND_SMTP_PORT: '0' };
  try {
    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { ...base, RELAY_SECRET_KEY: oldKey });
    assert.is(setup.code, 0, setup.stderr);
    const { apiKey } = JSON.parse(setup.stdout) as { apiKey: string };
    // Admitted under the old key, by the API alone: nothing sends it yet.
    const api = await startRelay(loadConfig({ ...base, PORT: '0', RELAY_LOG_LEVEL: 'silent', RELAY_SECRET_KEY: oldKey }), ['api']);
    let id: string;
    try {
      ({ id } = await postEmail(api.url!, apiKey, { from: 'hello@example.test', to: 'you@example.test', bcc: 'boss@example.test', subject: 'Before rotation', text: 'the code is 271828' }));
    } finally {
      await api.stop();
    }

    const port = await freePort();
    const relay = spawnRelay(['start'], { ...base, PORT: String(port), RELAY_SECRET_KEY: newKey, RELAY_SECRET_KEY_PREVIOUS: oldKey, RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json' });
    const lines = () => relay.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
    let counted: Record<string, unknown> | undefined;
    try {
      await waitUntil(() => (counted = lines().find((line) => line.msg === 're-sealed content keys under the current secret key')) !== undefined, 'the sender to count its re-seal of content keys', 30_000);
    } finally {
      await relay.stop();
    }
    assert.equal([counted?.level, counted?.keyId, counted?.resealed, counted?.remaining], [30, newKeyId, 1, 0], relay.output());
    assert.not.ok(relay.output().includes(oldKey) || relay.output().includes(newKey), 'key material in the log');

    // The old key dropped: the body still opens, by the sender as by a reader.
    const newOnly = loadConfig({ ...base, PORT: '0', RELAY_LOG_LEVEL: 'silent', RELAY_SECRET_KEY: newKey });
    const stores = await openStores(newOnly, { withoutLog: true });
    try {
      const [accepted] = await stores.events.readStream(`email-${id}`, { maxCount: 1 });
      const opened = await openContent(stores.documents, new SecretBox({ current: parseKey(newKey), previous: [] }), accepted.data.content as SealedContent, new Date());
      assert.equal([opened?.text, opened?.bcc], ['the code is 271828', ['boss@example.test']]);
    } finally {
      await stores.close();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
