// The data directory holds every message's metadata, the sealed bodies' keys, the outbox's
// messages and Relay's secret key: nothing in it may be readable by other local users,
// whatever the process umask (the usual 022 would make sqlite's files 0644).
import { randomUUID } from 'node:crypto';
import { chmodSync, closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { tmpdir } from 'node:os';
import { basename, join, relative } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { embeddedFiles, openServices, openStores } from '../apps/runtime.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import { loadConfig } from '../infra/config.ts';

const test = suite('data directory permissions');
let previousUmask = 0;
let root = '';

test.before(() => {
  previousUmask = process.umask(0o022);
  root = mkdtempSync(join(tmpdir(), 'relay-perms-'));
});
test.after(() => {
  process.umask(previousUmask);
  rmSync(root, { recursive: true, force: true });
});

/** Every entry under dir (dir included) whose mode is not 0700 (directories) or 0600 (files). */
function tooOpen(dir: string): string[] {
  const out: string[] = [];
  const walk = (path: string) => {
    const info = statSync(path);
    const mode = info.mode & 0o777;
    const expected = info.isDirectory() ? 0o700 : 0o600;
    if (mode !== expected) out.push(`${relative(dir, path) || '.'} ${mode.toString(8)}`);
    if (info.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  walk(dir);
  return out;
}

/** Starts the embedded stores and services and writes to each store and to the outbox; `check` runs while they are open. */
async function runRelay(dataDir: string, check: () => void): Promise<string[]> {
  const config = loadConfig({ RELAY_DATA_DIR: dataDir });
  const stores = await openStores(config);
  const services = await openServices(config, stores);
  try {
    await prepareStores(stores.documents);
    await stores.documents.collection<{ _id: string; note: string }>('permissions_probe').insert({ _id: randomUUID(), note: 'personal data' });
    await stores.events.append(`probe-${randomUUID()}`, [{ id: randomUUID(), type: 'Probed', data: { note: 'personal data' } }], { expectedRevision: 'no_stream' });
    await stores.log.ensureTopic('relay.events', 4);
    await stores.log.publish('relay.events', [{ key: 'probe', value: 'personal data' }]);
    await services.transport().send({
      emailId: `em_${randomUUID().replaceAll('-', '')}`, envelope: { mailFrom: 'bounce@example.test', recipients: ['ann@example.test'] },
      raw: Buffer.from('Subject: hi\r\n\r\npersonal data\r\n'), messageId: `${randomUUID()}@example.test`,
    });
    const files = readdirSync(dataDir);
    for (const name of [...new Set(Object.values(embeddedFiles(dataDir)).map((file) => basename(file))), 'secret.key', 'outbox']) assert.ok(files.includes(name), `${name} in ${files.join(', ')}`);
    assert.ok(files.some((f) => f.endsWith('-wal')) && files.some((f) => f.endsWith('-shm')), `WAL and shared-memory files exist: ${files.join(', ')}`);
    check();
  } finally {
    await services.close();
    await stores.close();
  }
  return tooOpen(dataDir);
}

test('a new data directory is 0700 and every file Relay writes in it 0600 (databases, -wal, -shm, outbox, secret key)', async () => {
  const dataDir = join(root, 'fresh', 'data');
  const afterClose = await runRelay(dataDir, () => assert.equal(tooOpen(dataDir), [], 'while running'));
  assert.equal(afterClose, [], 'after closing');
  // The event store, the document store and the log share one file (apps/runtime.ts, embeddedFiles).
  assert.equal(readdirSync(dataDir).filter((f) => f.endsWith('.db')).sort(), ['relay.db']);
});

test('files an older version left readable by others are made 0600 at start, and the outbox directory 0700', async () => {
  const dataDir = join(root, 'upgraded');
  mkdirSync(join(dataDir, 'outbox'), { recursive: true, mode: 0o755 });
  chmodSync(dataDir, 0o700); // the operator's one step (docs/operations.md)
  chmodSync(join(dataDir, 'outbox'), 0o755);
  for (const name of ['events.db', 'documents.db', 'log.db']) {
    const db = new DatabaseSync(join(dataDir, name));
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('CREATE TABLE old_version (x)');
    db.close();
    chmodSync(join(dataDir, name), 0o644);
  }
  writeFileSync(join(dataDir, 'secret.key'), `${Buffer.alloc(32, 7).toString('base64')}\n`, { mode: 0o644 });
  closeSync(openSync(join(dataDir, 'outbox', 'em_old.eml'), 'w', 0o600));
  assert.ok(tooOpen(dataDir).length >= 4, 'the fixture starts too open');
  const afterClose = await runRelay(dataDir, () => assert.equal(tooOpen(dataDir), [], 'while running'));
  assert.equal(afterClose, [], 'after closing');
  // A data directory made before the stores shared relay.db keeps writing its own files.
  assert.not.ok(readdirSync(dataDir).includes('relay.db'), readdirSync(dataDir).join(', '));
  for (const [name, rows] of [['events.db', 'es_events'], ['documents.db', "sqlite_master WHERE name LIKE 'doc_%'"]]) {
    const db = new DatabaseSync(join(dataDir, name), { readOnly: true });
    try {
      assert.ok((db.prepare(`SELECT count(*) AS n FROM ${rows}`).get() as { n: number }).n > 0, `${name} was written`);
    } finally {
      db.close();
    }
  }
});

test.run();
