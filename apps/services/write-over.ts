// Writing a document that is derived from somewhere else (a stream, a failure) over the copy
// that was read: several instances may do it at once, and the one that loses reads again.
import { DuplicateKeyError, type Collection, type Stored } from '../../infra/ports/document-store.ts';

/**
 * Writes `next` over `current` as it was read: an insert when there was none, else a
 * compare-and-set. Null when another writer got in first (read again, decide again).
 */
export async function writeOver<T extends { _id: string }>(collection: Collection<T>, current: Stored<T> | null, next: T): Promise<Stored<T> | null> {
  try {
    return current ? await collection.replace(next, current._v) : await collection.insert(next);
  } catch (error) {
    if (!(error instanceof DuplicateKeyError)) throw error;
    return null;
  }
}
