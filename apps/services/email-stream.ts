// An email's stream (`email-<id>`) as the command handler and readers use it: every read goes
// through the domain's upcaster, every command through the email decider.
import { decideEmail, type EmailCommand } from '../../domain/email/decider.ts';
import { emailStreamId, type EmailEvent, type RecordedEmailEvent } from '../../domain/email/events.ts';
import { foldEmail, initialEmailState, type EmailState } from '../../domain/email/state.ts';
import { EMAIL_SCHEMA_VERSIONS, upcastEmailEvent } from '../../domain/email/upcast.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import type { Decider } from './command-handler.ts';

export const emailDecider: Decider<EmailCommand, EmailState, EmailEvent | RecordedEmailEvent> = {
  decide: decideEmail,
  fold: (events, state) => foldEmail(events, state),
  initialState: () => initialEmailState,
  upcast: upcastEmailEvent,
  schemaVersions: EMAIL_SCHEMA_VERSIONS,
};

export async function readEmailStream(events: EventStore, emailId: string): Promise<RecordedEmailEvent[]> {
  return (await events.readStream(emailStreamId(emailId))).map(upcastEmailEvent);
}
