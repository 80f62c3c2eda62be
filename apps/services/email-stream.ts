// An email's stream (`email-<id>`) as services and processors use it: the email aggregate
// (domain/email/decider.ts) bound to an event store. Every read goes through the domain's
// upcaster and fold, every command through the email decider.
import { emailDecider, emailReader, type EmailCommand, type EmailPolicies } from '../../domain/email/decider.ts';
import { emailStreamId, type EmailEvent, type RecordedEmailEvent } from '../../domain/email/events.ts';
import type { EmailState } from '../../domain/email/state.ts';
import { upcastEmailEvent } from '../../domain/email/upcast.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import { bindStreams, loadStream, type LoadOptions, type Loaded, type StreamHandler } from './command-handler.ts';

export type Emails = StreamHandler<EmailCommand, EmailState, EmailEvent | RecordedEmailEvent>;

/**
 * How often a command is decided again after another writer got in first. Every email command
 * gives the right answer when decided again on the newer state (a replay or conflict for an
 * admission, nothing for a claim someone else took, a report already recorded), and a popular
 * stream (reports arriving together) may need a few rounds.
 */
const EMAIL_COMMAND_ATTEMPTS = 5;

/**
 * The email streams of `store`, deciding with `policies`: `emails.handle(emailId, command,
 * options)`, `emails.load(emailId)`. Made once per process, at composition (apps/runtime.ts).
 */
export const emailsOf = (store: EventStore, policies: EmailPolicies): Emails =>
  bindStreams(store, emailDecider(policies), emailStreamId, { attempts: EMAIL_COMMAND_ATTEMPTS });

/** The email folded from its stream (up to `upTo`, when given); revision -1 and no admission when there is none. */
export const loadEmail = (store: EventStore, emailId: string, options?: LoadOptions<EmailState>): Promise<Loaded<EmailState>> =>
  loadStream(store, emailStreamId(emailId), emailReader, options);

/** The stream's events as today's types (for tests and tools that look at the events themselves). */
export async function readEmailStream(events: EventStore, emailId: string): Promise<RecordedEmailEvent[]> {
  return (await events.readStream(emailStreamId(emailId))).map(upcastEmailEvent);
}
