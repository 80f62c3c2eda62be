// `relay backup` interrupted (Ctrl-C, a kill, a full disk) while it copies the outbox leaves no
// directory that looks like a finished backup: relay.db, what a restore starts on
// (docs/operations.md, "Restore"), is renamed into place last of all, after the secret key and the
// outbox are in, so a run cut short leaves partial files only. Otherwise the newest backup
// directory, restored months later, would start and lack every outbox message the copy did not
// reach (or, cut earlier, the key: nothing sealed in it would ever open).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';

const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));
/** Enough outbox messages that copying them takes seconds: the interrupt lands during that copy. */
const OUTBOX_MESSAGES = 20_000;

function relayEnv(dataDir: string): Record<string, string> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RELAY_') && !['PORT', 'HOST', 'NODE_ENV'].includes(k))) as Record<string, string>;
  return { ...base, RELAY_LOG_LEVEL: 'silent', RELAY_INBOUND_SMTP_PORT: '0', RELAY_DATA_DIR: dataDir };
}

function run(args: string[], dataDir: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [MAIN, ...args], { env: relayEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

const test = suite<{ dir: string; dataDir: string }>('relay backup interrupted');

test.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-backup-interrupted-'));
  ctx.dataDir = join(ctx.dir, 'data');
  // A Relay (relay.db and secret.key), then an outbox as a busy development Relay keeps one.
  const setup = await run(['setup', '--json', '--trust-domain', '--password', 'a long enough password'], ctx.dataDir);
  assert.is(setup.code, 0, setup.stderr);
  const outbox = join(ctx.dataDir, 'outbox');
  mkdirSync(outbox, { recursive: true });
  const message = `From: app@example.test\r\nTo: someone@example.org\r\nSubject: hello\r\n\r\n${'body '.repeat(100)}\r\n`;
  for (let i = 0; i < OUTBOX_MESSAGES; i++) writeFileSync(join(outbox, `em_${String(i).padStart(6, '0')}.eml`), message);
});
test.after((ctx) => rmSync(ctx.dir, { recursive: true, force: true }));

test('interrupted while the outbox is copied, the directory does not hold relay.db as a finished backup does', async ({ dir, dataDir }) => {
  const target = join(dir, 'backup');
  const child = spawn(process.execPath, [MAIN, 'backup', target], { env: relayEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (output += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (output += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  // Ctrl-C as soon as the backup has put relay.db or the outbox in place: the outbox copy has then
  // just begun, whichever order the files are written in.
  const watcher = setInterval(() => {
    if ((existsSync(join(target, 'relay.db')) || existsSync(join(target, 'outbox'))) && child.exitCode === null && child.signalCode === null) {
      clearInterval(watcher);
      child.kill('SIGINT');
    }
  }, 1);
  const exit = await exited;
  clearInterval(watcher);
  // A run that finished before the interrupt reached it must have made a whole backup (checked below).
  if (exit.code !== 0) assert.is(exit.signal, 'SIGINT', `interrupted: ${JSON.stringify(exit)}\n${output}`);

  const copied = existsSync(join(target, 'outbox')) ? readdirSync(join(target, 'outbox')).filter((name) => name.endsWith('.eml')).length : 0;
  const left = readdirSync(target);
  // What a restore starts on: relay.db. It must be there only in a finished backup.
  assert.ok(
    !left.includes('relay.db') || (copied === OUTBOX_MESSAGES && left.includes('secret.key')),
    `an interrupted backup holds ${left.join(', ')}: relay.db as in a finished backup, with ${copied} of the ${OUTBOX_MESSAGES} outbox messages`,
  );
});

test.run();
