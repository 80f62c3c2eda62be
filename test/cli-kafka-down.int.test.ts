// The operator commands that never publish to the log nor read it (every one but `relay parked
// retry`) do not open it: with RELAY_KAFKA_BROKERS naming brokers that are down (or not up yet:
// docs/distributed.md runs `setup` right after `compose up -d`) they answer from the event and
// document stores, as `relay api` serves while Kafka is down, instead of failing with
// "relay: Connection error …" after kafkajs's retries (~11 s).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { freePort, runRelay } from './support/relay-process.ts';

const test = suite<{ dataDir: string; workspaceId: string; projectId: string; domainId: string }>('operator commands that need no log, with Kafka down');
test.before(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-cli-kafka-down-'));
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--password', 'a good long password'], { RELAY_DATA_DIR: ctx.dataDir });
  assert.is(setup.code, 0, setup.stderr);
  ({ workspaceId: ctx.workspaceId, projectId: ctx.projectId, domainId: ctx.domainId } = JSON.parse(setup.stdout));
});
test.after((ctx) => rmSync(ctx.dataDir, { recursive: true, force: true }));

test('reads and management writes work from the stores while the brokers are down', async ({ dataDir, workspaceId, projectId, domainId }) => {
  const down = `127.0.0.1:${await freePort()}`; // nothing listens there
  const env = { RELAY_DATA_DIR: dataDir, RELAY_KAFKA_BROKERS: down };
  const commands = [
    ['parked', 'list', '--json'],
    ['workspace', 'quota', workspaceId, '--json'],
    ['workspace', 'activate', workspaceId],
    ['domain', 'mark-verified', domainId, '--reason', 'local test domain'],
    ['sites', '--json'],
    ['webhooks', 'list', projectId, '--json'],
    ['outbox', 'list'],
    ['events', '--limit', '1'],
    ['user', 'create', '--email', 'second@relay.localhost', '--password', 'another good long password'],
    ['setup', '--json', '--trust-domain', '--project', 'Second'],
  ];
  const runs = await Promise.all(commands.map((args) => runRelay(args, env)));
  runs.forEach((run, i) => {
    assert.is(run.code, 0, `relay ${commands[i].join(' ')} exited ${run.code}:\n${run.stderr}`);
  });
  assert.is(JSON.parse(runs[1].stdout).workspaceId, workspaceId);
  assert.match(runs[2].stderr, /is activated since/);
  assert.match(runs[8].stderr, /created user second@relay\.localhost/);
  assert.ok(JSON.parse(runs[9].stdout).apiKey, runs[9].stdout);
});

test.run();
