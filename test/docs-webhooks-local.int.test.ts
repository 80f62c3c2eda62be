// docs/webhooks.md, "Receive webhooks on your machine", run as printed: its shell blocks in
// order through bash in a scratch folder (openssl makes the certificate, `npm start` runs
// the real relay CLI with NODE_EXTRA_CA_CERTS and RELAY_WEBHOOK_ALLOW=localhost:<port>, curl
// signs in and creates the endpoint, the page's receiver.mjs listens on localhost), until the
// receiver prints the email.sent event of the email block 5 sent. Only the machine's
// circumstances change: free ports replace 3000 and 8443 (test files run side by side), the
// data directory is the scratch folder's, and `npm start` is the CLI's `start` (npm would
// need the repository as its working directory).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { blocksUnder, jsFile, readDoc } from './support/doc-blocks.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort, runRelay } from './support/relay-process.ts';

const CLI = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));
const SECTION = 'Receive webhooks on your machine';

interface Shell {
  child: ChildProcess;
  output: string;
  exited: Promise<number | null>;
}

interface Context {
  dir: string;
  apiPort: number;
  hookPort: number;
  env: Record<string, string>;
  running: Shell[];
}

const test = suite<Context>('docs/webhooks.md: receive webhooks on your machine');

/** One block through bash in the scratch folder; its own process group, so the whole of it can be stopped. */
function shell(ctx: Context, script: string, env: Record<string, string> = {}): Shell {
  const child = spawn('bash', ['-euo', 'pipefail', '-c', script], { cwd: ctx.dir, env: { ...ctx.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const run: Shell = { child, output: '', exited: new Promise((resolve) => child.on('exit', (code) => resolve(code))) };
  child.stdout!.on('data', (d) => (run.output += d));
  child.stderr!.on('data', (d) => (run.output += d));
  return run;
}

async function runToEnd(ctx: Context, script: string): Promise<string> {
  const run = shell(ctx, script);
  const code = await run.exited;
  if (code !== 0) throw new Error(`block exited ${code}:\n${script}\n${run.output}`);
  return run.output;
}

test.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-docs-webhooks-'));
  [ctx.apiPort, ctx.hookPort] = [await freePort(), await freePort()];
  ctx.running = [];
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('RELAY_') && !name.startsWith('NODE_') && name !== 'PORT' && name !== 'HOST')) as Record<string, string>;
  ctx.env = {
    ...inherited,
    // `node` is this test's Node 24, as `npm start` would pick the pinned one.
    PATH: `${dirname(process.execPath)}:${process.env.PATH}`,
    RELAY_DATA_DIR: join(ctx.dir, 'data'),
    RELAY_INBOUND_SMTP_PORT: '0',
    RELAY_LOG_LEVEL: 'warn',
  };
  // The README's "Send a first email", step 1: what the recipe starts from.
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'you@example.com', '--password', 'a long local password', '--domain', 'example.com'],
    { RELAY_DATA_DIR: ctx.env.RELAY_DATA_DIR });
  assert.is(setup.code, 0, setup.stderr);
  writeFileSync(join(ctx.dir, 'setup.json'), setup.stdout);
  writeFileSync(join(ctx.dir, 'receiver.mjs'), jsFile(readDoc('docs/webhooks.md'), 'receiver.mjs'));
});

test.after(async (ctx) => {
  for (const run of ctx.running) {
    if (run.child.exitCode === null && run.child.signalCode === null) process.kill(-run.child.pid!, 'SIGTERM');
    await run.exited;
  }
  rmSync(ctx.dir, { recursive: true, force: true });
});

test('the five blocks, run as printed, bring the email.sent event of the email sent to the receiver on localhost', async (ctx) => {
  const blocks = blocksUnder(readDoc('docs/webhooks.md'), SECTION, 'sh').map((block) => block.replaceAll('8443', String(ctx.hookPort)).replaceAll('3000', String(ctx.apiPort)));
  assert.is(blocks.length, 5, 'five shell blocks');
  const [certificate, relay, endpoint, receiver, sendEmail] = blocks;
  assert.match(relay, `RELAY_WEBHOOK_ALLOW=localhost:${ctx.hookPort}`);
  assert.match(relay, 'NODE_EXTRA_CA_CERTS=localhost.pem');

  await runToEnd(ctx, certificate);

  const started = shell(ctx, `npm() { [ "$1" = start ] && exec node ${JSON.stringify(CLI)} start; }\n${relay}`, { PORT: String(ctx.apiPort) });
  ctx.running.push(started);
  await waitUntil(async () => {
    if (started.child.exitCode !== null) throw new Error(`relay exited: ${started.output}`);
    return (await fetch(`http://127.0.0.1:${ctx.apiPort}/readyz`).catch(() => null))?.status === 200;
  }, 'relay start is ready', 60_000);

  await runToEnd(ctx, endpoint);
  const created = readFileSync(join(ctx.dir, 'endpoint.json'), 'utf8');
  assert.match(created, /"secret":"whsec_/, `the endpoint was created: ${created}`);
  const hook = shell(ctx, receiver);
  ctx.running.push(hook);
  await waitUntil(() => {
    if (hook.child.exitCode !== null) throw new Error(`the receiver exited: ${hook.output}`);
    return hook.output.includes('listening');
  }, 'the receiver listens');

  const { id } = JSON.parse(await runToEnd(ctx, sendEmail)) as { id: string };
  assert.match(id, /^em_/);
  await waitUntil(() => hook.output.includes(id), 'the receiver printed the event', 30_000);
  const event = JSON.parse(hook.output.split('\n').find((line) => line.includes(id))!);
  assert.is(event.type, 'email.sent');
  assert.is(event.data.email_id, id);
});

test.run();
