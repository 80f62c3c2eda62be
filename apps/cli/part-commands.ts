// `relay api`, `relay forwarder`, `relay processor <name>`: one part of Relay per process,
// as ops run them in distributed mode (each processor is its own consumer group).
import { loadConfig } from '../../infra/config.ts';
import type { Part } from '../relay.ts';
import { asksForHelp } from './command.ts';

async function runParts(parts: Part[]): Promise<number> {
  const config = loadConfig();
  // Loaded once the configuration is known good (see start-command.ts).
  const { startRelay } = await import('../relay.ts');
  const { stopOnSignals } = await import('../process-lifecycle.ts');
  const starting = startRelay(config, parts);
  stopOnSignals(starting, config.shutdownTimeoutMs);
  await starting;
  await new Promise(() => {}); // runs until a signal stops it
  return 0;
}

/** A part that takes no arguments: `--help` prints its usage, anything else is a usage mistake. */
const partCommand = (part: Part) => async (args: string[]) =>
  asksForHelp(args) ? help(`relay ${part}`) : args.length ? usage(`relay ${part}`) : runParts([part]);

export const api = partCommand('api');
export const forwarder = partCommand('forwarder');
export const retention = partCommand('retention');
export const inbound = partCommand('inbound');

export async function processor(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  const { PROCESSORS, processorNamed } = await import('../processors/registry.ts');
  const definition = name === undefined ? undefined : processorNamed(name);
  if (!definition || rest.length || asksForHelp(args)) {
    const width = Math.max(...PROCESSORS.map((p) => p.name.length));
    const list = PROCESSORS.map((p) => `  ${p.name.padEnd(width)}  ${p.summary}`).join('\n');
    if (asksForHelp(args)) {
      console.log(`usage: relay processor <name>   runs one processor as its own consumer group\n\n${list}`);
      return 0;
    }
    return usage(`relay processor <${PROCESSORS.map((p) => p.name).join('|')}>\n\n${list}\n`);
  }
  return runParts([definition.name]);
}

const usageLine = (text: string) => `usage: ${text}   (configuration comes from environment variables; see README)`;

function help(text: string): number {
  console.log(usageLine(text));
  return 0;
}

function usage(text: string): number {
  console.error(usageLine(text));
  return 2;
}
