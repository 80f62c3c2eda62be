// `relay start`: everything in one process, on the stores the configuration names
// (the embedded sqlite files by default).
import { loadConfig } from '../../infra/config.ts';
import type { RunningRelay } from '../relay.ts';
import { asksForHelp } from './command.ts';

const USAGE = 'usage: relay start   (configuration comes from environment variables; see README)';

export async function start(args: string[]): Promise<number> {
  if (asksForHelp(args)) {
    console.log(USAGE);
    return 0;
  }
  if (args.length > 0) {
    console.error(USAGE);
    return 2;
  }
  const config = loadConfig();
  // Loaded once the configuration is known good: a bad variable is reported without waiting
  // for the whole service's code to load.
  const { ALL_PARTS, startRelay } = await import('../relay.ts');
  const { stopAndExit, stopOnSignals } = await import('../process-lifecycle.ts');
  let relay: RunningRelay | null = null;
  const starting = startRelay(config, ALL_PARTS, {
    // The API on this thread, the pipeline on one of its own (RELAY_PIPELINE_THREAD=off: all on this one).
    pipelineThread: config.pipelineThread,
    // Admitting mail that nothing would deliver helps nobody: exit, for a supervisor to restart.
    onPipelineExit: (error) => {
      console.error(`relay: the pipeline thread ended (${error.message}); exiting`);
      if (relay) void stopAndExit(relay, config.shutdownTimeoutMs, 1);
      else process.exit(1);
    },
  });
  stopOnSignals(starting, config.shutdownTimeoutMs);
  relay = await starting;
  await new Promise(() => {}); // runs until a signal stops it
  return 0;
}
