// RELAY_SEND_RATE: messages per second for all sender instances together. Each second has
// `rate` numbered slots; a send takes one by inserting its document (a unique insert, atomic
// on every document store, FerretDB included), so instances never need to talk to each other.
// A sender that finds the second full waits for the next one; old slots are swept.
import { DuplicateKeyError, type DocumentStore } from '../../infra/ports/document-store.ts';
import { COLLECTIONS } from './collections.ts';

interface SendSlot {
  _id: string;
  second: number;
}

export interface SendRateGate {
  /** Resolves when this process may send one more message. */
  acquire(): Promise<void>;
}

export const unlimitedSendRate: SendRateGate = { acquire: async () => {} };

export function sharedSendRate(documents: DocumentStore, rate: number, now: () => number = Date.now): SendRateGate {
  const slots = documents.collection<SendSlot>(COLLECTIONS.sendRateSlots);
  // Where this process expects the next free slot of a second: others' inserts only push it up.
  let hint = { second: -1, next: 0 };
  let lastSweep = 0;
  let queue: Promise<void> = Promise.resolve();

  async function takeOne(): Promise<void> {
    for (;;) {
      const second = Math.floor(now() / 1000);
      if (hint.second !== second) hint = { second, next: 0 };
      while (hint.next < rate) {
        const n = hint.next++;
        try {
          await slots.insert({ _id: `${second}:${n}`, second });
          if (second - lastSweep > 60) {
            lastSweep = second;
            void sweep(second - 60);
          }
          // A durable insert can be acknowledged after its second has ended; sending then would
          // add one to the next second's full count. The late slot is simply left unused.
          if (Math.floor(now() / 1000) === second) return;
          break;
        } catch (error) {
          if (!(error instanceof DuplicateKeyError)) throw error;
        }
        if (Math.floor(now() / 1000) !== second) break;
      }
      // This second is used up (by anyone): wait for the next one.
      const wait = (second + 1) * 1000 - now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  async function sweep(before: number): Promise<void> {
    const old = await slots.find({ where: { second: { lt: before } }, limit: 10_000 }).catch(() => []);
    for (const slot of old) await slots.delete(slot._id).catch(() => false);
  }

  return {
    acquire() {
      // One at a time per process: slots are taken in order, not raced for by our own sends.
      const next = queue.then(takeOne);
      queue = next.catch(() => {});
      return next;
    },
  };
}

export async function ensureSendRateIndexes(documents: DocumentStore): Promise<void> {
  await documents.collection<SendSlot>(COLLECTIONS.sendRateSlots).ensureIndexes([{ name: 'second', fields: [['second', 'asc']] }]);
}
