// `relay events | head -1`, `relay events export | head -1`, `relay openapi | head -1`: when the
// reader of stdout goes away the command stops quietly, exit 0 (apps/cli/main.ts says why), with
// no unhandled EPIPE 'error' event or stack trace, and without waiting forever for a drain.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { loadConfig } from '../infra/config.ts';

const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));

/** Runs relay, reads the first line of stdout, then closes the pipe as `| head -1` does. */
function relayIntoHead(args: string[], env: Record<string, string>): Promise<{ code: number | null; firstLine: string; stderr: string }> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RELAY_') && !['PORT', 'HOST', 'NODE_ENV'].includes(k)));
  const child = spawn(process.execPath, [MAIN, ...args], { env: { ...base, RELAY_LOG_LEVEL: 'silent', RELAY_INBOUND_SMTP_PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let firstLine = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    firstLine += d;
    if (firstLine.includes('\n')) {
      firstLine = firstLine.slice(0, firstLine.indexOf('\n'));
      child.stdout.destroy(); // the reader is gone: further writes get EPIPE
    }
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, firstLine, stderr })));
}

const epipe = suite<{ dataDir: string }>('relay output into a pipe that closes early');

epipe.before(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-cli-pipe-'));
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: ctx.dataDir, RELAY_LOG_LEVEL: 'silent' }));
  try {
    // Well over a pipe buffer (64 KiB) of output.
    for (let i = 0; i < 1500; i++) {
      await stores.events.append(`email-em_p${i}`, [{ id: randomUUID(), type: 'Probe', data: { i, pad: 'x'.repeat(200) } }], { expectedRevision: 'no_stream' });
    }
  } finally {
    await stores.close();
  }
});
epipe.after((ctx) => rmSync(ctx.dataDir, { recursive: true, force: true }));

for (const args of [['events'], ['events', 'export'], ['openapi']]) {
  epipe(`relay ${args.join(' ')} | head -1 stops without a stack trace`, async ({ dataDir }) => {
    const run = await relayIntoHead(args, { RELAY_DATA_DIR: dataDir });
    assert.ok(run.firstLine.length > 0, 'printed a first line');
    assert.not.match(run.stderr, /Unhandled 'error' event|\n\s+at \S|node:internal/, `stack trace on stderr (exit ${run.code}):\n${run.stderr}`);
    assert.is(run.code, 0, `exit ${run.code}: ${run.stderr}`);
  });
}

epipe.run();
