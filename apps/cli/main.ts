#!/usr/bin/env node
// The `relay` command: runs the service or one of its parts, and the operator's tasks.
import { ConfigError } from '../../infra/config.ts';
import { managementCommands } from './management-commands.ts';

export type Command = (args: string[]) => Promise<number>;
export interface CommandEntry { summary: string; run: () => Promise<Command> }

const commands: Record<string, CommandEntry> = {
  ...managementCommands,
  start: { summary: 'run API, forwarder and all processors in one process (embedded default)', run: async () => (await import('./start-command.ts')).start },
  api: { summary: 'run only the HTTP API', run: async () => (await import('./part-commands.ts')).api },
  forwarder: { summary: 'run only the forwarder (event store → log)', run: async () => (await import('./part-commands.ts')).forwarder },
  retention: { summary: 'destroy message bodies past their seven-day retention, now and every 10 minutes', run: async () => (await import('./part-commands.ts')).retention },
  processor: { summary: 'processor <name>: run one processor as its own consumer group', run: async () => (await import('./part-commands.ts')).processor },
  projections: { summary: 'projections rebuild <name>: rebuild a read model from the event store and swap it in', run: async () => (await import('./projection-commands.ts')).projections },
  events: { summary: 'print events of a stream or of the global order as JSON lines', run: async () => (await import('./projection-commands.ts')).events },
};

function usage(): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  return ['usage: relay <command> [options]', '', ...Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`)].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(usage());
    return name ? 0 : 2;
  }
  const command = commands[name];
  if (!command) {
    console.error(`relay: unknown command "${name}"\n\n${usage()}`);
    return 2;
  }
  return (await command.run())(rest);
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(`relay: invalid configuration: ${error.message}`);
    process.exitCode = 78; // EX_CONFIG
  } else {
    console.error(`relay: ${(error as Error).stack ?? String(error)}`);
    process.exitCode = 1;
  }
}
