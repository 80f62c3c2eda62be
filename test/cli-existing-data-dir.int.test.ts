// The commands that read or maintain a Relay (events, parked, sites, webhooks list, outbox,
// projections, and workspace and domain commands, whose workspace or domain must exist) refuse
// a RELAY_DATA_DIR that holds no Relay's stores, a typo or a wrong working directory: exit 1
// saying which store is missing, and nothing created there (no relay.db, no secret.key), rather
// than an empty store and "nothing here" with exit 0 (or "not found" and a new empty Relay).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { runRelay } from './support/relay-process.ts';

const typo = suite<{ root: string }>('read-only commands against a data directory that holds no Relay');
typo.before.each((ctx) => {
  ctx.root = mkdtempSync(join(tmpdir(), 'relay-cli-no-store-'));
});
typo.after.each((ctx) => rmSync(ctx.root, { recursive: true, force: true }));

typo('relay events refuses and creates nothing', async ({ root }) => {
  const dataDir = join(root, 'dtaa');
  const run = await runRelay(['events'], { RELAY_DATA_DIR: dataDir });
  assert.is(run.code, 1, run.stderr);
  assert.match(run.stderr, /no event store in/);
  assert.not.ok(existsSync(dataDir));
});

const commands = [
  ['parked', 'list'], ['sites'], ['webhooks', 'list', 'prj_1'], ['outbox', 'list'], ['projections', 'scratch'], ['projections', 'rebuild', 'emails'],
  ['projections', 'drop', 'emails_check', '--force'],
  ['workspace', 'activate', 'ws_1'], ['workspace', 'deactivate', 'ws_1'], ['workspace', 'quota', 'ws_1'], ['workspace', 'quota', 'ws_1', '--recipients', '10'],
  ['domain', 'verify', 'dom_1'], ['domain', 'mark-verified', 'dom_1', '--reason', 'local'],
];
for (const args of commands) {
  typo(`relay ${args.join(' ')} refuses a data directory with no Relay instead of reporting an empty one`, async ({ root }) => {
    const dataDir = join(root, 'dtaa');
    // An unanswered resolver: domain verify must not get as far as asking DNS.
    const run = await runRelay(args, { RELAY_DATA_DIR: dataDir, RELAY_DNS_SERVERS: '127.0.0.1:9' });
    assert.not.ok(existsSync(dataDir), `created ${dataDir} (exit ${run.code}; stdout ${JSON.stringify(run.stdout)}; stderr ${JSON.stringify(run.stderr)})`);
    assert.is(run.code, 1, `exit ${run.code}: ${run.stdout}${run.stderr}`);
    assert.match(run.stderr, /^relay: no (event|document) store in .*dtaa: RELAY_DATA_DIR must name the data directory of a Relay/, run.stderr);
    assert.is(run.stdout, '');
  });
}

typo.run();
