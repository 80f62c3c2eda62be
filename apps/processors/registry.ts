// Every processor Relay runs. `relay start` runs them all in-process, `relay processor <name>`
// runs one as its own consumer group; /readyz and `relay processor --help` read this list.
import { emailProjector } from './email-projector.ts';
import { sender } from './sender.ts';
import { suppressor } from './suppressor.ts';
import { webhooks } from './webhooks.ts';

export const PROCESSORS = [emailProjector, sender, suppressor, webhooks] as const;

export type ProcessorName = (typeof PROCESSORS)[number]['name'];

export const processorNames = (): ProcessorName[] => PROCESSORS.map((p) => p.name);

export const processorNamed = (name: string) => PROCESSORS.find((p) => p.name === name);
