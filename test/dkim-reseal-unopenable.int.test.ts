// The sender re-seals every domain's DKIM key under the current RELAY_SECRET_KEY at start
// (apps/services/dkim-key-vault.ts). A key that no configured secret key opens (sealed under a
// key since dropped, e.g. by an API process not yet restarted onto the new key when it created
// the domain) is left as it is: the sender starts, every other domain's mail goes out, only that
// domain's mail fails as message_unbuildable, and the start log names the domain and the key id
// that sealed it, never key material (docs/delivery.md, "Secret and rotation").
// Real processes' code path: `relay setup`, then startRelay with the real parts or a spawned
// `relay processor sender`, HTTP sends.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ALL_PARTS, startRelay, type RunningRelay } from '../apps/relay.ts';
import { connectDomain, createDomain, markDomainVerified } from '../apps/services/management/domains.ts';
import { loadConfig } from '../infra/config.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort, postEmail, runRelay, spawnRelay, waitForReady } from './support/relay-process.ts';

const test = suite('a DKIM key no secret key opens stops only its own domain\'s mail');

interface Stale {
  base: Record<string, string>;
  newKey: string;
  apiKey: string;
  /** The domain whose key is sealed under the dropped key, and that key's id. */
  domainId: string;
  sealedValue: string;
  oldKeyId: string;
}

/** A tenant set up under the new key, then a sending domain added by a process still on the old key. */
async function withStaleDomain(run: (stale: Stale) => Promise<void>): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-reseal-'));
  const oldKey = randomBytes(32).toString('base64');
  const newKey = randomBytes(32).toString('base64');
  const base = { RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', RELAY_LOG_LEVEL: 'silent' };
  try {
    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'good.example.test'], { ...base, RELAY_SECRET_KEY: newKey });
    assert.is(setup.code, 0, setup.stderr);
    const { apiKey, workspaceId, projectId } = JSON.parse(setup.stdout) as { apiKey: string; workspaceId: string; projectId: string };
    const relay = await startRelay(loadConfig({ ...base, RELAY_SECRET_KEY: oldKey }), ['api']);
    let stale: Omit<Stale, 'base' | 'newKey' | 'apiKey'>;
    try {
      const domain = await createDomain(relay.stores.documents, { workspaceId, name: 'stale.example.test' }, new Date(), relay.services.secrets);
      // Verified and connected, so that mail from it is admitted and reaches the sender.
      await markDomainVerified(relay.stores.documents, domain._id, 'test fixture', new Date());
      await connectDomain(relay.stores.documents, domain._id, projectId);
      stale = { domainId: domain._id, sealedValue: domain.dkimPrivateKeySealed, oldKeyId: relay.services.secrets.keyId };
    } finally {
      await relay.stop();
    }
    await run({ base, newKey, apiKey, ...stale });
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}

interface Detail { status: string; failureCode: string | null }

const detailOf = async (url: string, apiKey: string, id: string) =>
  await (await fetch(`${url}/v1/emails/${id}`, { headers: { authorization: `Bearer ${apiKey}` } })).json() as Detail;

test('one domain sealed under a dropped key: the sender still starts, another domain\'s mail is sent, that domain\'s fails as message_unbuildable', async () => {
  await withStaleDomain(async ({ base, newKey, apiKey }) => {
    let relay: RunningRelay | null = null;
    try {
      let startError: Error | null = null;
      try {
        relay = await startRelay(loadConfig({ ...base, RELAY_SECRET_KEY: newKey }), ALL_PARTS);
      } catch (error) {
        startError = error as Error;
      }
      assert.is(startError, null, `Relay did not start: ${startError?.message}`);
      const url = relay!.url!;
      const sent = await postEmail(url, apiKey, { from: 'hello@good.example.test', to: 'you@good.example.test', subject: 'Still sending', text: 'Hi' });
      await waitUntil(async () => {
        const detail = await detailOf(url, apiKey, sent.id);
        return detail.status === 'sent' || detail.status === 'delivered';
      }, 'the good domain\'s email to be sent', 15_000);
      const unsigned = await postEmail(url, apiKey, { from: 'hello@stale.example.test', to: 'you@good.example.test', subject: 'Cannot be signed', text: 'Hi' });
      let detail: Detail | undefined;
      await waitUntil(async () => (detail = await detailOf(url, apiKey, unsigned.id)).status === 'failed', 'the stale domain\'s email to fail', 15_000);
      assert.is(detail!.failureCode, 'message_unbuildable');
    } finally {
      await relay?.stop();
    }
  });
});

test('the sender\'s start log names the domain and the key id its DKIM key is sealed with, and no key material', async () => {
  await withStaleDomain(async ({ base, newKey, domainId, sealedValue, oldKeyId }) => {
    const port = await freePort();
    const sender = spawnRelay(['processor', 'sender'], { ...base, RELAY_SECRET_KEY: newKey, PORT: String(port), RELAY_LOG_LEVEL: 'warn' });
    try {
      await waitForReady(`http://127.0.0.1:${port}`, sender);
      const lines = sender.output().split('\n').filter((line) => line.includes('DKIM keys that no configured secret key opens'));
      assert.is(lines.length, 1, sender.output());
      const line = JSON.parse(lines[0]) as { level: number; count: number; domains: Array<{ domainId: string; sealedWithKeyId: string }> };
      assert.is(line.level, 40, 'warn');
      assert.is(line.count, 1);
      assert.equal(line.domains.map((d) => [d.domainId, d.sealedWithKeyId]), [[domainId, oldKeyId]]);
      const output = sender.output();
      for (const secret of [sealedValue, sealedValue.split('.')[3], 'PRIVATE KEY', newKey]) assert.not.ok(output.includes(secret), 'no key material in the log');
    } finally {
      await sender.stop();
    }
  });
});

test.run();
