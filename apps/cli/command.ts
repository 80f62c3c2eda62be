// The shape of a `relay` subcommand and of its entry in the command table, and how commands
// read their arguments. Kept apart from the entry point (main.ts) so that command modules do
// not import the program that loads them.
import { parseArgs, type ParseArgsConfig } from 'node:util';

/** The exit code of a usage mistake. */
export const EXIT_USAGE = 2;

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

/**
 * Why `value`, given for `option` (a count such as `--limit`), is not a whole number from 1 (to
 * `max`) written as such, or null. 0x10, 1e3 and 2.0, which Number() would take, are refused.
 */
export function countProblem(option: string, value: string, max?: number): string | null {
  if (/^[1-9]\d{0,15}$/.test(value) && (max === undefined || Number(value) <= max)) return null;
  return `${option} must be a whole number from 1${max === undefined ? '' : ` to ${max}`}, got ${JSON.stringify(value)}`;
}

/** Arguments as parseArgs reads them (strictly), or null after printing what is wrong and the usage. */
export function parseOrExplain<T extends NonNullable<ParseArgsConfig['options']>>(args: string[], options: T, usage: string) {
  try {
    return parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (error) {
    console.error(`relay: ${(error as Error).message}\n\n${usage}`);
    return null;
  }
}
