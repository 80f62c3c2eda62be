// `relay webhooks list` parses its arguments strictly, as every operator command does: an option
// standing where the project id goes (`relay webhooks list $PROJECT --json | jq` with an empty
// `$PROJECT`, or a mistyped `--jsno`, `-j`) is a usage mistake (exit 2, saying what is wrong), never
// a project named "--json" whose empty list a script would take for success; and a project id
// that names no project exits 1 with "no project <id>" on stderr, as other commands given an id
// that names nothing do (`relay workspace quota`, `relay domain verify`, `relay parked dismiss`),
// not "no webhook endpoints" with exit 0 (test/cli.int.test.ts: "2 usage, 78 configuration, 1
// refused or failed").
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';

const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));

interface Run { args: string[]; code: number | null; stdout: string; stderr: string }

function relay(args: string[], env: Record<string, string>): Promise<Run> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RELAY_') && !['PORT', 'HOST', 'NODE_ENV'].includes(k)));
  const child = spawn(process.execPath, [MAIN, ...args], { env: { ...base, RELAY_LOG_LEVEL: 'silent', RELAY_INBOUND_SMTP_PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ args, code, stdout, stderr })));
}

const where = (run: Run) => `relay ${run.args.join(' ')} → exit ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`;

const test = suite<{ dir: string; env: Record<string, string>; projectId: string }>('relay webhooks list: options and ids');

test.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-webhooks-list-'));
  ctx.env = { RELAY_DATA_DIR: join(ctx.dir, 'data') };
  const setup = await relay(['setup', '--json', '--trust-domain', '--password', 'a long enough password'], ctx.env);
  assert.is(setup.code, 0, where(setup));
  ctx.projectId = (JSON.parse(setup.stdout) as { projectId: string }).projectId;
});
test.after((ctx) => rmSync(ctx.dir, { recursive: true, force: true }));

test('control: relay webhooks list <projectId> --json prints the JSON and exits 0', async ({ env, projectId }) => {
  const run = await relay(['webhooks', 'list', projectId, '--json'], env);
  assert.is(run.code, 0, where(run));
  assert.equal(JSON.parse(run.stdout), { endpoints: [] }, where(run));
});

for (const option of ['--json', '--bogus', '-j']) {
  test(`relay webhooks list ${option} (no project id) is a usage mistake, exit 2, not a project named "${option}"`, async ({ env }) => {
    const run = await relay(['webhooks', 'list', option], env);
    assert.not.match(run.stderr, `project ${option} has no webhook endpoints`, `the option was taken as a project id: ${where(run)}`);
    assert.is(run.code, 2, where(run));
  });
}

test('relay webhooks list of a project id that names no project exits 1 saying so, not "no webhook endpoints" with exit 0', async ({ env, projectId }) => {
  const typo = `${projectId.slice(0, -1)}${projectId.endsWith('a') ? 'b' : 'a'}`;
  const run = await relay(['webhooks', 'list', typo, '--json'], env);
  assert.is(run.code, 1, `a project that does not exist answered as one without endpoints: ${where(run)}`);
  assert.match(run.stderr, typo, where(run));
});

test.run();
