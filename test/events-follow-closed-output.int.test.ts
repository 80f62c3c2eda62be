// `relay events --follow | head -1`: once the reader of stdout has gone away, the next event the
// live part receives cannot be written. The command must then stop (exit 0, quietly), as the
// catch-up part does (test/cli-output-pipe.int.test.ts), rather than run on forever: the event
// store retries a failing subscription handler without end, so the pipeline never finishes.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores, type Stores } from '../apps/runtime.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { loadConfig } from '../infra/config.ts';
import { accepted, claimed, toNewEvent } from './support/email-events.ts';

const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));

const test = suite('relay events --follow into a pipe that closes');
const dataDir = mkdtempSync(join(tmpdir(), 'relay-review-follow-pipe-'));
let stores: Stores;

test.before(async () => {
  stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
  await stores.events.append(emailStreamId('em_pipe0'), [toNewEvent(accepted({ emailId: 'em_pipe0' }))], { expectedRevision: 'no_stream' });
});

test.after(async () => {
  await stores.close();
  rmSync(dataDir, { recursive: true, force: true });
});

test('the live part stops once stdout is closed (exit 0, no stack)', async () => {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RELAY_') && !['PORT', 'HOST', 'NODE_ENV'].includes(k)));
  const child = spawn(process.execPath, [MAIN, 'events', '--follow'], {
    env: { ...base, RELAY_LOG_LEVEL: 'silent', RELAY_INBOUND_SMTP_PORT: '0', RELAY_DATA_DIR: dataDir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  try {
    // The catch-up part prints the one event there is: then the reader goes away (`head -1`).
    await new Promise<void>((resolve) => {
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        if (out.includes('\n')) {
          child.stdout.destroy();
          resolve();
        }
      });
    });
    // An event for the live part, which it can only fail to write.
    await stores.events.append(emailStreamId('em_pipe0'), [toNewEvent(claimed())], { expectedRevision: 0 });
    const code = await Promise.race([exited, new Promise<'running'>((resolve) => setTimeout(() => resolve('running'), 15_000).unref())]);
    assert.is.not(code, 'running', `relay events --follow still runs 15 s after its output closed and an event came (stderr: ${stderr.slice(0, 500)})`);
    assert.is(code, 0, `exit ${code}: ${stderr}`);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  }
});

test.run();
