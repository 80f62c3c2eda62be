// Commands that need no secret key never make the key file. Where a Relay's key is
// RELAY_SECRET_KEY and the operator's shell did not export it, a `secret.key` written by, say,
// `relay outbox list` would from then on be used silently by any process started there without
// the variable (instead of it being told the key is missing), and what that process seals (the
// DKIM keys of the domains `relay setup` creates) no process with the real key could open.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { runRelay } from './support/relay-process.ts';

const test = suite<{ dataDir: string; workspaceId: string; domainId: string }>('operator commands and the secret key file');
test.before(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-cli-secret-key-'));
  const key = randomBytes(32).toString('base64');
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--password', 'a good long password'], { RELAY_DATA_DIR: ctx.dataDir, RELAY_SECRET_KEY: key });
  assert.is(setup.code, 0, setup.stderr);
  ({ workspaceId: ctx.workspaceId, domainId: ctx.domainId } = JSON.parse(setup.stdout));
  assert.not.ok(existsSync(join(ctx.dataDir, 'secret.key')), 'the key comes from the environment');
});
test.after((ctx) => rmSync(ctx.dataDir, { recursive: true, force: true }));

test('outbox, workspace and domain commands run without RELAY_SECRET_KEY and write no key file', async ({ dataDir, workspaceId, domainId }) => {
  const runs: Array<{ args: string[]; code: number; said: RegExp }> = [
    { args: ['outbox', 'list'], code: 0, said: /is empty/ },
    { args: ['outbox', 'show', 'em_none'], code: 1, said: /no outbox message for em_none/ },
    { args: ['workspace', 'quota', workspaceId], code: 0, said: /recipients this month/ },
    { args: ['workspace', 'activate', workspaceId], code: 0, said: /is activated since/ },
    { args: ['domain', 'mark-verified', domainId, '--reason', 'local test domain'], code: 0, said: /marked verified by the operator/ },
  ];
  for (const { args, code, said } of runs) {
    const run = await runRelay(args, { RELAY_DATA_DIR: dataDir });
    assert.is(run.code, code, run.stderr);
    assert.match(run.stderr, said);
    assert.not.ok(existsSync(join(dataDir, 'secret.key')), `relay ${args.join(' ')} wrote a new secret.key`);
  }
});

test.run();
