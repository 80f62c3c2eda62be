// Hard bounces and complaints block the recipient across the workspace (spec). The entry has
// the same shape and id as a manual block, so an owner or admin removes it the same way, even
// while the block is being recorded: its event is appended and the entry settled as for a
// manual addition (apps/services/management/suppressions.ts, top), so a removal that overlaps
// ends with the history's last word RecipientUnsuppressed, as the list has it.
//
// A BCC recipient is blocked like any other, but neither its entry nor its event names the email
// (no emailId, a cause of kind bcc_recipient_event, an origin of its own rather than the email
// event's): every member reads the list, and the list outlives the email's BCC.
//
// The suppressor's input may come again (at-least-once). An event it is done with for an address
// is not acted on again, even once an owner removed the entry (../management/suppression-sources.ts).
// Otherwise an entry already there is not written again; when it is this very event's, the first
// handling may have stopped anywhere between writing it and marking the event handled, so its
// addition is recorded again: the block's event id is derived from the report's event and the
// address (blockEventId), so an event the first handling appended is not appended twice, and one
// it never got to is appended now.
import { createHash, randomUUID } from 'node:crypto';
import { emailIdOfStream, occurredAtOf, type RecordedEmailEvent } from '../../../domain/email/events.ts';
import { suppressionIdOf, type SuppressionEntry } from '../../../domain/management.ts';
import { DuplicateKeyError, type DocumentStore } from '../../../infra/ports/document-store.ts';
import type { EventStore } from '../../../infra/ports/event-store.ts';
import type { SecretBox } from '../../../infra/secrets/secret-box.ts';
import { durableSoFar } from '../../../infra/ports/durability.ts';
import { loadEmail } from '../email-stream.ts';
import { markHandled, wasHandled } from '../management/suppression-sources.ts';
import { recordAddition, suppressionsOf } from '../management/suppressions.ts';
import type { RecipientSuppressed, SuppressionCause } from '../../../domain/suppressions/events.ts';
import { originOfEvent, type CommandOrigin } from '../../../domain/events/metadata.ts';
import { recipientAddress } from './report-targets.ts';

type Reason = Extract<SuppressionEntry['reason'], 'hard_bounce' | 'complaint'>;

/** The origin of a BCC recipient's block: its own, naming neither the email's event nor the request that sent it. */
function unlinkedOrigin(): CommandOrigin {
  const id = randomUUID();
  return { correlationId: id, causationId: id };
}

/** The id of the RecipientSuppressed that `eventId` causes for `address`: the same on every handling (a UUID, as event stores want). */
export function blockEventId(eventId: string, address: string): string {
  const bytes = createHash('sha256').update(`relay automatic suppression\n${eventId}\n${address}`).digest().subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x80; // version 8: name-based, by a hash of Relay's choosing (RFC 9562 5.8)
  bytes[8] = (bytes[8] & 0x3f) | 0x80; // the RFC's variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The recipients (by index) an event says must be blocked, and why. */
export function blocksIn(event: RecordedEmailEvent): Array<{ index: number; reason: Reason }> {
  if (event.type === 'RecipientReported') {
    if (event.data.outcome === 'hard_bounced') return [{ index: event.data.recipientIndex, reason: 'hard_bounce' }];
    if (event.data.outcome === 'complained') return [{ index: event.data.recipientIndex, reason: 'complaint' }];
    return [];
  }
  if (event.type === 'DeliveryAttempted') {
    return event.data.recipients.filter((r) => r.status === 'hard_bounced').map((r) => ({ index: r.index, reason: 'hard_bounce' as const }));
  }
  return [];
}

/**
 * Adds the blocks an event calls for. Only ever an address that was that recipient of that
 * email: To and CC from the admitted event, BCC from its sealed content (a BCC recipient
 * whose content is gone cannot be named, so it is not blocked).
 */
export async function applyAutomaticSuppression(deps: { events: EventStore; documents: DocumentStore; secrets: SecretBox; now: () => Date }, event: RecordedEmailEvent): Promise<number> {
  const blocks = blocksIn(event);
  if (blocks.length === 0) return 0;
  const emailId = emailIdOfStream(event.streamId);
  const { state } = await loadEmail(deps.events, emailId);
  if (state.admission?.status !== 'queued' || !state.message) return 0;
  const workspaceId = state.message.workspaceId;
  const entries = suppressionsOf(deps.documents);
  let added = 0;
  for (const block of blocks) {
    const address = await recipientAddress(deps, state, block.index);
    if (!address) continue;
    const source = { workspaceId, eventId: event.id, address };
    if (await wasHandled(deps.documents, source)) continue;
    const createdAt = new Date(Date.parse(occurredAtOf(event) ?? '') || deps.now().getTime()).toISOString();
    const bcc = state.visibleAddresses[block.index] === undefined;
    const by: SuppressionCause = bcc
      ? { kind: 'bcc_recipient_event' }
      : { kind: 'email_event', emailId, eventId: event.id, reportId: event.type === 'RecipientReported' ? event.data.reportId : null };
    const origin = bcc ? unlinkedOrigin() : originOfEvent(event);
    const change: RecipientSuppressed = { type: 'RecipientSuppressed', data: { workspaceId, address, reason: block.reason, occurredAt: createdAt, by } };
    try {
      // lastEventId stays on the entry whoever the recipient was: it is never read out, and a
      // removal needs it (../management/suppressions.ts).
      await entries.insert({ _id: suppressionIdOf(workspaceId, address), workspaceId, address, reason: block.reason, emailId: bcc ? null : emailId, createdAt, lastEventId: event.id });
    } catch (error) {
      // Blocked already (manually, or by an earlier report): one entry per address is enough.
      if (!(error instanceof DuplicateKeyError)) throw error;
      if ((await entries.get(suppressionIdOf(workspaceId, address)))?.lastEventId === event.id) await recordAddition(deps, change, origin, deps.now, blockEventId(event.id, address));
      await markHandled(deps.documents, source, deps.now());
      continue;
    }
    // The entry first, then its event (apps/services/management/suppressions.ts says why): in the
    // consumer's deferred-durability round the entry is durable only once this returns.
    await durableSoFar();
    await recordAddition(deps, change, origin, deps.now, blockEventId(event.id, address));
    await markHandled(deps.documents, source, deps.now());
    added++;
  }
  return added;
}
