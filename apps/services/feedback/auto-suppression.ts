// Hard bounces and complaints block the recipient across the workspace (spec). The entry has
// the same shape and id as a manual block, so an owner or admin removes it the same way, even
// while the block is being recorded: its event is appended and the entry settled as for a
// manual addition (apps/services/management/suppressions.ts, top), so a removal that overlaps
// ends with the history's last word RecipientUnsuppressed, as the list has it.
//
// A BCC recipient is blocked like any other, but nothing of its block names or points to the
// email it was a BCC recipient of: every member reads the list, the list and its history
// outlive the email's BCC, and the history is exported. Its entry has no emailId, and its
// lastEventId is the block's own event id, not the email event's; its event has a cause of kind
// bcc_recipient_event, an origin of its own (not the email event's metadata), an id derived with
// a key (bccBlockEventId: the export cannot recompute it from the email event's id and the
// address, as it can blockEventId), and the time the block was made (the entry's createdAt too),
// not the email event's.
//
// The suppressor's input may come again (at-least-once). An event it is done with for an address
// is not acted on again, even once an owner removed the entry (../management/suppression-sources.ts,
// keyed for a BCC block by its event id, like its entry). Otherwise an entry already there is not
// written again; when it is this very event's, the first handling may have stopped anywhere
// between writing it and marking the event handled, so its addition is recorded again: the
// block's event id is derived from the report's event and the address, the same on every
// handling, so an event the first handling appended is not appended twice, and one it never got
// to is appended now. A BCC block's id is the same only under the same RELAY_SECRET_KEY: its
// event handled again after a rotation finds no record of being handled, and adds the address
// again if an owner removed it meanwhile (an entry still there is left as it is).
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
import type { CommandOrigin } from '../../../domain/events/metadata.ts';
import { recipientAddress } from './report-targets.ts';

type Reason = Extract<SuppressionEntry['reason'], 'hard_bounce' | 'complaint'>;

/** The origin of a BCC recipient's block: its own, naming neither the email's event nor the request that sent it. */
function unlinkedOrigin(): CommandOrigin {
  const id = randomUUID();
  return { correlationId: id, causationId: id };
}

/** Sixteen bytes of a digest as a UUID, version 8 (name-based, by a hash of Relay's choosing: RFC 9562 5.8), as event stores want. */
function uuidOf(digest: Buffer): string {
  const bytes = Buffer.from(digest.subarray(0, 16));
  bytes[6] = (bytes[6] & 0x0f) | 0x80;
  bytes[8] = (bytes[8] & 0x3f) | 0x80; // the RFC's variant
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The id of the RecipientSuppressed that `eventId` causes for visible recipient `address`: the same on every handling. */
export function blockEventId(eventId: string, address: string): string {
  return uuidOf(createHash('sha256').update(`relay automatic suppression\n${eventId}\n${address}`).digest());
}

/** The secret box's purpose for BCC recipients' block ids. */
export const BCC_BLOCK_MAC_PURPOSE = 'bcc-automatic-suppression';

/**
 * The id of the RecipientSuppressed that `eventId` causes for BCC recipient `address`: the same
 * on every handling (under the same RELAY_SECRET_KEY), and, being a MAC, not computable from the
 * export, so it does not tie the block to the email event.
 */
export function bccBlockEventId(secrets: Pick<SecretBox, 'mac'>, eventId: string, address: string): string {
  return uuidOf(secrets.mac(BCC_BLOCK_MAC_PURPOSE, `${eventId}\n${address}`));
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
 * whose content is gone cannot be named, so it is not blocked). `origin`: the metadata of the
 * blocks of visible recipients, the stored event's (originOfEvent: the chain's correlation id,
 * the event as cause); a BCC recipient's block has one of its own.
 */
export async function applyAutomaticSuppression(
  deps: { events: EventStore; documents: DocumentStore; secrets: SecretBox; now: () => Date },
  event: RecordedEmailEvent,
  origin: CommandOrigin,
): Promise<number> {
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
    const bcc = state.visibleAddresses[block.index] === undefined;
    const blockId = bcc ? bccBlockEventId(deps.secrets, event.id, address) : blockEventId(event.id, address);
    // What the entry and the record of a handled source name: the email event, or for a BCC
    // recipient the block's own event.
    const sourceId = bcc ? blockId : event.id;
    const source = { workspaceId, eventId: sourceId, address };
    if (await wasHandled(deps.documents, source)) continue;
    // A BCC block recorded before its ids were keyed named the email event there (and in its entry, whose removal marks it).
    if (bcc && await wasHandled(deps.documents, { ...source, eventId: event.id })) continue;
    const createdAt = bcc ? deps.now().toISOString() : new Date(Date.parse(occurredAtOf(event) ?? '') || deps.now().getTime()).toISOString();
    const by: SuppressionCause = bcc
      ? { kind: 'bcc_recipient_event' }
      : { kind: 'email_event', emailId, eventId: event.id, reportId: event.type === 'RecipientReported' ? event.data.reportId : null };
    const blockOrigin = bcc ? unlinkedOrigin() : origin;
    const change: RecipientSuppressed = { type: 'RecipientSuppressed', data: { workspaceId, address, reason: block.reason, occurredAt: createdAt, by } };
    try {
      // lastEventId is never read out; a removal needs it (../management/suppressions.ts).
      await entries.insert({ _id: suppressionIdOf(workspaceId, address), workspaceId, address, reason: block.reason, emailId: bcc ? null : emailId, createdAt, lastEventId: sourceId });
    } catch (error) {
      // Blocked already (manually, or by an earlier report): one entry per address is enough.
      if (!(error instanceof DuplicateKeyError)) throw error;
      if ((await entries.get(suppressionIdOf(workspaceId, address)))?.lastEventId === sourceId) await recordAddition(deps, change, blockOrigin, deps.now, blockId);
      await markHandled(deps.documents, source, deps.now());
      continue;
    }
    // The entry first, then its event (apps/services/management/suppressions.ts says why): in the
    // consumer's deferred-durability round the entry is durable only once this returns.
    await durableSoFar();
    await recordAddition(deps, change, blockOrigin, deps.now, blockId);
    await markHandled(deps.documents, source, deps.now());
    added++;
  }
  return added;
}
