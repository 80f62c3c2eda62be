// The shape of a `relay` subcommand and of its entry in the command table. Kept apart from the
// entry point (main.ts) so that command modules do not import the program that loads them.
export type Command = (args: string[]) => Promise<number>;

export interface CommandEntry { summary: string; run: () => Promise<Command> }

/**
 * Whether the arguments ask for the command's usage: `--help` or `-h` anywhere before a `--`.
 * Every command checks this before parsing, so that asking for help is never a usage mistake
 * (strict parsing would otherwise refuse `--help` as an unknown option).
 */
export function asksForHelp(args: string[]): boolean {
  const end = args.indexOf('--');
  return (end < 0 ? args : args.slice(0, end)).some((arg) => arg === '--help' || arg === '-h');
}
