// The commands that read or maintain a Relay (events, parked, sites, webhooks list, outbox,
// projections) refuse a RELAY_DATA_DIR that holds no Relay's stores, a typo or a wrong working
// directory: exit 1 saying which store is missing, and nothing created there (no relay.db, no
// secret.key), rather than an empty store and "nothing here" with exit 0.
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

for (const args of [['parked', 'list'], ['sites'], ['webhooks', 'list', 'prj_1'], ['outbox', 'list'], ['projections', 'scratch'], ['projections', 'rebuild', 'emails'], ['projections', 'drop', 'emails_check', '--force']]) {
  typo(`relay ${args.join(' ')} refuses a data directory with no Relay instead of reporting an empty one`, async ({ root }) => {
    const dataDir = join(root, 'dtaa');
    const run = await runRelay(args, { RELAY_DATA_DIR: dataDir });
    assert.not.ok(existsSync(dataDir), `created ${dataDir} (exit ${run.code}; stdout ${JSON.stringify(run.stdout)}; stderr ${JSON.stringify(run.stderr)})`);
    assert.is(run.code, 1, `exit ${run.code}: ${run.stdout}${run.stderr}`);
    assert.match(run.stderr, /^relay: no (event|document) store in .*dtaa: RELAY_DATA_DIR must name the data directory of a Relay/, run.stderr);
    assert.is(run.stdout, '');
  });
}

typo.run();
