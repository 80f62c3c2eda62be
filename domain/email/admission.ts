// The admission decider: turns an AdmitEmail command into EmailAccepted or EmailSuppressed,
// into nothing when the same request was already admitted (idempotent replay), or into a
// refusal; an admission is only ever the first event of its stream. The facts a rule needs
// from elsewhere (the sender's and recipients' domains, the suppression list) come with the
// command, so every rule of admission is decided here.
import { RelayError } from '../errors.ts';
import type { AdmittedMessage, EmailEvent, SuppressedRecipient } from './events.ts';
import type { EmailState } from './state.ts';

/** What the workspace's records say about one domain name, for this project. */
export interface DomainFacts {
  name: string;
  verified: boolean;
  /** Connected to the sending key's project. */
  connected: boolean;
}

export interface AdmitEmail {
  type: 'AdmitEmail';
  message: AdmittedMessage;
  /** The domain of the From address. */
  senderDomain: DomainFacts;
  /** Development keys: the domain of every To, CC and BCC recipient. Production keys: none needed. */
  recipientDomains: DomainFacts[];
  /** Recipients found on the workspace's suppression list at admission. */
  suppressedRecipients: SuppressedRecipient[];
}

export interface AdmissionResult {
  id: string;
  status: 'queued' | 'suppressed';
  testMode: boolean;
  reason: string | null;
}

/** How long a client is told to wait before it retries a request whose email this version cannot read. */
export const UNREADABLE_ADMISSION_RETRY_AFTER_SECONDS = 60;

/**
 * For an email already admitted: its original result when the request is the same (a replay),
 * an idempotency conflict when it is not. Null when nothing was admitted yet: an empty stream.
 * A stream with events and no admission this version can read was admitted by a version it
 * cannot read (a newer one, before a rollback: ./upcast.ts never guesses), so this version can
 * neither answer the replay nor tell a conflict, and an admission appended after it would be a
 * second email under one key: 503, to be retried with the same key once that version runs again.
 */
export function replayOf(state: EmailState, fingerprint: string): AdmissionResult | null {
  if (!state.admission) {
    if (state.revision < 0) return null;
    throw new RelayError(
      'service_unavailable',
      'the email of this Idempotency-Key was stored by a version of Relay that this one cannot read: retry with the same key later',
      { retryAfterSeconds: UNREADABLE_ADMISSION_RETRY_AFTER_SECONDS },
    );
  }
  if (state.fingerprint === fingerprint) return state.admission;
  throw new RelayError('idempotency_conflict', 'Idempotency-Key was already used with a different request body');
}

const usable = (domain: DomainFacts) => domain.verified && domain.connected;

/** 422 for a sender outside the project's verified domains, saying which case it is. */
function senderRefusal(domain: DomainFacts): RelayError {
  if (domain.verified) return new RelayError('sender_not_allowed', `the sender domain ${domain.name} is verified but not connected to this project`);
  return new RelayError('domain_not_verified', `the sender domain ${domain.name} is not a verified domain of this project (subdomains need their own verification)`);
}

export function decideAdmission(command: AdmitEmail, state: EmailState): EmailEvent[] {
  // Also what keeps an admission off a stream that has events already (replayOf refuses those without one).
  if (replayOf(state, command.message.fingerprint)) return [];
  if (!usable(command.senderDomain)) throw senderRefusal(command.senderDomain);
  if (command.message.testMode) {
    const outside = command.recipientDomains.find((d) => !usable(d));
    if (outside) {
      throw new RelayError(
        'test_recipient_not_allowed',
        `development keys send only to verified domains connected to the project; ${outside.name} is not one, so nothing was sent`,
      );
    }
  }
  if (command.suppressedRecipients.length > 0) {
    const first = command.suppressedRecipients[0];
    return [{
      type: 'EmailSuppressed',
      data: {
        ...command.message,
        suppressedRecipients: command.suppressedRecipients,
        reason: `${first.address} is suppressed (${first.reason})`,
      },
    }];
  }
  return [{ type: 'EmailAccepted', data: command.message }];
}
