// Which secret key a start uses when the stores already hold values sealed under one (domains'
// DKIM keys, webhook endpoints' signing secrets), so that Relay never runs on a key that opens
// none of them:
// - no RELAY_SECRET_KEY and no secret.key (lost, left out of a restore, deleted by hand): the
//   start stops with a configuration error naming the file, and makes no new key (one would
//   open nothing stored, and all sealed meanwhile would be lost once the real file is back);
// - RELAY_SECRET_KEY set while secret.key holds the key that sealed them: the file's key is kept
//   as a previous key, said once at warn by key id, and what it sealed is re-sealed under the new key.
// Real processes: `relay setup`, then `relay start`.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { createEndpoint } from '../apps/services/webhooks/endpoints.ts';
import type { SendingDomain } from '../domain/management.ts';
import { loadConfig } from '../infra/config.ts';
import { parseKey, SecretBox } from '../infra/secrets/secret-box.ts';
import { freePort, runRelay, runRelayWithin, spawnRelay, waitForReady } from './support/relay-process.ts';
import { takeContentKey } from '../apps/services/content-vault.ts';

const test = suite<{ dir: string }>('the secret key file at start, beside stores that hold sealed values');
test.before.each((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-key-file-'));
});
test.after.each((ctx) => rmSync(ctx.dir, { recursive: true, force: true }));

const EXIT_CONFIG = 78;
/** A key's id as sealed values and logs show it. */
const keyIdOf = (text: string) => new SecretBox({ current: parseKey(text), previous: [] }).keyId;

async function setUp(dataDir: string): Promise<{ domainId: string }> {
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'good.example.test'], { RELAY_DATA_DIR: dataDir });
  assert.is(setup.code, 0, setup.stderr);
  return { domainId: (JSON.parse(setup.stdout) as { domainId: string }).domainId };
}

test('secret.key gone from a data directory with a sealed DKIM key: relay start stops (exit 78) naming the file and RELAY_SECRET_KEY, and makes no new key', async ({ dir }) => {
  const dataDir = join(dir, 'data');
  await setUp(dataDir);
  const keyFile = join(dataDir, 'secret.key');
  const keyId = keyIdOf(readFileSync(keyFile, 'utf8'));
  rmSync(keyFile);

  const run = await runRelayWithin(['start'], { RELAY_DATA_DIR: dataDir, RELAY_DELIVERY: 'outbox' });
  assert.is(run.code, EXIT_CONFIG, run.output);
  assert.match(run.output, `relay: invalid configuration: RELAY_SECRET_KEY: is not set and ${keyFile} is missing`);
  // The key id lets the operator tell which backup's key file is the right one.
  assert.match(run.output, `the DKIM keys of domains: 1, one sealed under key ${keyId}`);
  assert.not.ok(existsSync(keyFile), 'a new secret.key was made for stores whose values it cannot open');
});

test('secret.key gone where only a webhook endpoint\'s signing secret is sealed: the start stops as well', async ({ dir }) => {
  const dataDir = join(dir, 'data');
  const config = loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' });
  const stores = await openStores(config, { withoutLog: true });
  const sealer = new SecretBox({ current: randomBytes(32), previous: [] });
  try {
    await createEndpoint(stores.documents, sealer, { dnsServers: [], allow: new Set(['127.0.0.1:9']) }, {
      workspaceId: 'ws_key_file', projectId: 'prj_key_file', url: 'https://127.0.0.1:9/hooks', events: ['email.sent'],
    }, new Date());
    assert.is(await stores.documents.collection(COLLECTIONS.domains).count(), 0);
  } finally {
    await stores.close();
  }

  const run = await runRelayWithin(['start'], { RELAY_DATA_DIR: dataDir, RELAY_DELIVERY: 'outbox' });
  assert.is(run.code, EXIT_CONFIG, run.output);
  assert.match(run.output, `the signing secrets of webhook endpoints: 1, one sealed under key ${sealer.keyId}`);
  assert.not.ok(existsSync(join(dataDir, 'secret.key')), 'a new secret.key was made');
});

test('secret.key gone where only an email\'s content key is sealed: the start stops as well', async ({ dir }) => {
  const dataDir = join(dir, 'data');
  const config = loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' });
  const stores = await openStores(config, { withoutLog: true });
  const sealer = new SecretBox({ current: randomBytes(32), previous: [] });
  try {
    await takeContentKey(stores.documents, sealer, 'em_key_file', new Date());
    assert.is(await stores.documents.collection(COLLECTIONS.domains).count(), 0);
  } finally {
    await stores.close();
  }

  const run = await runRelayWithin(['start'], { RELAY_DATA_DIR: dataDir, RELAY_DELIVERY: 'outbox' });
  assert.is(run.code, EXIT_CONFIG, run.output);
  assert.match(run.output, `the content keys of emails (their bodies): 1, one sealed under key ${sealer.keyId}`);
  assert.not.ok(existsSync(join(dataDir, 'secret.key')), 'a new secret.key was made');
});

test('RELAY_SECRET_KEY set to a new key while secret.key holds the key that sealed the DKIM keys: the file\'s key is kept as a previous key, said once by id, and the DKIM key is re-sealed under the new key', async ({ dir }) => {
  const dataDir = join(dir, 'data');
  const { domainId } = await setUp(dataDir);
  const fileKeyText = readFileSync(join(dataDir, 'secret.key'), 'utf8').trim();
  const fileKeyId = keyIdOf(fileKeyText);
  const newKey = randomBytes(32).toString('base64');
  const newKeyId = keyIdOf(newKey);

  const port = await freePort();
  const relay = spawnRelay(['start'], {
    RELAY_DATA_DIR: dataDir, RELAY_SECRET_KEY: newKey, RELAY_DELIVERY: 'outbox', PORT: String(port), RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json',
  });
  try {
    // Ready once every part has started: the sender's re-seal is behind it.
    await waitForReady(`http://127.0.0.1:${port}`, relay);
  } finally {
    await relay.stop();
  }
  const lines = relay.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
  assert.not.ok(lines.some((line) => /no configured secret key opens/.test(String(line.msg))), relay.output());
  const kept = lines.filter((line) => /holds another key/.test(String(line.msg)));
  assert.is(kept.length, 1, `the kept file key is told once per process:\n${relay.output()}`);
  assert.is(kept[0].level, 40);
  assert.is(kept[0].fileKeyId, fileKeyId);
  assert.is(kept[0].currentKeyId, newKeyId);
  const resealed = lines.find((line) => line.msg === 're-sealed DKIM keys under the current secret key');
  assert.equal([resealed?.level, resealed?.keyId, resealed?.resealed, resealed?.remaining], [30, newKeyId, 1, 0]);
  for (const secret of [fileKeyText, newKey]) assert.not.ok(relay.output().includes(secret), 'key material in the log');

  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_SECRET_KEY: newKey, RELAY_LOG_LEVEL: 'silent' }), { withoutLog: true });
  try {
    const domain = await stores.documents.collection<SendingDomain>(COLLECTIONS.domains).get(domainId);
    assert.is(domain?.dkimPrivateKeySealed.split('.')[1], newKeyId, 'the DKIM key is sealed under RELAY_SECRET_KEY now');
  } finally {
    await stores.close();
  }
});

test.run();
