// Human-readable logs (RELAY_LOG_FORMAT=pretty, or `auto` on a terminal) are coloured only where
// colours can be shown and are wanted: not with NO_COLOR set (https://no-color.org), not when
// stdout is not a terminal (`relay start | tee relay.log`, a supervisor capturing stdout), whose
// files would otherwise hold `ESC[32mINFO ESC[39m` around every level and message
// (infra/logging.ts leaves the choice to pino-pretty's own default).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { spawnRelay } from './support/relay-process.ts';

const ESC = '\u001b';

// Whatever the shell running the tests says about colours (spawnRelay passes the environment on;
// NO_COLOR, FORCE_COLOR and CI count when merely present): only what each test sets.
for (const name of ['NO_COLOR', 'FORCE_COLOR', 'CI']) delete process.env[name];

const test = suite<{ dir: string }>('relay start: pretty logs and colours');

test.before.each((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-log-colours-'));
});
test.after.each((ctx) => rmSync(ctx.dir, { recursive: true, force: true }));

/** The pretty log lines `relay start` writes into a pipe until it says it listens, then stopped. */
async function prettyStartOutput(dir: string, env: Record<string, string>): Promise<string> {
  const run = spawnRelay(['start'], {
    RELAY_DATA_DIR: join(dir, 'data'), PORT: '0', RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'pretty',
    TERM: 'xterm-256color',
    ...env,
  });
  try {
    await waitUntil(() => {
      if (run.child.exitCode !== null) throw new Error(`relay start exited early:\n${run.output()}`);
      return /listening/.test(run.output());
    }, 'relay start logs that it listens', 30_000);
  } finally {
    await run.stop();
  }
  return run.output();
}

const shown = (text: string) => text.split('\n').slice(0, 3).join('\n').replaceAll(ESC, '<ESC>');

test('NO_COLOR=1: the log lines hold no colour sequences', async ({ dir }) => {
  const output = await prettyStartOutput(dir, { NO_COLOR: '1' });
  assert.match(output, /INFO/, 'pretty lines were written');
  assert.not.ok(output.includes(ESC), `colours despite NO_COLOR=1:\n${shown(output)}`);
});

test('stdout a pipe (not a terminal): the log lines hold no colour sequences', async ({ dir }) => {
  const output = await prettyStartOutput(dir, {});
  assert.match(output, /INFO/, 'pretty lines were written');
  assert.not.ok(output.includes(ESC), `colours written into a pipe:\n${shown(output)}`);
});

test.run();
