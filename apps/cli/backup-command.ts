// `relay backup <directory>`: a copy of an embedded data directory, safe to take while Relay runs,
// that is itself a data directory (restore: start Relay on it). The database is copied with
// `VACUUM INTO`, one read transaction: a snapshot of one instant, whatever Relay writes
// meanwhile (its writers do not wait; the WAL grows until the copy ends). Everything Relay keeps
// of an email (events, read models, consumer offsets, content keys) is in that one file, so the
// copy is a state Relay could have stopped in. Then the key file (without the secret key the
// sealed values, message bodies and BCC among them, cannot be opened; the rest of relay.db is in
// clear) and the outbox's messages (in clear: left out with the key). With RELAY_SECRET_KEY set,
// the key is that value, which no copy holds: the report names it, and the key file, if any, as
// the earlier key it is.
//
// Data directories made from 2026-11-23 to 2026-11-27 keep the log in log.db beside relay.db (the
// forwarder's copy of the events topic and the consumer groups' offsets: apps/runtime.ts,
// embeddedFiles), and Relay goes on running on them so. Both files are copied, each as one
// snapshot, log.db's first; the two are not of one instant, so the order and one correction make
// the pair a state Relay could have stopped in. Every offset a consumer group committed in log.db's
// snapshot follows events whose effects relay.db's later one holds (a group takes what follows
// again, at least once, as after a crash), and every event log.db's snapshot holds is in relay.db's
// event store. Only the forwarder's checkpoint, in relay.db, may have moved past what log.db's
// snapshot holds: the copy's is set back to the checkpoint read before that snapshot began, which
// the log had acknowledged, so the restored forwarder publishes again what followed it.
//
// Data directories made before the stores shared relay.db keep events.db, documents.db and
// log.db: three files whose writes depend on each other both ways (a body's key copied before the
// email's event, say), so those are refused with how to copy them stopped.
import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs } from 'node:util';
import { loadConfig, type RelayConfig } from '../../infra/config.ts';
import { BUSY_TIMEOUT_MS, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, restrictMode } from '../../infra/sqlite/database.ts';
import { KEY_FILE_NAME, keyIdOf, parseKey, splitKeyList } from '../../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../../infra/sqlite/document-store.ts';
import type { Collection, Stored } from '../../infra/ports/document-store.ts';
import type { ForwarderCheckpoint } from '../pipeline/forwarder.ts';
import { COLLECTIONS } from '../services/collections.ts';
import { embeddedFiles, outboxDirOf } from '../runtime.ts';
import { asksForHelp } from './command.ts';

const USAGE = [
  'usage: relay backup <directory> [--without-secret-key]',
  'Copies the embedded data directory (RELAY_DATA_DIR) into <directory>, which must not exist or be',
  'empty: relay.db as one snapshot (safe while Relay runs; log.db too where the directory keeps its log',
  'there), secret.key, and the outbox. The copy is a',
  'data directory: to restore, stop Relay and start it with RELAY_DATA_DIR=<directory> (or put the',
  'directory in place of the old one). What was admitted after the snapshot is not in it.',
  '  --without-secret-key  leave secret.key out, and the outbox (its messages are in clear): keep the key',
  '                        apart; the backup\'s sealed values (message bodies and BCC, DKIM keys, webhook',
  '                        secrets) cannot be opened without it, while the rest of relay.db (addresses,',
  '                        subjects, headers, metadata, events) is in clear',
  'With RELAY_SECRET_KEY set, that value is the key: no backup holds it, so keep it (and',
  'RELAY_SECRET_KEY_PREVIOUS) with the backups, and set it again to restore.',
].join('\n');

/** What the secret key opens, for the report. */
const SEALED = 'the sealed message bodies and BCC, DKIM keys and webhook secrets';

const EXIT_USAGE = 2;

