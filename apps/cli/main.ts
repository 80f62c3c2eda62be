#!/usr/bin/env node
// The `relay` command: runs the service or one of its parts, and the operator's tasks.
import { ConfigError, ListenError, StoreConnectError } from '../../infra/config.ts';
import type { CommandEntry } from './command.ts';
import { managementCommands } from './management-commands.ts';
import { isOutputClosed } from './output.ts';

const EXIT_USAGE = 2;
const EXIT_CONFIG = 78; // sysexits EX_CONFIG

const commands: Record<string, CommandEntry> = {
  ...managementCommands,
  start: { summary: 'run API, forwarder and all processors in one process (embedded default)', run: async () => (await import('./start-command.ts')).start },
  api: { summary: 'run only the HTTP API', run: async () => (await import('./part-commands.ts')).api },
  forwarder: { summary: 'run only the forwarder (event store → log)', run: async () => (await import('./part-commands.ts')).forwarder },
  retention: { summary: 'destroy message bodies past seven days and remove operational data past its period, now and every 10 minutes', run: async () => (await import('./part-commands.ts')).retention },
  inbound: { summary: 'run only the feedback SMTP server (bounces and complaints) on RELAY_INBOUND_SMTP_PORT', run: async () => (await import('./part-commands.ts')).inbound },
  processor: { summary: 'processor <name>: run one processor as its own consumer group', run: async () => (await import('./part-commands.ts')).processor },
  projections: { summary: 'projections rebuild <name> | run <module> | scratch | drop <collection>: rebuild a read model from the event store and swap it in; run a projection of your own; list and drop scratch collections', run: async () => (await import('./projection-commands.ts')).projections },
  outbox: { summary: 'outbox list | outbox show <emailId>: the messages the outbox transport wrote', run: async () => (await import('./outbox-commands.ts')).outbox },
  webhooks: { summary: 'webhooks list <projectId>: a project\'s webhook endpoints', run: async () => (await import('./webhook-commands.ts')).webhooks },
  events: { summary: 'events [export|schema]: print events of a stream or of the global order as JSON lines; export them (JSON lines or CSV); the event catalog', run: async () => (await import('./event-commands.ts')).events },
  sites: { summary: 'recipient sites (domains by MX host set): limits, adaptive rate, pauses after throttling', run: async () => (await import('./sites-command.ts')).sites },
  backup: { summary: 'backup <directory>: copy the embedded data directory (a snapshot, safe while Relay runs) into a new directory that restores by starting Relay on it', run: async () => (await import('./backup-command.ts')).backup },
  parked: { summary: 'parked list | parked retry <id> | parked dismiss <id>: events a processor could not apply and went past', run: async () => (await import('./parked-commands.ts')).parked },
  openapi: { summary: 'print the OpenAPI 3.1 document of the HTTP API (as GET /v1/openapi.json serves it)', run: async () => (await import('./openapi-command.ts')).openapi },
};

function usage(): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  return [
    'usage: relay <command> [options]', '',
    ...Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`), '',
    'relay <command> --help prints the usage of one command.',
  ].join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  // `relay help <command>` is `relay <command> --help`.
  if (name === 'help' && rest.length > 0) return main([...rest, '--help']);
  if (name === '--help' || name === '-h' || name === 'help') {
    console.log(usage());
    return 0;
  }
  if (!name) {
    console.error(usage());
    return EXIT_USAGE;
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) {
    console.error(`relay: unknown command "${name}"\n\n${usage()}`);
    return EXIT_USAGE;
  }
  return (await command.run())(rest);
}

interface SystemError extends Error { code?: string; syscall?: string; address?: string; port?: number }

/**
 * What an operator is told about a failure no command turned into its own message: one line
 * naming the variable when the environment is the cause; the stack only with
 * RELAY_LOG_LEVEL=debug or trace, since operators read this, not the code's authors.
 */
function describeFailure(error: unknown): { message: string; exitCode: number } {
  const e = (error instanceof Error ? error : new Error(String(error))) as SystemError;
  if (e instanceof ConfigError) return { message: `relay: invalid configuration: ${e.message}`, exitCode: EXIT_CONFIG };
  if (e instanceof ListenError || e instanceof StoreConnectError) return { message: `relay: ${e.message}`, exitCode: 1 };
  if (['debug', 'trace'].includes(process.env.RELAY_LOG_LEVEL?.trim() ?? '')) return { message: `relay: ${e.stack ?? e.message}`, exitCode: 1 };
  if (e.syscall === 'listen') {
    // "listen EADDRINUSE: address already in use 127.0.0.1:3000" → "address already in use"
    const reason = e.message.replace(/^listen \w+: /, '').replace(/ \S+:\d+$/, '');
    return { message: `relay: cannot listen on ${e.address ?? '?'}:${e.port ?? '?'}: ${reason} (${e.code}); choose another PORT or HOST`, exitCode: 1 };
  }
  return { message: `relay: ${e.message}\n(RELAY_LOG_LEVEL=debug shows where it failed)`, exitCode: 1 };
}

/**
 * The reader of stdout went away (`relay events | head -1`): a write fails with EPIPE. That is
 * the reader's choice, not a failure of the command, so Relay stops quietly, without a stack,
 * and exits 0 as when the output is complete (chosen over 141, the SIGPIPE death of `yes | head`,
 * so that `set -o pipefail` scripts that read only the first lines do not fail). Without this
 * listener the 'error' event is unhandled and Node prints a stack and exits 1.
 */
let outputClosed = false;
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (isOutputClosed(error)) {
    outputClosed = true;
    process.exitCode = 0;
    return;
  }
  console.error(`relay: cannot write to stdout: ${error.message}`);
  process.exitCode = 1;
});

try {
  const code = await main(process.argv.slice(2));
  if (!outputClosed) process.exitCode = code;
} catch (error) {
  // The writes of a command end with the output's error (apps/cli/output.ts lineWriter).
  if (isOutputClosed(error) && (outputClosed || process.stdout.destroyed)) {
    process.exitCode = 0;
  } else {
    const { message, exitCode } = describeFailure(error);
    console.error(message);
    process.exitCode = exitCode;
  }
}
