// Runs the real `relay` command in child processes, the way ops run it: for end-to-end
// tests across process boundaries.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { waitUntil } from './eventually.ts';
import { freePort } from './free-port.ts';

export { freePort };

const CLI = fileURLToPath(new URL('../../apps/cli/main.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/**
 * The parent's environment without Relay's own variables: a test says which stores a child
 * uses (CI exports RELAY_KAFKA_BROKERS etc. for the distributed suites; embedded suites must
 * not pick them up by accident).
 */
function baseEnv(): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('RELAY_') && name !== 'PORT' && name !== 'HOST'));
}

export interface RelayProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then wait for exit. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function spawnRelay(args: string[], env: Record<string, string>): RelayProcess {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    // Any free port for the feedback SMTP server unless a test names one: test files run side by side.
    env: { ...baseEnv(), RELAY_LOG_LEVEL: 'warn', RELAY_INBOUND_SMTP_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    output: () => output,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      return exited;
    },
  };
}

/** Runs a relay command to completion; returns its exit code and output. */
export async function runRelay(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env: { ...baseEnv(), RELAY_LOG_LEVEL: 'warn', RELAY_INBOUND_SMTP_PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  return { code, stdout, stderr };
}

/** The exit code, or 'running' if the process still runs after `ms` (it is then stopped). */
export async function exitWithin(run: RelayProcess, ms: number): Promise<number | null | 'running'> {
  let timer: NodeJS.Timeout | undefined;
  const exit = await Promise.race([run.exited, new Promise<'running'>((resolve) => (timer = setTimeout(() => resolve('running'), ms)))]);
  clearTimeout(timer);
  if (exit !== 'running') return exit.code;
  await run.stop();
  return 'running';
}

/**
 * A command that should stop at start (a refused setting), with JSON logs at info and any free
 * port: its exit code, or 'running' if it still runs after 30 s (then stopped), and everything it
 * printed.
 */
export async function runRelayWithin(args: string[], env: Record<string, string>): Promise<{ code: number | null | 'running'; output: string }> {
  const run = spawnRelay(args, { RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json', PORT: '0', ...env });
  const code = await exitWithin(run, 30_000);
  return { code, output: run.output() };
}

export async function waitForReady(baseUrl: string, process: RelayProcess, timeoutMs = 30_000): Promise<void> {
  await waitUntil(async () => {
    if (process.child.exitCode !== null) throw new Error(`relay exited early:\n${process.output()}`);
    try {
      return (await fetch(`${baseUrl}/readyz`)).status === 200;
    } catch {
      return false;
    }
  }, `${baseUrl}/readyz answers 200`, timeoutMs);
}

/**
 * POST /v1/emails over HTTP, waiting out 429 rate limits as the spec tells clients to
 * (Retry-After, then the same request again). Returns the 202 body.
 */
export async function postEmail(baseUrl: string, apiKey: string, body: unknown): Promise<{ id: string; status: string }> {
  for (;;) {
    const response = await fetch(`${baseUrl}/v1/emails`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (response.status === 429) {
      await new Promise((resolve) => setTimeout(resolve, Number(response.headers.get('retry-after') ?? 1) * 1000));
      continue;
    }
    if (response.status !== 202) throw new Error(`POST /v1/emails answered ${response.status}: ${await response.text()}`);
    return (await response.json()) as { id: string; status: string };
  }
}