/** Why this configuration's data cannot be backed up by this command; null when it can. */
function refusal(config: RelayConfig): string | null {
  if (config.eventStoreUrl || config.mongodbUrl || config.kafkaBrokers) {
    return 'relay backup copies the embedded stores; with RELAY_EVENTSTORE_URL, RELAY_MONGODB_URL or RELAY_KAFKA_BROKERS set, back up EventStoreDB, MongoDB and Kafka with their own tools (docs/operations.md, "Backups")';
  }
  const files = embeddedFiles(config.dataDir);
  if (files.documents !== files.events) {
    const found = [...new Set(Object.values(files))].filter((file) => existsSync(file)).map((file) => basename(file));
    return `${config.dataDir} keeps its stores in separate files (${found.join(', ')}: a data directory from before they shared relay.db), which cannot be copied at one instant while Relay runs: stop every Relay process on it, then copy the whole directory (cp -a)`;
  }
  if (!existsSync(files.events)) return `no relay.db in ${config.dataDir}: RELAY_DATA_DIR must name the data directory of a Relay`;
  return null;
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/**
 * With RELAY_SECRET_KEY set, the key the backup's sealed values open with, and the previous ones
 * (by id: ids are safe to print, keys never are); and what the key file holds, if there is one:
 * the same key, or an earlier one that Relay keeps as a previous key (infra/secrets/secret-box.ts).
 */
interface EnvironmentKeys {
  currentId: string;
  previousIds: string[];
  file: { kind: 'current' | 'earlier'; keyId: string } | { kind: 'unreadable' } | null;
}

function environmentKeys(config: RelayConfig, keyFile: string): EnvironmentKeys | null {
  if (config.secretKey === null || config.secretKey.trim() === '') return null;
  const current = parseKey(config.secretKey);
  const previousIds = config.previousSecretKeys.flatMap(splitKeyList).map((key, i) => keyIdOf(parseKey(key, `RELAY_SECRET_KEY_PREVIOUS (entry ${i + 1})`)));
  if (!existsSync(keyFile)) return { currentId: keyIdOf(current), previousIds, file: null };
  let fileKey: Buffer;
  try {
    fileKey = parseKey(readFileSync(keyFile, 'utf8'));
  } catch {
    return { currentId: keyIdOf(current), previousIds, file: { kind: 'unreadable' } };
  }
  return { currentId: keyIdOf(current), previousIds, file: { kind: fileKey.equals(current) ? 'current' : 'earlier', keyId: keyIdOf(fileKey) } };
}

/**
 * Makes the target and its missing parents one at a time: Node's recursive mkdir never returns
 * where mkdir answers ENOENT under a parent that exists (/proc), where this fails at once.
 */
function makeDirectory(target: string): void {
  const missing: string[] = [];
  for (let dir = target; !existsSync(dir); dir = dirname(dir)) missing.unshift(dir);
  for (const dir of missing) mkdirSync(dir, { mode: PRIVATE_DIR_MODE });
}

/**
 * One snapshot of sqlite file `from` (VACUUM INTO: one read transaction), written beside `to` under
 * a partial name, amended (`amend`, on the copy), then checked: the partial file, or why it could
 * not be made (nothing is left then).
 */
async function snapshot(from: string, to: string, amend?: (copy: string) => Promise<void>): Promise<{ partial: string; snapshotAt: string } | string> {
  const partial = `${to}.partial`;
  const db = new DatabaseSync(from, { readOnly: true, timeout: BUSY_TIMEOUT_MS });
  let snapshotAt: string;
  try {
    snapshotAt = new Date().toISOString();
    db.prepare('VACUUM INTO ?').run(partial);
  } catch (error) {
    rmSync(partial, { force: true });
    return `copying ${from} failed: ${(error as Error).message}`;
  } finally {
    db.close();
  }
  restrictMode(partial, PRIVATE_FILE_MODE);
  try {
    await amend?.(partial);
  } catch (error) {
    rmSync(partial, { force: true });
    return `amending the copy of ${basename(to)} failed: ${(error as Error).message}`;
  }
  const copy = new DatabaseSync(partial, { readOnly: true });
  let check: string;
  try {
    check = (copy.prepare('PRAGMA quick_check').get() as { quick_check: string }).quick_check;
  } finally {
    copy.close();
  }
  if (check !== 'ok') {
    rmSync(partial, { force: true });
    return `the copy of ${basename(to)} failed its check (${check}); nothing was kept`;
  }
  return { partial, snapshotAt };
}

/** The forwarders' checkpoints (one per log namespace: forwarderCheckpointId) among `checkpoints`, by id. */
async function forwarderCheckpointsIn(checkpoints: Collection<ForwarderCheckpoint>): Promise<Map<string, Stored<ForwarderCheckpoint>>> {
  const found = await checkpoints.find({ where: { _id: { gte: 'forwarder:', lt: 'forwarder;' } } });
  return new Map(found.map((checkpoint) => [checkpoint._id, checkpoint]));
}

/** `work` on the document store of sqlite file `file` (its collections as Relay keeps them). */
async function withDocuments<T>(file: string, options: { readOnly: boolean }, work: (documents: SqliteDocumentStore) => Promise<T>): Promise<T> {
  const db = new DatabaseSync(file, { readOnly: options.readOnly, timeout: BUSY_TIMEOUT_MS });
  const documents = new SqliteDocumentStore(db);
  try {
    return await work(documents);
  } finally {
    await documents.close();
    db.close();
  }
}

/**
 * Sets each forwarder's checkpoint in the copy `file` back to its position in `before` (read
 * before log.db's snapshot: the copied log holds what it names); one that had none then starts
 * from the first event. Returns how many were set back.
 */
function setBackForwarders(file: string, before: Map<string, ForwarderCheckpoint>): Promise<number> {
  return withDocuments(file, { readOnly: false }, async (documents) => {
    const checkpoints = documents.collection<ForwarderCheckpoint>(COLLECTIONS.checkpoints);
    let setBack = 0;
    for (const [id, { _v, ...copied }] of await forwarderCheckpointsIn(checkpoints)) {
      const position = before.get(id)?.position ?? null;
      if (copied.position === position) continue;
      if (!(await checkpoints.replace({ ...copied, position }, _v))) throw new Error(`its ${id} changed while it was set back`);
      setBack++;
    }
    return setBack;
  });
}

export async function backup(args: string[]): Promise<number> {
  if (asksForHelp(args)) {
    console.log(USAGE);
    return 0;
  }
  let target: string;
  let withoutKey: boolean;
  try {
    const parsed = parseArgs({ args, options: { 'without-secret-key': { type: 'boolean' } }, allowPositionals: true, strict: true });
    if (parsed.positionals.length !== 1) throw new Error('expected one directory');
    target = resolve(parsed.positionals[0]);
    withoutKey = parsed.values['without-secret-key'] ?? false;
  } catch (error) {
    console.error(`relay: ${(error as Error).message}\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  const config = loadConfig();
  const refused = refusal(config);
  if (refused) {
    console.error(`relay: ${refused}`);
    return 1;
  }
  const source = resolve(config.dataDir);
  if (target === source || target.startsWith(`${source}/`)) {
    console.error(`relay: the backup must go outside the data directory ${source}`);
    return EXIT_USAGE;
  }
  if (existsSync(target) && (!statSync(target).isDirectory() || readdirSync(target).length > 0)) {
    console.error(`relay: ${target} exists and is not an empty directory; a backup goes into a new or empty one`);
    return EXIT_USAGE;
  }
  const key = join(source, KEY_FILE_NAME);
  const envKeys = environmentKeys(config, key);
  try {
    makeDirectory(target);
  } catch (error) {
    console.error(`relay: cannot make the backup directory ${target}: ${(error as Error).message}`);
    return 1;
  }
  restrictMode(target, PRIVATE_DIR_MODE);

  // Written under other names and renamed once whole and checked, relay.db last of all files
  // (after the key and the outbox): a copy cut short (a full disk, a kill, Ctrl-C) never looks
  // like a backup.
  const files = embeddedFiles(source);
  const lines: string[] = [];
  let log: { partial: string; snapshotAt: string } | null = null;
  let amend: ((copy: string) => Promise<void>) | undefined;
  let setBack = 0;
  if (files.log !== files.events) {
    // Read before log.db's snapshot, which then holds what they name (top of this file).
    const forwarders = await withDocuments(files.events, { readOnly: true }, (documents) => forwarderCheckpointsIn(documents.collection(COLLECTIONS.checkpoints)));
    const copied = await snapshot(files.log, join(target, 'log.db'));
    if (typeof copied === 'string') {
      console.error(`relay: ${copied}`);
      return 1;
    }
    log = copied;
    amend = async (copy) => {
      setBack = await setBackForwarders(copy, forwarders);
    };
  }
  const database = join(target, 'relay.db');
  const copied = await snapshot(files.events, database, amend);
  if (typeof copied === 'string') {
    if (log) rmSync(log.partial, { force: true });
    console.error(`relay: ${copied}`);
    return 1;
  }
  lines.push(`relay.db: ${mib(statSync(copied.partial).size)}, as it was at ${copied.snapshotAt}`);
  if (log) {
    renameSync(log.partial, join(target, 'log.db'));
    // A data directory from 2026-11-23 to 2026-11-27 keeps its log there (top of this file).
    lines.push(`log.db: ${mib(statSync(join(target, 'log.db')).size)}, as it was at ${log.snapshotAt}, just before relay.db's snapshot`
      + (setBack > 0 ? '; the copy\'s forwarder checkpoint is set back to what it holds (the restored forwarder publishes again what followed)' : ''));
  }

  if (envKeys) {
    const { currentId, previousIds } = envKeys;
    const previous = previousIds.length === 0 ? ''
      : ` (RELAY_SECRET_KEY_PREVIOUS, ${previousIds.length === 1 ? 'key' : 'keys'} ${previousIds.join(', ')}: what is still sealed under ${previousIds.length === 1 ? 'it' : 'them'})`;
    lines.push(`secret key: RELAY_SECRET_KEY (key ${currentId}) opens ${SEALED}${previous}; no backup holds ${previous ? 'these values' : 'that value'}: keep ${previous ? 'them' : 'it'} with this one, or nothing sealed in it opens`);
  }
  // Whether the copy holds the key its sealed values open with.
  let holdsKey = false;
  if (withoutKey && existsSync(key)) {
    lines.push(`${KEY_FILE_NAME}: left out (--without-secret-key): keep the key with which Relay runs apart, or the backup's sealed values cannot be opened`);
  } else if (existsSync(key) && !withoutKey) {
    copyFileSync(key, join(target, KEY_FILE_NAME));
    restrictMode(join(target, KEY_FILE_NAME), PRIVATE_FILE_MODE);
    const file = envKeys?.file ?? null;
    if (file?.kind === 'earlier') {
      lines.push(`${KEY_FILE_NAME}: copied; it holds an earlier key (${file.keyId}), not RELAY_SECRET_KEY: Relay keeps it as a previous key, and it opens only what it sealed before RELAY_SECRET_KEY was set (docs/operations.md, "The secret key")`);
    } else if (file?.kind === 'unreadable') {
      lines.push(`${KEY_FILE_NAME}: copied; it holds no key Relay reads (with RELAY_SECRET_KEY set, Relay leaves it alone)`);
    } else {
      holdsKey = true;
      lines.push(`${KEY_FILE_NAME}: copied; it opens ${SEALED}, so keep this backup as private as the data directory (or back up --without-secret-key and keep the key apart)`);
    }
  } else if (!envKeys) {
    lines.push(`${KEY_FILE_NAME}: none in the data directory, and RELAY_SECRET_KEY is not set here: the key is the RELAY_SECRET_KEY of the Relay that runs on it; keep that value with the backup`);
  }
  // What the key does not protect, said of every copy that goes without it.
  if (!holdsKey) lines.push('relay.db, without the key: its message bodies and BCC stay sealed, but the rest is in clear (addresses, subjects, headers, tags, metadata, events), readable by whoever holds the copy');

  // After the snapshot: every message the snapshot says was written to the outbox is there. The
  // outbox holds messages as sent, bodies and BCC envelopes in clear: a backup kept apart from
  // its key goes without them.
  const outbox = outboxDirOf({ dataDir: source });
  if (existsSync(outbox) && withoutKey) {
    lines.push('outbox: left out (--without-secret-key): its messages are in clear');
  } else if (existsSync(outbox)) {
    cpSync(outbox, outboxDirOf({ dataDir: target }), { recursive: true, filter: (path) => !path.endsWith('.tmp') });
    const messages = readdirSync(outboxDirOf({ dataDir: target })).filter((name) => name.endsWith('.eml')).length;
    lines.push(`outbox: ${messages} ${messages === 1 ? 'message' : 'messages'}`);
  }
  // Only now, with the key and the outbox beside it, does the copy look like a backup.
  renameSync(copied.partial, database);
  console.log(`backed up ${source} into ${target}`);
  for (const line of lines) console.log(`  ${line}`);
  const keys = envKeys ? ` and RELAY_SECRET_KEY${envKeys.previousIds.length > 0 ? ' and RELAY_SECRET_KEY_PREVIOUS' : ''} set as now`
    : withoutKey ? `, the key file kept apart put back in it as ${KEY_FILE_NAME}` : '';
  console.log(`to restore: stop Relay, then start it with RELAY_DATA_DIR=${target}${keys} (or put that directory in place of ${source})`);
  return 0;
}
