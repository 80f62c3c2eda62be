// Upgrade from c0b790a (2026-11-27): `relay backup` of a data directory whose log is in log.db.
//
// Versions from 88e4a01 (2026-11-23) to 11982c7 (2026-11-27) keep the event store and the document
// store in relay.db and the log in log.db (the fixture, test/fixtures/upgrade-c0b790a, is such a
// directory). Today's Relay runs on it as it is (apps/runtime.ts embeddedFiles: the forwarder goes
// on copying into log.db) and nothing moves the log into relay.db. `relay backup` refused such a
// directory for good, naming files it does not have (events.db, documents.db); it now copies both
// files (apps/cli/backup-command.ts: log.db's snapshot first, the copy's forwarder checkpoint set
// back to what that snapshot holds), and docs/operations.md ("Older layouts", Backups) says so.
//
// What users expect: after an upgrade, `relay backup` works on the directory, while Relay runs,
// and a Relay started on the backup lists and delivers every email admitted before it.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DatabaseSync } from 'node:sqlite';
import { waitUntil } from './support/eventually.ts';
import { postEmail, runRelay } from './support/relay-process.ts';
import { fixtureJson, restoreFixture, startUpgraded, type RestoredFixture } from './support/upgrade-fixtures.ts';

interface Ctx { fixture: RestoredFixture }

const test = suite<Ctx>('upgrade from c0b790a: relay backup of a directory with relay.db and log.db');

test.before(async (ctx) => {
  ctx.fixture = restoreFixture('upgrade-c0b790a');
  // The upgrade: today's Relay started on the directory once, and stopped.
  const up = await startUpgraded(ctx.fixture.dataDir);
  const stopped = await up.relay.stop();
  assert.is(stopped.code, 0, up.relay.output());
});

test.after((ctx) => ctx.fixture?.remove());

test('the directory holds relay.db and log.db, no events.db or documents.db (control)', ({ fixture }) => {
  const files = readdirSync(fixture.dataDir).filter((name) => name.endsWith('.db'));
  assert.equal(files.sort(), ['log.db', 'relay.db']);
});

test('relay backup makes a backup, or refuses naming the files this directory holds', async ({ fixture }) => {
  const target = join(fixture.root, 'backup');
  const run = await runRelay(['backup', target], { RELAY_DATA_DIR: fixture.dataDir });
  if (run.code === 0) {
    assert.ok(existsSync(join(target, 'relay.db')), run.stdout);
    return;
  }
  assert.is(run.code, 1, run.stderr);
  assert.match(run.stderr, /log\.db/);
  assert.not.match(run.stderr, /events\.db|documents\.db/, `the refusal names files this directory does not have: ${run.stderr}`);
});

/** Every email of the key's project, by id: its status. */
async function listAll(baseUrl: string, apiKey: string): Promise<Map<string, string>> {
  const listed = new Map<string, string>();
  let cursor: string | null = null;
  do {
    const response = await fetch(`${baseUrl}/v1/emails?limit=100${cursor ? `&cursor=${cursor}` : ''}`, { headers: { authorization: `Bearer ${apiKey}` } });
    const page = (await response.json()) as { emails: Array<{ id: string; status: string }>; next_cursor: string | null };
    for (const email of page.emails) listed.set(email.id, email.status);
    cursor = page.next_cursor;
  } while (cursor !== null);
  return listed;
}

test('a backup taken while Relay admits holds both files, and a Relay started on it lists and delivers every email admitted before it', async ({ fixture }) => {
  const { apiKey, requests } = fixtureJson<{ apiKey: string; requests: Record<string, { answer: { id: string } }> }>('upgrade-c0b790a', 'requests.json');
  const up = await startUpgraded(fixture.dataDir);
  const admitted: string[] = [];
  let sending = true;
  let during: Promise<void> = Promise.resolve();
  let run: Awaited<ReturnType<typeof runRelay>>;
  const target = join(fixture.root, 'while-admitting');
  try {
    const send = async (n: number) => admitted.push((await postEmail(up.baseUrl, apiKey, { from: 'hello@example.com', to: `zoe${n}@example.org`, subject: `order ${n}`, text: 'x' })).id);
    for (let n = 0; n < 5; n++) await send(n);
    during = (async () => {
      for (let n = 100; sending; n++) {
        await send(n);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();
    while (admitted.length < 15) await new Promise((resolve) => setTimeout(resolve, 5));
    const before = [...admitted];
    run = await runRelay(['backup', target], { RELAY_DATA_DIR: fixture.dataDir });
    sending = false;
    await during;
    assert.is(run.code, 0, run.stderr);
    assert.match(run.stdout, /relay\.db: [\d.]+ MiB, as it was at \d{4}-/);
    assert.match(run.stdout, /log\.db: [\d.]+ MiB, as it was at \d{4}-\S+, just before relay\.db's snapshot/);
    assert.equal(readdirSync(target).filter((name) => name !== 'outbox').sort(), ['log.db', 'relay.db', 'secret.key']);
    for (const file of ['relay.db', 'log.db']) {
      const db = new DatabaseSync(join(target, file), { readOnly: true });
      assert.is((db.prepare('PRAGMA integrity_check').get() as { integrity_check: string }).integrity_check, 'ok', file);
      db.close();
    }
    admitted.length = 0;
    admitted.push(...before);
  } finally {
    sending = false;
    await during.catch(() => {});
    await up.relay.stop();
  }

  const restored = await startUpgraded(target);
  try {
    const ids = [requests['quoted-1'].answer.id, ...admitted];
    await waitUntil(async () => {
      const listed = await listAll(restored.baseUrl, apiKey);
      return ids.every((id) => listed.has(id) && listed.get(id) !== 'queued' && listed.get(id) !== 'processing');
    }, 'every email admitted before the backup is listed and delivered by the restored Relay', 30_000);
    // The restored Relay goes on copying into its log.db: a new send is listed and delivered.
    const fresh = await postEmail(restored.baseUrl, apiKey, { from: 'hello@example.com', to: 'after@example.org', subject: 'after the restore', text: 'x' });
    await waitUntil(async () => {
      const response = await fetch(`${restored.baseUrl}/v1/emails?limit=5`, { headers: { authorization: `Bearer ${apiKey}` } });
      return ((await response.json()) as { emails: Array<{ id: string; status: string }> }).emails.some((e) => e.id === fresh.id && e.status === 'sent');
    }, 'the new send is listed as sent', 30_000);
  } finally {
    await restored.relay.stop();
  }
});

test.run();
