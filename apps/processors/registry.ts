// Every processor Relay runs. `relay start` runs them all in-process, `relay processor <name>`
// runs one as its own consumer group; /readyz and `relay processor --help` read this list.
import { DELIVERABILITY_PROJECTION, EMAILS_PROJECTION } from '../services/projection-registry.ts';
import { projectionProcessor } from './projection-processors.ts';
import { sender } from './sender.ts';
import { suppressor } from './suppressor.ts';
import { webhooks } from './webhooks.ts';

export const emailProjector = projectionProcessor(EMAILS_PROJECTION);

export const deliverabilityProjector = projectionProcessor(DELIVERABILITY_PROJECTION);

export const PROCESSORS = [emailProjector, deliverabilityProjector, sender, suppressor, webhooks] as const;

export type ProcessorName = (typeof PROCESSORS)[number]['name'];

export const processorNamed = (name: string) => PROCESSORS.find((p) => p.name === name);
