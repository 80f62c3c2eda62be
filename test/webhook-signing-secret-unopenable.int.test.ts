// The webhooks processor re-seals signing secrets under the current RELAY_SECRET_KEY at start
// (apps/services/webhooks/endpoints.ts). One that no configured key opens (sealed by a process
// still on a key since dropped) is left as it is, and the start log names its endpoint and the
// key id that sealed it at warn, never the secret, as the sender does for DKIM keys: otherwise
// the operator's first sign is receivers rejecting every delivery (signing_failed). Each pass
// says at info how many it re-sealed and how many remain under another key, which tells when a
// previous key may be dropped (docs/operations.md, "The secret key").
// Real processes: `relay setup`, API processes on older keys create the endpoints, then a spawned
// `relay processor webhooks` on the new key.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startRelay } from '../apps/relay.ts';
import { createEndpoint } from '../apps/services/webhooks/endpoints.ts';
import { loadConfig } from '../infra/config.ts';
import { freePort, runRelay, spawnRelay, waitForReady } from './support/relay-process.ts';

const test = suite('webhook signing secrets that no configured key opens');

const DESTINATION = '127.0.0.1:9';

test('the webhooks processor warns naming the endpoint whose secret no key opens and the key that sealed it, re-seals the one a previous key opens, and counts both at info', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-whsec-unopenable-'));
  const droppedKey = randomBytes(32).toString('base64');
  const previousKey = randomBytes(32).toString('base64');
  const newKey = randomBytes(32).toString('base64');
  const base = { RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', RELAY_LOG_LEVEL: 'silent', RELAY_WEBHOOK_ALLOW: DESTINATION };
  try {
    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { ...base, RELAY_SECRET_KEY: newKey });
    assert.is(setup.code, 0, setup.stderr);
    const { projectId, workspaceId } = JSON.parse(setup.stdout) as { projectId: string; workspaceId: string };
    /** An endpoint made by an API process not yet restarted onto the new key. */
    const endpointUnder = async (key: string) => {
      const api = await startRelay(loadConfig({ ...base, RELAY_SECRET_KEY: key }), ['api']);
      try {
        const { endpoint } = await createEndpoint(api.stores.documents, api.services.secrets, { dnsServers: [], allow: new Set([DESTINATION]) }, {
          workspaceId, projectId, url: `https://${DESTINATION}/hooks`, events: ['email.sent'],
        }, new Date());
        return { endpointId: endpoint._id, keyId: api.services.secrets.keyId, sealed: endpoint.secretSealed };
      } finally {
        await api.stop();
      }
    };
    const lost = await endpointUnder(droppedKey);
    const kept = await endpointUnder(previousKey);

    const port = await freePort();
    const webhooks = spawnRelay(['processor', 'webhooks'], {
      ...base, RELAY_SECRET_KEY: newKey, RELAY_SECRET_KEY_PREVIOUS: previousKey, PORT: String(port), RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json',
    });
    try {
      // Ready once the processor has started: its re-seal is behind it.
      await waitForReady(`http://127.0.0.1:${port}`, webhooks);
    } finally {
      await webhooks.stop();
    }
    const output = webhooks.output();
    const lines = output.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
    const warned = lines.filter((line) => /webhook signing secrets that no configured secret key opens/.test(String(line.msg)));
    assert.is(warned.length, 1, `no warning names the endpoint whose signing secret no key opens:\n${output}`);
    assert.is(warned[0].level, 40);
    assert.is(warned[0].count, 1);
    const [named] = warned[0].endpoints as Array<{ endpointId: string; sealedWithKeyId: string; reason: string }>;
    assert.equal([named.endpointId, named.sealedWithKeyId], [lost.endpointId, lost.keyId]);
    assert.match(named.reason, `sealed with key ${lost.keyId}`);
    const counted = lines.find((line) => line.msg === 're-sealed webhook signing secrets under the current secret key');
    assert.equal([counted?.level, counted?.resealed, counted?.remaining], [30, 1, 1], `the re-seal pass is counted at info:\n${output}`);
    assert.not.ok(output.includes(kept.endpointId), 'the endpoint a previous key opens is re-sealed, not warned about');
    for (const secret of [lost.sealed, droppedKey, previousKey, newKey]) assert.not.ok(output.includes(secret), 'a key or sealed secret in the log');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
