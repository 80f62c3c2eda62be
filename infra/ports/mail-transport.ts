// The mail transport port: puts one finished message (the exact, DKIM-signed bytes) on its way
// to a set of recipients and says, per recipient, what happened. Three adapters implement it
// (infra/mail/): `outbox` writes .eml files, `smtp` relays through a smarthost, `mx` is the MTA.
//
// A transport never retries and never sleeps: a temporary failure is reported as `deferred`
// and the sender processor schedules the retry durably. It never throws for a delivery
// outcome either; a throw means a programming or configuration error.
import type { Liveness } from '../liveness.ts';

export interface OutgoingMessage {
  emailId: string;
  /**
   * SMTP envelope. `mailFrom` is the VERP return path of this transaction. One call may carry
   * several recipients; the sender passes one per call when the return path is per recipient.
   */
  envelope: { mailFrom: string; recipients: string[] };
  /** The RFC 5322 message exactly as it goes on the wire (CRLF line ends, DKIM-Signature first). */
  raw: Buffer;
  /** The Message-ID header's value without angle brackets. */
  messageId: string;
}

/**
 * What one recipient's transaction came to:
 * - `accepted`: a relay (smarthost) or the outbox took it; the final outcome comes later, if ever;
 * - `delivered`: the recipient's own MX answered 250 (mx transport);
 * - `rejected`: a permanent (5xx) refusal, at RCPT or for the whole message;
 * - `deferred`: a temporary failure (4xx, no connection, timeout): retry later;
 * - `unknown`: the connection broke after DATA was sent and before the reply: it may have been
 *   accepted, so it must never be sent again automatically.
 */
export type RecipientResult = 'accepted' | 'delivered' | 'rejected' | 'deferred' | 'unknown';

export interface RecipientOutcome {
  address: string;
  result: RecipientResult;
  /** The SMTP reply code, when there was a reply. */
  smtpCode: number | null;
  /** The enhanced status code of the reply (RFC 3463, e.g. "5.1.1"), when given. */
  enhancedCode: string | null;
  /** The server's reply text or the local error, for the timeline; never holds message content. */
  response: string;
  /** Which stage failed, for `rejected` / `deferred`: connection, tls, mail_from, rcpt_to, data, dns, not_begun. */
  stage?: string;
  /**
   * When `response` joins the answers of several hosts (mx: those passed over before the one
   * that answered), the reply the codes and stage are of, alone: what a site's shaping judges,
   * as another host's words are not this host's.
   */
  reply?: string;
}

export interface TransportOutcome {
  /**
   * The provider's id for the accepted message: the smarthost's queue id when its 250 reply names
   * one (smtp), otherwise the Message-ID. Null when nothing was accepted.
   */
  providerMessageId: string | null;
  recipients: RecipientOutcome[];
}

export interface SendOptions {
  /**
   * Called before each transaction of the send, once the transport is ready for it (holds a
   * connection that answered; the outbox: before the file is written) and right before the
   * first command that could deliver the message (MAIL FROM). The sender appends the
   * transaction's start there (domain/email/delivery.ts), so a crash before it leaves a claim
   * another sender can take over. False: the transaction does not happen, its recipients are
   * `deferred` at stage `not_begun` (notBegunOutcome) and the connection stays usable. A
   * rejection ends the send with that rejection, nothing sent.
   */
  beginTransaction?: () => Promise<boolean>;
  /**
   * How long after a beginTransaction the caller still waits for the transaction's outcome: past
   * it the decider takes its recipients for unknown (the claim grace, domain/email/delivery.ts).
   * A transport that carries one begun transaction on at another host (mx, after a host that took
   * nothing of the message) starts it there only while what is left of this covers the
   * transaction at its every deadline. Unset: no bound.
   */
  transactionGraceMs?: number;
  /**
   * The recipient domain's TLS policy (MTA-STS, DANE) decides nothing: TLS is opportunistic,
   * as without a policy. For TLS reports sent by mail (RFC 8460 5.3.1: "Sending MTAs MUST NOT
   * honor MTA-STS or DANE TLSA failures"), whose failures are often the very ones being
   * reported. A transport that applies no such policy (smtp, outbox) has nothing to ignore.
   */
  ignoreTlsPolicy?: boolean;
}

/** The outcome of a recipient whose transaction the caller declined to begin. */
export const notBegunOutcome = (address: string): RecipientOutcome => ({
  address, result: 'deferred', smtpCode: null, enhancedCode: null, response: 'not sent: the transaction was not begun', stage: 'not_begun',
});

/**
 * A transaction begun whose sender stopped before recording what it came to (the claim's grace
 * ended), as recovery asks its transport about it (MailTransport.settle).
 */
export interface OpenTransaction {
  emailId: string;
  /** The Message-ID the message carries, without angle brackets (what a send reports when the provider names no id of its own). */
  messageId: string;
  /** The recipients of the transactions that began, each as the sender put it in the envelope. */
  recipients: string[];
}

/**
 * What a transport knows became of one recipient of an open transaction:
 * - `accepted`: it took the message, as a send would have answered `accepted` (with the same
 *   `providerMessageId` and `response`);
 * - `not_sent`: nothing of it went out, nor can it any more: sending it again gives the
 *   recipient one copy.
 */
export interface SettledRecipient {
  address: string;
  result: 'accepted' | 'not_sent';
  providerMessageId: string | null;
  /** For the timeline, as a send's response; never holds message content or a server path. */
  response: string;
}

export interface MailTransport {
  /** `outbox`, `smtp` or `mx`. */
  readonly name: string;
  /**
   * Which transport of its name this one is, for a transport whose knowledge is its own (the
   * outbox: the id of its directory, the same for every process writing there, another for
   * another directory). Known once warm() has settled (read once, no I/O per send); unset
   * before, when it could not be read, and for a transport without one (smtp, mx). A claim
   * records it (DeliveryClaimed.transportInstance), and only a transport of the claim's name and
   * instance is asked to settle its transactions: another outbox does not hold them.
   */
  readonly instance?: string;
  /**
   * Transactions it runs at once, when it has such a bound (the smarthost's pooled
   * connections): the sender claims about twice as many, so no claim waits long for the wire.
   */
  readonly capacity?: number;
  send(message: OutgoingMessage, options?: SendOptions): Promise<TransportOutcome>;
  /**
   * Gets ready for the first send (the outbox starts its thread), so that a sender's first
   * claim does not wait for it: a claim older than its grace period is taken for a dead sender's.
   */
  warm?(): Promise<void>;
  /**
   * After a crash: what became of an open transaction, per recipient, for a transport that can
   * know it exactly (the outbox, which is its own provider). A recipient left out of the answer
   * is one it cannot tell about: its fate stays unknown (delivery_unknown), as for every
   * recipient of a transport without this (smtp, mx: the server may have taken the message
   * while the answer was lost). Asked only about transactions this transport began (the
   * claim's: made with its name and its `instance`), once their sender is taken for dead;
   * rejects when it could not look (an I/O error): the recovery is tried again later.
   */
  settle?(transaction: OpenTransaction): Promise<SettledRecipient[]>;
  /** A transport with a thread of its own (the outbox) reports the thread's liveness. */
  readonly liveness?: Liveness;
  close(): Promise<void>;
}
