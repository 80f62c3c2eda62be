// The README's quick start, run as a newcomer would: `npm start` in one terminal, then the
// "Send a first email" block, word for word, in a second one (same folder). Only the port is
// changed, so that test files can run side by side. The folder is a copy of the checkout made
// of links, so `./data`, `setup.json` and `sent.json` land in a place of their own.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { freePort } from './support/relay-process.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** The first ```sh block after `heading`. */
function shellBlockAfter(heading: string): string {
  const at = README.indexOf(heading);
  if (at < 0) throw new Error(`README has no "${heading}"`);
  const block = /```sh\n([\s\S]*?)```/.exec(README.slice(at));
  if (!block) throw new Error(`README has no sh block after "${heading}"`);
  return block[1];
}

/** Relay's own variables stay out: the quick start runs on the defaults. */
const cleanEnv = () => Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('RELAY_') && name !== 'PORT' && name !== 'HOST'));

interface Run { code: number | null; stdout: string; stderr: string }

function run(command: string, cwd: string, env: Record<string, string | undefined>): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', command], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const test = suite('the README quick start');

test('npm start, then the first-email block as written: queued, read back, and signed in the outbox', async () => {
  const start = shellBlockAfter('# Relay').split('\n').find((line) => line.startsWith('npm install && npm start'));
  assert.ok(start, 'the README starts Relay with `npm install && npm start`');
  const firstEmail = shellBlockAfter('## Send a first email and read it back');
  assert.match(firstEmail, /127\.0\.0\.1:3000/);

  const folder = mkdtempSync(join(tmpdir(), 'relay-quickstart-'));
  for (const entry of readdirSync(ROOT)) {
    if (entry === '.git' || entry === 'data') continue;
    symlinkSync(join(ROOT, entry), join(folder, entry));
  }
  const port = await freePort();
  const env = { ...cleanEnv(), PORT: String(port), RELAY_INBOUND_SMTP_PORT: '0' };
  // `npm install` is what CI already did; the test runs the `npm start` half of the line.
  const server = spawn('npm', ['start'], { cwd: folder, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let serverOutput = '';
  server.stdout!.on('data', (d) => (serverOutput += d));
  server.stderr!.on('data', (d) => (serverOutput += d));
  const exited = new Promise((resolve) => server.on('exit', resolve));
  try {
    await waitUntil(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status === 200, 'npm start answering /readyz', 60_000);
    const script = firstEmail.replaceAll('127.0.0.1:3000', `127.0.0.1:${port}`);
    const result = await run(script, folder, env);
    assert.is(result.code, 0, `the block failed:\n${result.stderr}\n${result.stdout}\n${serverOutput}`);

    const sent = JSON.parse(readFileSync(join(folder, 'sent.json'), 'utf8'));
    assert.match(sent.id, /^em_/);
    assert.is(sent.status, 'queued');
    assert.is(sent.test_mode, true);
    // The detail (with its timeline) and the list both name the email.
    assert.ok(result.stdout.split(sent.id).length - 1 >= 3, 'the detail and the list show the email');
    // What went out: the exact message, DKIM-signed.
    assert.match(result.stdout, /DKIM-Signature: [^]*?\bd=example\.com;/m);
    assert.match(result.stdout, /^Subject: My first email$/m);
    assert.match(result.stdout, /Hello from Relay/);
  } finally {
    if (server.exitCode === null) process.kill(-server.pid!, 'SIGTERM');
    await exited;
    rmSync(folder, { recursive: true, force: true });
  }
});

test.run();
