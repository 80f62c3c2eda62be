// Who a report is about: the recipient its return path names. A return path is only good when
// its MAC verifies (domain/delivery/verp.ts) and it names a recipient of an email Relay
// accepted; anything else is refused at RCPT, before a byte of the report is read.
//
// Everything a target needs is in the email's first event (the admission: its recipients and
// workspace never change), so a RCPT reads that one event, however long the email's history.
import { parseVerpAddress, VERP_MAC_PURPOSE } from '../../../domain/delivery/verp.ts';
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
   * The recipient's normalized address: To/CC from the event, BCC from the sealed content
   * while it is kept (seven days); null once a BCC recipient's address is gone.
   */
  address: string | null;
  workspaceId: string;
}

export type TargetLookup = { ok: true; target: ReportTarget } | { ok: false; reason: 'not_a_return_path' | 'unknown_email' | 'unknown_recipient' };

export interface TargetDeps {
  events: EventStore;
  documents: DocumentStore;
  secrets: SecretBox;
  now: () => Date;
}

/** The address of recipient `index` of an admitted email: To and CC from its event, BCC from its sealed content. */
export async function recipientAddress(deps: Pick<TargetDeps, 'documents' | 'now'>, state: EmailState, index: number): Promise<string | null> {
  const visible = state.visibleAddresses[index];
  if (visible !== undefined) return visible;
  if (!state.message) return null;
  const content = await openContent(deps.documents, state.message.content, deps.now());
  const bcc = content?.bcc[index - state.visibleAddresses.length];
  if (bcc === undefined) return null;
  const parsed = parseMailbox(bcc);
  return parsed.ok ? parsed.value.normalized : null;
}

export async function findReportTarget(deps: TargetDeps, rcptTo: string): Promise<TargetLookup> {
  const verp = parseVerpAddress(rcptTo, (data, mac) => deps.secrets.macVerify(VERP_MAC_PURPOSE, data, mac));
  if ('error' in verp) return { ok: false, reason: 'not_a_return_path' };
  const { state } = await loadEmail(deps.events, verp.emailId, { upTo: 0 });
  // Only an accepted email went out with return paths.
  if (state.admission?.status !== 'queued' || !state.message) return { ok: false, reason: 'unknown_email' };
  if (verp.recipientIndex >= state.delivery.recipients.length) return { ok: false, reason: 'unknown_recipient' };
  return {
    ok: true,
    target: {
      emailId: verp.emailId,
      recipientIndex: verp.recipientIndex,
      address: await recipientAddress(deps, state, verp.recipientIndex),
      workspaceId: state.message.workspaceId,
    },
  };
}
