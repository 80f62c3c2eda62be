// The admission decider: turns an AdmitEmail command into EmailAccepted or EmailSuppressed,
// or into nothing when the same request was already admitted (idempotent replay).
import { RelayError } from '../errors.ts';
import type { AdmittedMessage, EmailEvent, SuppressedRecipient } from './events.ts';
import type { Status } from './status.ts';

export interface AdmitEmail {
  type: 'AdmitEmail';
  message: AdmittedMessage;
  /** Recipients found on the workspace's suppression list at admission. */
  suppressedRecipients: SuppressedRecipient[];
}

export interface AdmissionResult {
  id: string;
  status: 'queued' | 'suppressed';
  testMode: boolean;
  reason: string | null;
}

export interface EmailState {
  emailId: string | null;
  fingerprint: string | null;
  admission: AdmissionResult | null;
  status: Status | null;
  /** Revision of the last event applied; -1 before the first. */
  revision: number;
}

export const initialEmailState: EmailState = { emailId: null, fingerprint: null, admission: null, status: null, revision: -1 };

/**
 * For an email already admitted: its original result when the request is the same (a replay),
 * an idempotency conflict when it is not. Null when nothing was admitted yet.
 */
export function replayOf(state: EmailState, fingerprint: string): AdmissionResult | null {
  if (!state.admission) return null;
  if (state.fingerprint === fingerprint) return state.admission;
  throw new RelayError('idempotency_conflict', 'Idempotency-Key was already used with a different request body');
}

export function decideAdmission(command: AdmitEmail, state: EmailState): EmailEvent[] {
  if (replayOf(state, command.message.fingerprint)) return [];
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

export function evolveEmail(state: EmailState, event: EmailEvent): EmailState {
  switch (event.type) {
    case 'EmailAccepted':
      return {
        emailId: event.data.emailId,
        fingerprint: event.data.fingerprint,
        admission: { id: event.data.emailId, status: 'queued', testMode: event.data.testMode, reason: null },
        status: 'queued',
        revision: state.revision + 1,
      };
    case 'EmailSuppressed':
      return {
        emailId: event.data.emailId,
        fingerprint: event.data.fingerprint,
        admission: { id: event.data.emailId, status: 'suppressed', testMode: event.data.testMode, reason: event.data.reason },
        status: 'suppressed',
        revision: state.revision + 1,
      };
    default:
      // Events this version does not know yet still advance the revision.
      return { ...state, revision: state.revision + 1 };
  }
}

export const foldEmail = (events: EmailEvent[], state: EmailState = initialEmailState): EmailState => events.reduce(evolveEmail, state);
