// `relay start`: everything in one process, on the stores the configuration names
// (the embedded sqlite files by default).
import { loadConfig } from '../../infra/config.ts';
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
  const { ALL_PARTS, startRelay, stopOnSignals } = await import('../relay.ts');
  const relay = await startRelay(config, ALL_PARTS);
  stopOnSignals(relay);
  await new Promise(() => {}); // runs until a signal stops it
  return 0;
}
