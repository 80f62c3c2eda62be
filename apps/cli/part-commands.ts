// `relay api`, `relay forwarder`, `relay processor <name>`: one part of Relay per process,
// as ops run them in distributed mode (each processor is its own consumer group).
import { loadConfig } from '../../infra/config.ts';
import type { Part } from '../relay.ts';

async function runParts(parts: Part[]): Promise<number> {
  const config = loadConfig();
  // Loaded once the configuration is known good (see start-command.ts).
  const { startRelay, stopOnSignals } = await import('../relay.ts');
  const relay = await startRelay(config, parts);
  stopOnSignals(relay);
  await new Promise(() => {}); // runs until a signal stops it
  return 0;
}

export const api = async (args: string[]) => (args.length ? usage('relay api') : runParts(['api']));
export const forwarder = async (args: string[]) => (args.length ? usage('relay forwarder') : runParts(['forwarder']));
export const retention = async (args: string[]) => (args.length ? usage('relay retention') : runParts(['retention']));
export const inbound = async (args: string[]) => (args.length ? usage('relay inbound') : runParts(['inbound']));

export async function processor(args: string[]): Promise<number> {
  const [name, ...rest] = args;
  const { PROCESSORS, processorNamed } = await import('../processors/registry.ts');
  const definition = name === undefined ? undefined : processorNamed(name);
  if (!definition || rest.length) {
    const width = Math.max(...PROCESSORS.map((p) => p.name.length));
    const list = PROCESSORS.map((p) => `  ${p.name.padEnd(width)}  ${p.summary}`).join('\n');
    if (name === '--help' || name === '-h') {
      console.log(`usage: relay processor <name>   runs one processor as its own consumer group\n\n${list}`);
      return 0;
    }
    return usage(`relay processor <${PROCESSORS.map((p) => p.name).join('|')}>\n\n${list}\n`);
  }
  return runParts([definition.name]);
}

function usage(text: string): number {
  console.error(`usage: ${text}   (configuration comes from environment variables; see README)`);
  return 2;
}
