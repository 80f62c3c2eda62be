// The shape of a `relay` subcommand and of its entry in the command table. Kept apart from the
// entry point (main.ts) so that command modules do not import the program that loads them.
export type Command = (args: string[]) => Promise<number>;

export interface CommandEntry { summary: string; run: () => Promise<Command> }
