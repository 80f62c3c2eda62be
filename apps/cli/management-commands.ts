// Operator commands over the management model (filled in by the management work).
import type { CommandEntry } from './main.ts';

export const managementCommands: Record<string, CommandEntry> = {};
