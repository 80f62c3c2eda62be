// A project's endpoints hold at most a quarter (16) of the webhooks processor's 64 requests in
// flight while another project has deliveries due (apps/services/webhooks/project-shares.ts). Two
// projects A and C both at their share, both with deliveries due, are neither of them alone: each
// stays at 16, so a third project's delivery that falls due finds a slot while their requests hang
// (given three quarters each, they would fill all 64 between them).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { deliveriesOf } from '../apps/services/webhooks/deliveries.ts';
import { ProjectShares } from '../apps/services/webhooks/project-shares.ts';
import type { AttemptResult } from '../infra/ports/http-egress.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { deferred, waitUntil, type Deferred } from './support/eventually.ts';
import * as support from './support/webhook-dispatch.ts';

test('two projects both at their share, both with deliveries due: each stays held to its share', async () => {
  const projects = new ProjectShares({ share: 2, alone: 3 });
  const pending = [{ endpointId: 'a1', projectId: 'A' }, { endpointId: 'c1', projectId: 'C' }];
  const read = async (leftOut: ReadonlySet<string>) => pending.filter((d) => !leftOut.has(d.projectId));
  for (let i = 0; i < 2; i++) {
    projects.started('A', 'a1');
    projects.started('C', 'c1');
  }
  await projects.due(read);
  assert.ok(projects.holdsShare('a1'), 'A holds its share (2) while C has deliveries due, but may take up to `alone`');
  assert.ok(projects.holdsShare('c1'), 'C holds its share (2) while A has deliveries due, but may take up to `alone`');
});

test('the dispatcher: a third project\'s delivery that falls due is attempted while two projects\' receivers hang', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-review-two-projects-'));
  const documents = new SqliteDocumentStore(join(dir, 'relay.db'));
  const secrets = new SecretBox({ current: randomBytes(32), previous: [] });
  const held: Array<Deferred<AttemptResult>> = [];
  const inFlight = new Map<string, number>();
  const most = new Map<string, number>();
  const errors: Error[] = [];
  try {
    for (const p of ['a', 'c']) {
      for (let e = 0; e < 20; e++) {
        const id = `${p}-ep${String(e).padStart(2, '0')}`;
        await support.addEndpoint(documents, secrets, id, `prj_${p}`);
        for (let i = 0; i < 5; i++) await support.addDelivery(documents, `whd_${id}_${i}`, id, `prj_${p}`, support.dueAt(i * 20 + e));
      }
    }
    await support.addEndpoint(documents, secrets, 'b-fast', 'prj_b');
    // Falls due 1.5 s from now, once A's and C's requests are under way.
    await support.addDelivery(documents, 'whd_b', 'b-fast', 'prj_b', new Date(Date.now() + 1_500).toISOString());
    const dispatcher = await support.startWebhookDispatcher({
      documents, secrets, errors,
      post: (post) => {
        const host = new URL(String(post.url)).hostname;
        if (host.startsWith('b-')) return Promise.resolve(support.OK);
        const project = host[0];
        inFlight.set(project, (inFlight.get(project) ?? 0) + 1);
        most.set(project, Math.max(most.get(project) ?? 0, inFlight.get(project)!));
        const answer = deferred<AttemptResult>();
        held.push(answer);
        return answer.promise; // hangs, as a receiver that never answers within the test
      },
    });
    try {
      const served = await waitUntil(async () => (await deliveriesOf(documents).get('whd_b'))?.status === 'succeeded', 'B served', 5_000).then(() => true, () => false);
      assert.ok(served, `project B's delivery was not attempted within 5 s of falling due: A and C hold ${held.length} requests in flight (A at most ${most.get('a')}, C at most ${most.get('c')}); B: ${JSON.stringify(await deliveriesOf(documents).get('whd_b'))}; errors: ${errors.map((e) => e.message).join('; ')}`);
      assert.ok((most.get('a') ?? 0) <= 16, `A held ${most.get('a')} requests while C had deliveries due`);
      assert.ok((most.get('c') ?? 0) <= 16, `C held ${most.get('c')} requests while A had deliveries due`);
    } finally {
      await support.stopAnswering(dispatcher, held);
    }
  } finally {
    await documents.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
