// Runs a test fixture script in its own node process and collects its stdout lines, for
// tests that need a second process on the same files (or one to SIGKILL).
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { waitUntil } from './eventually.ts';

export interface FixtureProcess {
  child: ChildProcess;
  /** Complete stdout lines so far. */
  lines: string[];
  stderr(): string;
  waitForLine(matches: (line: string) => boolean, what: string, timeoutMs?: number): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function startFixture(script: URL, args: string[], env: Record<string, string> = {}): FixtureProcess {
  const child = spawn(process.execPath, [fileURLToPath(script), ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  const lines: string[] = [];
  let partial = '';
  let errors = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop()!;
    lines.push(...parts);
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (errors += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
  return {
    child,
    lines,
    stderr: () => errors,
    exited,
    async waitForLine(matches, what, timeoutMs = 20_000) {
      await waitUntil(() => {
        if (child.exitCode !== null && !lines.some(matches)) throw new Error(`fixture exited (${child.exitCode}) before ${what}: ${errors}`);
        return lines.some(matches);
      }, what, timeoutMs);
      return lines.find(matches)!;
    },
  };
}

/**
 * Waits for a fixture that is meant to end by itself (nothing left holding its event loop open)
 * and returns its exit, or null after `watchdogMs`, having killed it. A watchdog, not a speed
 * limit: a process held open by, say, an idle worker thread would never end.
 */
export async function endedOnItsOwn(fixture: FixtureProcess, watchdogMs = 60_000): Promise<{ code: number | null; signal: NodeJS.Signals | null } | null> {
  let watchdog: NodeJS.Timeout | undefined;
  const ended = await Promise.race([fixture.exited, new Promise<null>((resolve) => (watchdog = setTimeout(resolve, watchdogMs, null)))]);
  clearTimeout(watchdog);
  if (ended === null) fixture.child.kill('SIGKILL');
  return ended;
}
