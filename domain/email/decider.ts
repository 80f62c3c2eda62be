// The email aggregate: every command on an email's stream (`email-<id>`), which rule decides
// it, and how its events are read (upcast) and folded into EmailState.
import { unhandled, type Decider, type StreamReader } from '../decider.ts';
import { decideAdmission, type AdmitEmail } from './admission.ts';
import { decideDelivery, type DeliveryCommand, type DeliveryPolicy } from './delivery.ts';
import type { EmailEvent, RecordedEmailEvent } from './events.ts';
import { decideReport, type RecordReport } from './feedback.ts';
import { foldEmail, initialEmailState, type EmailState } from './state.ts';
import { EMAIL_SCHEMA_VERSIONS, upcastEmailEvent } from './upcast.ts';

export type EmailCommand = AdmitEmail | DeliveryCommand | RecordReport;

/** What decisions depend on besides the stream: the times of delivery (apps/runtime.ts chooses them). */
export interface EmailPolicies {
  delivery: DeliveryPolicy;
}

export function decideEmail(command: EmailCommand, state: EmailState, policies: EmailPolicies): EmailEvent[] {
  switch (command.type) {
    case 'AdmitEmail': return decideAdmission(command, state);
    case 'ClaimDelivery':
    case 'StartTransaction':
    case 'RecordAttempt':
    case 'FailDelivery': return decideDelivery(command, state, policies.delivery);
    case 'RecordReport': return decideReport(command, state);
    default: return unhandled(command, 'email command');
  }
}

/** How an email's stream is read: what loading an email needs, without deciding anything. */
export const emailReader: StreamReader<EmailState, EmailEvent | RecordedEmailEvent> = {
  fold: (events, state) => foldEmail(events, state),
  initialState: () => initialEmailState,
  upcast: upcastEmailEvent,
  schemaVersions: EMAIL_SCHEMA_VERSIONS,
};

export const emailDecider = (policies: EmailPolicies): Decider<EmailCommand, EmailState, EmailEvent | RecordedEmailEvent> => ({
  ...emailReader,
  decide: (command, state) => decideEmail(command, state, policies),
});
