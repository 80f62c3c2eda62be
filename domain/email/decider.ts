// The email aggregate: every command on an email's stream (`email-<id>`), which rule decides
// it, and how its events are read (upcast) and folded into EmailState.
import { unhandled, type Decider } from '../decider.ts';
import { decideAdmission, type AdmitEmail } from './admission.ts';
import { decideDelivery, type DeliveryCommand } from './delivery.ts';
import type { EmailEvent, RecordedEmailEvent } from './events.ts';
import { decideReport, type RecordReport } from './feedback.ts';
import { foldEmail, initialEmailState, type EmailState } from './state.ts';
import { EMAIL_SCHEMA_VERSIONS, upcastEmailEvent } from './upcast.ts';

export type EmailCommand = AdmitEmail | DeliveryCommand | RecordReport;

export function decideEmail(command: EmailCommand, state: EmailState): EmailEvent[] {
  switch (command.type) {
    case 'AdmitEmail': return decideAdmission(command, state);
    case 'ClaimDelivery':
    case 'RecordAttempt':
    case 'FailDelivery': return decideDelivery(command, state);
    case 'RecordReport': return decideReport(command, state);
    default: return unhandled(command, 'email command');
  }
}

export const emailDecider: Decider<EmailCommand, EmailState, EmailEvent | RecordedEmailEvent> = {
  decide: decideEmail,
  fold: (events, state) => foldEmail(events, state),
  initialState: () => initialEmailState,
  upcast: upcastEmailEvent,
  schemaVersions: EMAIL_SCHEMA_VERSIONS,
};
