// Who a report is about: the recipient its return path names. A return path is only good when
// its MAC verifies (domain/delivery/verp.ts) and it names a recipient of an email Relay
// accepted; anything else is refused at RCPT, before a byte of the report is read.
//
// What a RCPT needs of an email is fixed at its admission (its workspace, how many recipients,
// the To and CC addresses), so a RCPT reads that one event, however long the email's history,
// and what it read is kept for the emails looked up last (ReportTargets), so a return path
// named again is not read again. The admission also carries the sealed body (up to 10 MB):
// a RCPT never opens it. A BCC recipient's address is only in there; it is opened once per
// report, when the report has arrived (withBccAddresses).
import { parseVerpAddress, VERP_MAC_PURPOSE } from '../../../domain/delivery/verp.ts';
import type { EmailContent } from '../../../domain/email/events.ts';
import type { EmailState } from '../../../domain/email/state.ts';
import { parseMailbox } from '../../../domain/mailbox.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import type { EventStore } from '../../../infra/ports/event-store.ts';
import type { SecretBox } from '../../../infra/secrets/secret-box.ts';
import { openContent } from '../content-vault.ts';
import { loadEmail } from '../email-stream.ts';

export interface ReportTarget {
  emailId: string;
  recipientIndex: number;
  /**
   * The recipient's normalized address: To/CC from the event; a BCC recipient's is null until
   * withBccAddresses takes it from the sealed content, and stays null once that is gone (seven days).
   */
  address: string | null;
  /** A BCC recipient (its index past To and CC): nothing recorded about it may hold its address (ingest-report.ts). */
  bcc: boolean;
  workspaceId: string;
}

export type TargetLookup = { ok: true; target: ReportTarget } | { ok: false; reason: 'not_a_return_path' | 'unknown_email' | 'unknown_recipient' };

/** A lookup, and whether it read the event store to answer (what it tells of the store's health). */
export type FoundTarget = TargetLookup & { read: boolean };

export interface TargetDeps {
  events: EventStore;
  documents: DocumentStore;
  secrets: SecretBox;
  now: () => Date;
}

/** What a RCPT needs of an accepted email: none of it ever changes. */
interface AcceptedEmail {
  workspaceId: string;
  recipients: number;
  visibleAddresses: string[];
}

/** Emails whose lookups are kept: up to 50 visible addresses each, so about 25 KB at most each, 25 MB in all. */
const KEPT_EMAILS = 1_000;

/** Return paths resolved to their recipients, with the emails looked up last kept (least recently used goes first). */
export class ReportTargets {
  readonly #deps: TargetDeps;
  readonly #capacity: number;
  readonly #kept = new Map<string, AcceptedEmail>();

  constructor(deps: TargetDeps, capacity = KEPT_EMAILS) {
    this.#deps = deps;
    this.#capacity = capacity;
  }

  async find(rcptTo: string): Promise<FoundTarget> {
    const verp = parseVerpAddress(rcptTo, (data, mac) => this.#deps.secrets.macVerify(VERP_MAC_PURPOSE, data, mac));
    if ('error' in verp) return { ok: false, reason: 'not_a_return_path', read: false };
    const kept = this.#kept.get(verp.emailId);
    const email = kept ?? await this.#read(verp.emailId);
    const read = kept === undefined;
    // Only an accepted email went out with return paths.
    if (!email) return { ok: false, reason: 'unknown_email', read };
    this.#kept.delete(verp.emailId);
    this.#kept.set(verp.emailId, email);
    if (this.#kept.size > this.#capacity) this.#kept.delete(this.#kept.keys().next().value!);
    if (verp.recipientIndex >= email.recipients) return { ok: false, reason: 'unknown_recipient', read };
    return {
      ok: true,
      read,
      target: {
        emailId: verp.emailId,
        recipientIndex: verp.recipientIndex,
        address: email.visibleAddresses[verp.recipientIndex] ?? null,
        bcc: verp.recipientIndex >= email.visibleAddresses.length,
        workspaceId: email.workspaceId,
      },
    };
  }

  /** The email's admission, when it was accepted (only then did return paths of it go out). */
  async #read(emailId: string): Promise<AcceptedEmail | null> {
    const { state } = await loadEmail(this.#deps.events, emailId, { upTo: 0 });
    if (state.admission?.status !== 'queued' || !state.message) return null;
    return { workspaceId: state.message.workspaceId, recipients: state.delivery.recipients.length, visibleAddresses: state.visibleAddresses };
  }
}

/** BCC recipient `index`'s normalized address in the opened content, if it is there. */
function bccAddress(state: EmailState, content: EmailContent | null, index: number): string | null {
  const bcc = content?.bcc[index - state.visibleAddresses.length];
  if (bcc === undefined) return null;
  const parsed = parseMailbox(bcc);
  return parsed.ok ? parsed.value.normalized : null;
}

/** The address of recipient `index` of an admitted email: To and CC from its event, BCC from its sealed content. */
export async function recipientAddress(deps: Pick<TargetDeps, 'documents' | 'secrets' | 'now'>, state: EmailState, index: number): Promise<string | null> {
  const visible = state.visibleAddresses[index];
  if (visible !== undefined) return visible;
  if (!state.message) return null;
  return bccAddress(state, await openContent(deps.documents, deps.secrets, state.message.content, deps.now()), index);
}

/** The targets with their BCC recipients' addresses, each email's content opened once. */
export async function withBccAddresses(deps: TargetDeps, targets: ReportTarget[]): Promise<ReportTarget[]> {
  const addresses = new Map<string, (index: number) => string | null>();
  for (const emailId of new Set(targets.filter((t) => t.address === null).map((t) => t.emailId))) {
    const { state } = await loadEmail(deps.events, emailId, { upTo: 0 });
    const content = state.message ? await openContent(deps.documents, deps.secrets, state.message.content, deps.now()) : null;
    addresses.set(emailId, (index) => bccAddress(state, content, index));
  }
  return targets.map((t) => (t.address === null ? { ...t, address: addresses.get(t.emailId)?.(t.recipientIndex) ?? null } : t));
}
