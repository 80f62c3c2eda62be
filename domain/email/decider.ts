// Every command on an email's stream, and which decider rules it.
import { decideAdmission, type AdmitEmail } from './admission.ts';
import { decideDelivery, type DeliveryCommand } from './delivery.ts';
import type { EmailEvent } from './events.ts';
import type { EmailState } from './state.ts';

export type EmailCommand = AdmitEmail | DeliveryCommand;

export function decideEmail(command: EmailCommand, state: EmailState): EmailEvent[] {
  return command.type === 'AdmitEmail' ? decideAdmission(command, state) : decideDelivery(command, state);
}
