// Every command on an email's stream, and which decider rules it.
import { decideAdmission, type AdmitEmail } from './admission.ts';
import { decideDelivery, type DeliveryCommand } from './delivery.ts';
import type { EmailEvent } from './events.ts';
import { decideReport, type RecordReport } from './feedback.ts';
import type { EmailState } from './state.ts';

export type EmailCommand = AdmitEmail | DeliveryCommand | RecordReport;

export function decideEmail(command: EmailCommand, state: EmailState): EmailEvent[] {
  switch (command.type) {
    case 'AdmitEmail': return decideAdmission(command, state);
    case 'RecordReport': return decideReport(command, state);
    default: return decideDelivery(command, state);
  }
}
