// Webhook signing secrets across a rotation of RELAY_SECRET_KEY (docs/delivery.md, "Secret and
// rotation"): a restart with the new key and the old one as previous re-seals them, so they
// still sign once the old key is dropped; a secret no key opens any more (the old key dropped
// before that restart) makes each attempt fail as signing_failed, recorded in the delivery's
// attempt log and counted in relay_webhook_attempts_total, never taken again and again unseen.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ALL_PARTS, startRelay, type RunningRelay } from '../apps/relay.ts';
import { createEndpoint } from '../apps/services/webhooks/endpoints.ts';
import { loadConfig } from '../infra/config.ts';
import { waitUntil } from './support/eventually.ts';
import { parseMetrics, sumOf } from './support/metrics.ts';
import { postEmail, runRelay } from './support/relay-process.ts';

const test = suite('webhook signing secrets across a key rotation');

// Nothing listens there: a request that was made ends connection_refused.
const DESTINATION = '127.0.0.1:9';

interface Delivery { status: string; nextAttemptAt: string | null; attemptLogs: Array<{ errorCode: string | null }> }

/**
 * A tenant and an endpoint made under the old key; then `between` (restarts), then Relay with
 * only the new key sends an email: its webhook delivery's first attempt, and the metric's
 * results once it is counted.
 */
async function afterRotation(between: (base: Record<string, string>, oldKey: string, newKey: string) => Promise<void>): Promise<{ delivery: Delivery; results: Record<string, number> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-rotation-'));
  const oldKey = randomBytes(32).toString('base64');
  const newKey = randomBytes(32).toString('base64');
  const base = { RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', RELAY_LOG_LEVEL: 'silent', RELAY_WEBHOOK_ALLOW: DESTINATION };
  let relay: RunningRelay | null = null;
  try {
    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { ...base, RELAY_SECRET_KEY: oldKey });
    assert.is(setup.code, 0, setup.stderr);
    const { apiKey, projectId, workspaceId } = JSON.parse(setup.stdout) as { apiKey: string; projectId: string; workspaceId: string };
    relay = await startRelay(loadConfig({ ...base, RELAY_SECRET_KEY: oldKey }), ['api']);
    await createEndpoint(relay.stores.documents, relay.services.secrets, { dnsServers: [], allow: new Set([DESTINATION]) }, {
      workspaceId, projectId, url: `https://${DESTINATION}/hooks`, events: ['email.sent'],
    }, new Date());
    await relay.stop();
    relay = null;
    await between(base, oldKey, newKey);
    relay = await startRelay(loadConfig({ ...base, RELAY_SECRET_KEY: newKey }), ALL_PARTS);
    const url = relay.url!;
    const sent = await postEmail(url, apiKey, { from: 'hello@example.test', to: 'you@example.test', subject: 'After rotation', text: 'Hi' });
    let delivery: Delivery | undefined;
    await waitUntil(async () => {
      const detail = await (await fetch(`${url}/v1/emails/${sent.id}`, { headers: { authorization: `Bearer ${apiKey}` } })).json() as { webhookDeliveries: Delivery[] };
      delivery = detail.webhookDeliveries[0];
      return delivery !== undefined && delivery.attemptLogs.length > 0;
    }, 'the email.sent delivery\'s first attempt to be recorded', 15_000);
    const results: Record<string, number> = {};
    await waitUntil(async () => {
      for (const sample of parseMetrics(await relay!.metrics.render()).filter((s) => s.name === 'relay_webhook_attempts_total')) {
        results[sample.labels.result] = sample.value;
      }
      return Object.values(results).some((n) => n > 0);
    }, 'the attempt to be counted', 5_000);
    return { delivery: delivery!, results };
  } finally {
    await relay?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

test('the documented rotation re-seals the secrets: after the old key is dropped, deliveries are still signed and sent', async () => {
  const { delivery, results } = await afterRotation(async (base, oldKey, newKey) => {
    const relay = await startRelay(loadConfig({ ...base, RELAY_SECRET_KEY: newKey, RELAY_SECRET_KEY_PREVIOUS: oldKey }), ALL_PARTS);
    await relay.stop();
  });
  assert.equal(delivery.attemptLogs.map((l) => l.errorCode), ['connection_refused'], 'the request was made');
  assert.is(results.connection_refused, 1);
  assert.is(results.signing_failed, 0, 'the series is there, at 0');
});

test('a secret no key opens: the attempt is recorded and counted as signing_failed, and retried on the schedule', async () => {
  // Only the sender ran with both keys (it re-sealed the DKIM key, without which the email would
  // fail as message_unbuildable and no email.sent delivery would exist); the webhooks processor
  // did not, so the signing secret is still under the old key.
  const { delivery, results } = await afterRotation(async (base, oldKey, newKey) => {
    const relay = await startRelay(loadConfig({ ...base, RELAY_SECRET_KEY: newKey, RELAY_SECRET_KEY_PREVIOUS: oldKey }), ['sender']);
    await relay.stop();
  });
  assert.equal(delivery.attemptLogs.map((l) => l.errorCode), ['signing_failed']);
  assert.is(delivery.status, 'pending');
  assert.ok(delivery.nextAttemptAt !== null && Date.parse(delivery.nextAttemptAt) > Date.now() + 30_000, `next attempt at ${delivery.nextAttemptAt}: the schedule's, a minute on`);
  assert.is(results.signing_failed, 1);
});

test.run();
