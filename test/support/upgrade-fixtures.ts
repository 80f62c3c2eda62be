// Data directories written by older versions of Relay, for the upgrade tests: each fixture under
// test/fixtures/upgrade-<commit>/ holds the SQL text of the old version's sqlite files
// (`<file>.db.sql`, from `sqlite3 <file>.db .dump`), its secret.key, and what it was asked and
// answered (its README.md says which commit wrote it, how, and what it holds). `restoreFixture`
// makes a data directory of them in a fresh temporary directory, as the old version left it
// stopped; today's Relay is then started on it as an operator upgrading in place would.
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { fileURLToPath } from 'node:url';
import { spawnRelay, waitForReady, type RelayProcess } from './relay-process.ts';
import { freePort } from './free-port.ts';

export const fixtureDir = (name: string): string => fileURLToPath(new URL(`../fixtures/${name}/`, import.meta.url));

export interface RestoredFixture {
  /** The temporary directory holding the data directory (removed by `remove`). */
  root: string;
  dataDir: string;
  remove(): void;
}

/** A data directory made of fixture `name`: its sqlite files restored from their SQL text, its key file copied. */
export function restoreFixture(name: string): RestoredFixture {
  const from = fixtureDir(name);
  const root = mkdtempSync(join(tmpdir(), `relay-${name}-`));
  const dataDir = join(root, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  for (const file of readdirSync(from).filter((f) => f.endsWith('.db.sql'))) {
    const db = new DatabaseSync(join(dataDir, file.slice(0, -'.sql'.length)));
    db.exec(readFileSync(join(from, file), 'utf8'));
    db.close();
  }
  copyFileSync(join(from, 'secret.key'), join(dataDir, 'secret.key'));
  // As Relay keeps it (a checkout gives the file the mode of any other).
  chmodSync(join(dataDir, 'secret.key'), 0o600);
  return { root, dataDir, remove: () => rmSync(root, { recursive: true, force: true }) };
}

export function fixtureJson<T>(name: string, file: string): T {
  return JSON.parse(readFileSync(join(fixtureDir(name), file), 'utf8')) as T;
}

export interface UpgradedRelay {
  relay: RelayProcess;
  baseUrl: string;
  env: Record<string, string>;
}

/** `relay start` of today's tree on `dataDir`, JSON logs at info, answering once /readyz says ready. */
export async function startUpgraded(dataDir: string, env: Record<string, string> = {}): Promise<UpgradedRelay> {
  const port = await freePort();
  const all = { RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json', ...env };
  const relay = spawnRelay(['start'], all);
  const baseUrl = `http://127.0.0.1:${port}`;
  await waitForReady(baseUrl, relay, 60_000);
  return { relay, baseUrl, env: all };
}

/** A dashboard session's cookie (`name=value`) for a user the fixture holds. */
export async function signIn(baseUrl: string, email: string, password: string): Promise<string> {
  const response = await fetch(`${baseUrl}/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
  if (response.status !== 200) throw new Error(`sign-in answered ${response.status}: ${await response.text()}`);
  return (response.headers.get('set-cookie') ?? '').split(';')[0];
}

/** POST /v1/emails with an API key (and an Idempotency-Key): the status and the JSON answer, whatever they are. */
export async function postSend(baseUrl: string, apiKey: string, body: unknown, idempotencyKey?: string): Promise<{ status: number; body: any }> {
  const response = await fetch(`${baseUrl}/v1/emails`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

/** What a fixture's requests.json holds: its workspace, a key, and each request with the answer it got. */
export interface RecordedRequests {
  workspaceId: string;
  apiKey: string;
  requests: Record<string, { body: Record<string, unknown>; answer: { id: string; status: string; test_mode: boolean; reason?: string } }>;
}

/** A suite's context: the fixture restored, today's Relay started on it, its owner signed in. */
export interface UpgradedFixture { fixture: RestoredFixture; up: UpgradedRelay; cookie: string; recorded: RecordedRequests }

/** For test.before: restores fixture `name` (one with requests.json), starts today's Relay on it and signs its owner in. */
export async function upgradeFixture(ctx: UpgradedFixture, name: string): Promise<void> {
  ctx.recorded = fixtureJson<RecordedRequests>(name, 'requests.json');
  ctx.fixture = restoreFixture(name);
  ctx.up = await startUpgraded(ctx.fixture.dataDir);
  ctx.cookie = await signIn(ctx.up.baseUrl, 'owner@example.com', 'a long local password');
}

/** For test.after: stops Relay and removes the restored fixture. */
export async function endUpgraded(ctx: Partial<UpgradedFixture>): Promise<void> {
  await ctx.up?.relay.stop();
  ctx.fixture?.remove();
}
