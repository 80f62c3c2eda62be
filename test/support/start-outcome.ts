// How a real `relay` process given some configuration ends its start: it exits (a refused
// setting: its exit code and what it printed), or it gets as far as listening (the positive
// marker: the "listening" line of its JSON log), in which case it is stopped. Never a fixed
// sleep: one of the two always happens, and the wait is bounded only to fail a stuck start.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitUntil } from './eventually.ts';
import { spawnRelay } from './relay-process.ts';

export type StartOutcome =
  | { outcome: 'exited'; code: number | null; output: string }
  | { outcome: 'listening'; url: string; output: string; seen: string };

/**
 * Runs `relay <args>` with `env` (JSON logs at info, any free HTTP port and a data directory of
 * its own unless `env` names them). When it listens, `whileListening(url)` may look at it before
 * it is stopped; what it returns is kept as `seen`.
 */
export async function startOutcome(
  args: string[],
  env: Record<string, string>,
  whileListening: (url: string) => Promise<string> = async () => '',
): Promise<StartOutcome> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-start-outcome-'));
  const run = spawnRelay(args, { RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json', PORT: '0', ...env });
  try {
    const listeningUrl = () => /"url":"(http:\/\/[^"]+)"[^\n]*"msg":"listening"/.exec(run.output())?.[1];
    await waitUntil(() => run.child.exitCode !== null || run.child.signalCode !== null || listeningUrl() !== undefined,
      `relay ${args.join(' ')} exits or listens`, 60_000);
    const url = listeningUrl();
    if (url === undefined) {
      const { code } = await run.exited;
      return { outcome: 'exited', code, output: run.output() };
    }
    const seen = await whileListening(url);
    await run.stop();
    return { outcome: 'listening', url, output: run.output(), seen };
  } finally {
    await run.kill();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** For an assertion's message: how the start ended. */
export function describeOutcome(result: StartOutcome): string {
  return result.outcome === 'exited'
    ? `exited ${result.code}:\n${result.output}`
    : `started and listened on ${result.url}${result.seen ? ` (${result.seen})` : ''}:\n${result.output.split('\n').slice(0, 6).join('\n')}`;
}
