// `relay events export --project P --from X` exports every event after X of P's emails, also of
// those accepted before X: the deliveries, bounces and complaints of October's emails recorded in
// November are in `export --from 2026-11-01 --to 2026-12-01 --project prj_…`. The project of such
// an email is learned from its stream's first event, read before --from; another project's email
// stays out either way.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { loadConfig } from '../infra/config.ts';
import { accepted, attempted, claimed, outcome, toNewEvent } from './support/email-events.ts';
import { runRelay } from './support/relay-process.ts';
import { waitUntil } from './support/eventually.ts';

const test = suite('events export --project with --from');
const dataDir = mkdtempSync(join(tmpdir(), 'relay-export-project-bounds-'));
let acceptedUpTo = '';

test.before(async () => {
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
  try {
    await stores.events.append(emailStreamId('em_mine'), [toNewEvent(accepted({ emailId: 'em_mine', projectId: 'prj_mine' }))], { expectedRevision: 'no_stream' });
    const r = await stores.events.append(emailStreamId('em_other'), [toNewEvent(accepted({ emailId: 'em_other', projectId: 'prj_other' }))], { expectedRevision: 'no_stream' });
    acceptedUpTo = r.position;
    // The outcomes are recorded in a later millisecond than the acceptances.
    const t = Date.now();
    await waitUntil(() => Date.now() > t + 2, 'the clock moves on');
    // Recorded after --from: the outcome of prj_mine's email.
    await stores.events.append(emailStreamId('em_mine'), [toNewEvent(claimed()), toNewEvent(attempted([outcome(0, 'delivered')]))], { expectedRevision: 0 });
    await stores.events.append(emailStreamId('em_other'), [toNewEvent(claimed())], { expectedRevision: 0 });
  } finally {
    await stores.close();
  }
});

test.after(() => rmSync(dataDir, { recursive: true, force: true }));

test('--from a position: the project\'s events after it are exported, whenever its emails were accepted', async () => {
  const all = await runRelay(['events', 'export', '--from', acceptedUpTo], { RELAY_DATA_DIR: dataDir });
  assert.is(all.code, 0, all.stderr);
  assert.is(all.stdout.trim().split('\n').length, 3, 'without --project: the three events after --from');
  const run = await runRelay(['events', 'export', '--from', acceptedUpTo, '--project', 'prj_mine'], { RELAY_DATA_DIR: dataDir });
  assert.is(run.code, 0, run.stderr);
  const exported = run.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.equal(exported.map((e) => `${e.streamId} ${e.type}`), ['email-em_mine DeliveryClaimed', 'email-em_mine DeliveryAttempted'],
    `prj_mine's events after --from ${acceptedUpTo}; stderr: ${run.stderr.trim()}`);
});

test('--from a time: the same', async () => {
  const run = await runRelay(['events', 'export', '--from', '2000-01-01', '--project', 'prj_mine'], { RELAY_DATA_DIR: dataDir });
  assert.is(run.code, 0, run.stderr);
  assert.is(run.stdout.trim().split('\n').length, 3, 'from long ago: all three events of prj_mine (sanity)');
  // A time after the acceptances and before the outcomes.
  const events = (await runRelay(['events'], { RELAY_DATA_DIR: dataDir })).stdout.trim().split('\n').map((l) => JSON.parse(l));
  const acceptedAt = Date.parse(events[1].recordedAt);
  const outcomeAt = Date.parse(events[2].recordedAt);
  assert.ok(outcomeAt > acceptedAt, 'recorded in a later millisecond');
  const between = new Date(outcomeAt).toISOString();
  const bounded = await runRelay(['events', 'export', '--from', between, '--project', 'prj_mine'], { RELAY_DATA_DIR: dataDir });
  assert.is(bounded.code, 0, bounded.stderr);
  const exported = bounded.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.equal(exported.map((e) => e.type), ['DeliveryClaimed', 'DeliveryAttempted'], `prj_mine's events recorded from ${between}`);
});

test.run();
