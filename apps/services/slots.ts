// A limit on how many of something an owner may have (a project's webhook endpoints, live API
// keys and templates, a workspace's pending invitations and projects, the workspaces a user
// creates) that holds however many processes create them at once: each one holds a slot, a
// document `<owner>#<n>` (n < the limit) claimed by inserting it. An insert
// against a unique _id is atomic on every adapter, where compare-and-set across processes is not
// on all (infra/engines/README.md), so exactly the room there is is handed out.
import { DuplicateKeyError, type Collection } from '../../infra/ports/document-store.ts';

/**
 * Claims the first free slot of `owner` among the first `limit` ones: its id, or null when all
 * are taken. A taken slot is offered to `freeIfStale`, which frees it when its holder no longer
 * holds it and says whether it may be free now; the claim then tries it once more, else moves on.
 */
export async function claimSlot<S extends { _id: string }>(
  slots: Collection<S>, owner: string, limit: number, slotAt: (id: string) => S, freeIfStale: (id: string) => Promise<boolean>,
): Promise<string | null> {
  for (let n = 0; n < limit; n++) {
    const slot = slotAt(`${owner}#${n}`);
    for (let tries = 0; tries < 2; tries++) {
      try {
        await slots.insert(slot);
        return slot._id;
      } catch (error) {
        if (!(error instanceof DuplicateKeyError)) throw error;
      }
      if (!(await freeIfStale(slot._id))) break;
    }
  }
  return null;
}

/** A document that holds one of its owner's slots (an API key, a project, a template, a workspace). */
export interface SlotHolder {
  /** The slot it holds; absent on documents made before their kind had slots (they take slots off the end of the range). */
  slot?: string;
}

/** One slot of an owner, taken: `<owner>#<n>`, naming the document that holds it. */
export interface HeldSlot {
  _id: string;
  holderId: string;
  claimedAt: string;
}

/**
 * A slot claimed this long ago whose holder does not hold it is free again: the holder's creation
 * died between its two writes (claim, then insert, with nothing but the store between), or its
 * end (a revocation, a deletion) died before freeing it.
 */
export const ABANDONED_SLOT_MS = 60_000;

/**
 * Claims a free slot of `owner` among the first `limit` for `holderId`: its id, or null when all
 * are taken. Unlike claimSlot it reads the owner's slots at once, so that a claim costs a few
 * requests however large the limit (a project's 1,000 templates): one read, then an insert into
 * a slot seen free (the next one seen free when a concurrent claim took it first). Only when none
 * is free are the holders read, in one request (`liveHolders`: those of these ids that exist and
 * are not done with their slot, as a revoked key is), and the slots whose holder no longer holds
 * them are freed for one more try; never one claimed within ABANDONED_SLOT_MS, whose claimer may
 * be about to insert its holder.
 */
export async function claimHeldSlot(
  slots: Collection<HeldSlot>, owner: string, limit: number, holderId: string, now: Date,
  liveHolders: (ids: string[]) => Promise<Array<{ _id: string } & SlotHolder>>,
): Promise<string | null> {
  for (let round = 0; round < 2; round++) {
    // Slot ids are `<owner>#<n>` and owners hold no '#': '$' is the character after it.
    const taken = await slots.find({ where: { _id: { gte: `${owner}#`, lt: `${owner}$` } } });
    const takenIds = new Set(taken.map((slot) => slot._id));
    for (let n = 0; n < limit; n++) {
      const id = `${owner}#${n}`;
      if (takenIds.has(id)) continue;
      try {
        await slots.insert({ _id: id, holderId, claimedAt: now.toISOString() });
        return id;
      } catch (error) {
        if (!(error instanceof DuplicateKeyError)) throw error;
      }
    }
    const settled = taken.filter((slot) => Date.parse(slot.claimedAt) <= now.getTime() - ABANDONED_SLOT_MS);
    if (round > 0 || settled.length === 0) return null;
    const holding = new Map((await liveHolders(settled.map((slot) => slot.holderId))).map((holder) => [holder._id, holder.slot]));
    let freed = 0;
    for (const slot of settled) if (holding.get(slot.holderId) !== slot._id && (await slots.delete(slot._id, slot._v))) freed++;
    if (freed === 0) return null;
  }
  return null;
}

/** Frees the slot if `holderId` still holds it (it may have been freed and claimed again since). */
export async function freeHeldSlot(slots: Collection<HeldSlot>, id: string, holderId: string): Promise<void> {
  const taken = await slots.get(id);
  if (taken?.holderId === holderId) await slots.delete(id, taken._v);
}

/** Runs `insert`, the write of the holder of `slot`; when it fails, the slot is freed again and the failure rethrown. */
export async function insertHoldingSlot<T>(slots: Collection<HeldSlot>, slot: string, holderId: string, insert: () => Promise<T>): Promise<T> {
  try {
    return await insert();
  } catch (error) {
    await freeHeldSlot(slots, slot, holderId).catch(() => undefined);
    throw error;
  }
}
