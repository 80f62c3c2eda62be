// Small helpers every management service uses over the document store port.
import { conflict, notFound } from '../../../domain/errors.ts';
import { DuplicateKeyError, type Collection, type Stored } from '../../../infra/ports/document-store.ts';
import { managementChanged } from './reused-reads.ts';

/**
 * Read, change, compare-and-set; again from a fresh read when someone else wrote in between.
 * `change` may throw (a rule no longer holds on the fresh copy) or return null (nothing to do).
 * A write, made or attempted, ends every reuse of earlier reads in this process (./reused-reads.ts).
 */
export async function updateDocument<T extends { _id: string }>(
  collection: Collection<T>,
  id: string,
  what: string,
  change: (current: Stored<T>) => T | null,
): Promise<Stored<T>> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const current = await collection.get(id);
    if (!current) throw notFound(`${what} ${id} not found`);
    const next = change(current);
    if (next === null) return current;
    const { _v: _ignored, ...body } = next as T & { _v?: number };
    let stored: Stored<T> | null;
    try {
      stored = await collection.replace(body as unknown as T, current._v);
    } finally {
      managementChanged();
    }
    if (stored) return stored;
  }
  throw conflict(`${what} ${id} is being changed by others; try again`);
}

/** Inserts, turning a taken unique value into a 409 that says what was taken. */
export async function insertUnique<T extends { _id: string }>(collection: Collection<T>, doc: T, taken: string): Promise<Stored<T>> {
  try {
    return await collection.insert(doc);
  } catch (error) {
    if (error instanceof DuplicateKeyError) throw conflict(taken);
    throw error;
  }
}
