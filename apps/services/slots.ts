// A limit on how many of something an owner may have (a project's webhook endpoints, a
// workspace's pending invitations) that holds however many processes create them at once: each
// one holds a slot, a document `<owner>#<n>` (n < the limit) claimed by inserting it. An insert
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
