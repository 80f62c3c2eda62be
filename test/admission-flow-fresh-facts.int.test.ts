// A send decides its rules (suppressions, domains) before it waits in admission flow control, so
// that a refusal is answered at once; one that waited is decided again once it goes ahead, on
// what holds then: an address suppressed while the send waited (up to RELAY_ADMISSION_MAX_WAIT_MS)
// makes it suppressed, not queued.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openServices, openStores } from '../apps/runtime.ts';
import { AdmissionFlow } from '../apps/services/admission-flow.ts';
import { admitEmail, type AdmissionDeps, type Sender } from '../apps/services/admission.ts';
import { connectDomain, createDomain, markDomainVerified } from '../apps/services/management/domains.ts';
import { createProject } from '../apps/services/management/projects.ts';
import { addSuppression } from '../apps/services/management/suppressions.ts';
import { createWorkspace, setWorkspaceActivation } from '../apps/services/management/workspaces.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import { normalizeSendRequest } from '../domain/email/send-request.ts';
import { DEFAULT_ALLOWANCES } from '../domain/usage/quota.ts';
import { loadConfig } from '../infra/config.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';

const test = suite('admission after a flow-control wait');

test('an address suppressed while the send waits in flow control is not sent to', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-flow-facts-'));
  const config = loadConfig({ RELAY_DATA_DIR: dir, RELAY_LOG_LEVEL: 'silent' });
  const stores = await openStores(config);
  const services = await openServices(config, stores);
  try {
    await prepareStores(stores.documents);
    const now = new Date();
    const owner = { _id: 'usr_flow', email: 'flow@example.test', passwordHash: 'x', createdAt: now.toISOString() };
    const workspaceId = (await createWorkspace(stores.documents, owner, 'Flow', now)).workspace._id;
    await setWorkspaceActivation(stores.documents, workspaceId, true, now);
    const project = await createProject(stores.documents, { workspaceId, name: 'flow', environment: 'production' }, now);
    const domain = await createDomain(stores.documents, { workspaceId, name: 'flow.example.test' }, now, new SecretBox({ current: randomBytes(32), previous: [] }));
    await markDomainVerified(stores.documents, domain._id, 'test fixture', now);
    await connectDomain(stores.documents, domain._id, project._id);
    const sender: Sender = { keyId: 'key_flow', projectId: project._id, workspaceId, environment: 'production', allowances: DEFAULT_ALLOWANCES };

    // The pipeline is behind: the send waits. Meanwhile the owner suppresses the recipient; then the pipeline catches up.
    let reads = 0;
    let suppressed: Promise<unknown> | null = null;
    const flow = new AdmissionFlow({
      maxBacklog: 10, maxWaitMs: 2_000, groups: null, refreshMs: 20,
      backlog: async () => {
        reads++;
        if (reads === 1) {
          suppressed = addSuppression(stores, workspaceId, 'ann@example.org', new Date(), { kind: 'user', userId: owner._id });
          return 1_000;
        }
        await suppressed;
        return 0;
      },
    } as ConstructorParameters<typeof AdmissionFlow>[0]);
    const deps: AdmissionDeps = {
      emails: services.emails, documents: stores.documents, rateLimits: services.rateLimits, usage: services.usage, secrets: services.secrets,
      now: () => new Date(), flow,
    };
    const body = { from: 'app@flow.example.test', to: 'ann@example.org', subject: 'after the wait', text: 'hi' };
    const admission = await admitEmail(deps, sender, { body, idempotencyKey: null, send: normalizeSendRequest(body), origin: { correlationId: 'c', causationId: 'c' } });
    assert.ok(reads >= 2, 'the send waited in flow control');
    assert.is(admission.status, 'suppressed', 'the address was suppressed before the send was admitted, yet it was queued');
  } finally {
    await services.close();
    await stores.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
