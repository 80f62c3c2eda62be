// Log format: `relay start` writes human-readable lines when its stdout is a terminal (run here
// under a real pseudo-terminal, util-linux's `script`) and one JSON object per line otherwise
// (a pipe, as under a supervisor or a log collector); RELAY_LOG_FORMAT overrides either way.
// A request line names method, route pattern, status, duration and request id.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { loadConfig } from '../infra/config.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort, spawnRelay, waitForReady } from './support/relay-process.ts';

const CLI = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));

const test = suite<{ dir: string }>('log format');

test.before((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-logging-'));
});

test.after((ctx) => rmSync(ctx.dir, { recursive: true, force: true }));

test('the format: pretty on a terminal, JSON otherwise, unless RELAY_LOG_FORMAT says', () => {
  assert.is(loadConfig({}, true).logFormat, 'pretty');
  assert.is(loadConfig({}, false).logFormat, 'json');
  assert.is(loadConfig({ RELAY_LOG_FORMAT: 'json' }, true).logFormat, 'json');
  assert.is(loadConfig({ RELAY_LOG_FORMAT: 'pretty' }, false).logFormat, 'pretty');
  assert.throws(() => loadConfig({ RELAY_LOG_FORMAT: 'xml' }), /RELAY_LOG_FORMAT: must be auto, json or pretty/);
});

test('through a pipe: one JSON object per line, request lines with method, route, status, duration and request id', async (ctx) => {
  const port = await freePort();
  const relay = spawnRelay(['start'], { RELAY_DATA_DIR: join(ctx.dir, 'pipe'), PORT: String(port), RELAY_LOG_LEVEL: 'info' });
  const id = 'em_00000000000000000000000000';
  try {
    await waitForReady(`http://127.0.0.1:${port}`, relay, 60_000);
    assert.is((await fetch(`http://127.0.0.1:${port}/v1/emails/${id}`, { headers: { authorization: 'Bearer rr_test_x' } })).status, 401);
    assert.is((await fetch(`http://127.0.0.1:${port}/nowhere/${id}`)).status, 404);
    await waitUntil(() => relay.output().includes('/nowhere') || relay.output().split('\n').filter((l) => l.includes('"msg":"request"')).length >= 3, 'the request lines');
  } finally {
    await relay.stop();
  }
  const lines = relay.output().split('\n').filter((line) => line.trim() !== '');
  for (const line of lines) assert.ok(line.startsWith('{') && JSON.parse(line), `a JSON line: ${line}`);
  const requests = lines.map((line) => JSON.parse(line)).filter((line) => line.msg === 'request');
  const byRoute = (route: string) => requests.find((line) => line.route === route);
  assert.equal(
    (({ method, route, status }) => ({ method, route, status }))(byRoute('/v1/emails/:id')),
    { method: 'GET', route: '/v1/emails/:id', status: 401 },
  );
  assert.equal(byRoute('unmatched')?.status, 404, 'a request no route matched: no raw URL');
  for (const line of requests) {
    assert.type(line.durationMs, 'number');
    assert.match(line.requestId, /^[0-9a-f-]{36}$/);
  }
  assert.not.ok(relay.output().includes(id), 'the raw URL is not logged');
});

function hasScript(): boolean {
  try {
    execFileSync('script', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

test('on a terminal: human-readable lines', async (ctx) => {
  if (!hasScript()) return console.log('  (skipped: util-linux script is not installed)');
  const port = await freePort();
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RELAY_') && k !== 'PORT'));
  const command = `exec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} start`;
  // script gives the command a pseudo-terminal as stdin, stdout and stderr; its own output is what the terminal showed.
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    env: { ...env, RELAY_DATA_DIR: join(ctx.dir, 'tty'), PORT: String(port), RELAY_INBOUND_SMTP_PORT: '0', RELAY_LOG_LEVEL: 'info' },
    stdio: ['pipe', 'pipe', 'pipe'], detached: true,
  });
  let shown = '';
  child.stdout.on('data', (d) => (shown += d));
  child.stderr.on('data', (d) => (shown += d));
  const exited = new Promise((resolve) => child.on('exit', resolve));
  try {
    await waitUntil(async () => {
      if (child.exitCode !== null) throw new Error(`relay start ended: ${shown}`);
      return (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null))?.status === 200;
    }, 'relay start answers', 60_000);
    await waitUntil(() => /route\S*: \S*"\/healthz"/.test(shown.replace(/\u001b\[[0-9;]*m/g, '')), 'the request line');
  } finally {
    process.kill(-child.pid!, 'SIGTERM');
    await exited;
  }
  // eslint-disable-next-line no-control-regex
  const plain = shown.replace(/\u001b\[[0-9;]*m/g, '').replace(/\r/g, '');
  const listening = plain.split('\n').find((line) => /INFO.*listening/.test(line))!;
  assert.not.ok(listening.trimStart().startsWith('{'), `not JSON: ${listening}`);
  assert.match(listening, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO.*listening/, listening);
  assert.match(plain, /INFO.*request[\s\S]*method: "GET"[\s\S]*route: "\/healthz"[\s\S]*status: 200/);
});

test.run();
