// `relay outbox` and `relay openapi` read their arguments by hand, where every other command uses
// node:util parseArgs, and so treat their options unlike the rest of the CLI:
// - `relay outbox list --limit=5` and `relay openapi --out=FILE` (the --name=value form every
//   other command takes, e.g. `relay events --limit=5`, `relay parked list --limit=5`) are
//   refused as usage mistakes;
// - `relay outbox list --limit 0x10` (or 1e3, 2.0) is taken as a number (Number()), where
//   `relay events --limit 0x10` is refused "must be a whole number";
// - a mistake prints only the usage, never what was wrong (`relay outbox list --bogus` does not
//   say "Unknown option '--bogus'" as `relay sites --bogus` does).
//
// Where: apps/cli/outbox-commands.ts:20-27; apps/cli/openapi-command.ts:108-112.
//
// Expected: parse with parseArgs (strict) like the other commands: --limit=N and --out=FILE
// accepted; --limit refused unless /^\d+$/ and ≥ 1; each refusal says what is wrong
// ("relay: Unknown option '--bogus'", "--limit must be a whole number from 1, got "0x10"")
// before the usage, exit 2.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';

const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));

interface Run { args: string[]; code: number | null; stdout: string; stderr: string }

function relay(args: string[], env: Record<string, string>): Promise<Run> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RELAY_') && !['PORT', 'HOST', 'NODE_ENV'].includes(k)));
  const child = spawn(process.execPath, [MAIN, ...args], { env: { ...base, RELAY_LOG_LEVEL: 'silent', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ args, code, stdout, stderr })));
}

const where = (run: Run) => `relay ${run.args.join(' ')} → exit ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`;

const test = suite<{ dir: string; env: Record<string, string> }>('relay outbox and relay openapi read options as the other commands do');

test.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-cli-hand-parsed-'));
  ctx.env = { RELAY_DATA_DIR: join(ctx.dir, 'data') };
  // A Relay to read: `relay outbox list` refuses a data directory that holds none.
  const made = await relay(['user', 'create', '--email', 'ops@example.test', '--password', 'a long enough password'], ctx.env);
  assert.is(made.code, 0, where(made));
});
test.after((ctx) => rmSync(ctx.dir, { recursive: true, force: true }));

test('--limit=N, as relay events and relay parked list take it, lists the outbox', async ({ env }) => {
  const control = await relay(['events', '--limit=5'], env);
  assert.is(control.code, 0, where(control));
  const run = await relay(['outbox', 'list', '--limit=5'], env);
  assert.is(run.code, 0, where(run));
  assert.match(run.stderr, /the outbox .* is empty/, where(run));
});

for (const limit of ['0x10', '1e3', '2.0']) {
  test(`relay outbox list --limit ${limit} is refused as not a whole number (exit 2), as relay events refuses it`, async ({ env }) => {
    const control = await relay(['events', '--limit', limit], env);
    assert.is(control.code, 2, where(control));
    const run = await relay(['outbox', 'list', '--limit', limit], env);
    assert.is(run.code, 2, where(run));
    assert.match(run.stderr, new RegExp(`--limit must be a whole number.*"${limit.replace('.', '\\.')}"`), where(run));
  });
}

test('relay outbox list --bogus says which option is unknown, as relay sites --bogus does', async ({ env }) => {
  const control = await relay(['sites', '--bogus'], env);
  assert.match(control.stderr, /Unknown option '--bogus'/, where(control));
  const run = await relay(['outbox', 'list', '--bogus'], env);
  assert.is(run.code, 2, where(run));
  assert.match(run.stderr, /Unknown option '--bogus'/, where(run));
});

test('relay openapi --out=FILE writes the document, as --out FILE does', async ({ dir, env }) => {
  const file = join(dir, 'openapi.json');
  const run = await relay(['openapi', `--out=${file}`], env);
  assert.is(run.code, 0, where(run));
  assert.ok(existsSync(file), where(run));
});

test.run();
