// The bounces and complaints the suppressor is done with, per workspace and address. The list's
// entry alone cannot say it: an owner may remove the entry, and the same source event handled
// again afterwards (at-least-once: a crash before the offset commit, `relay parked retry`)
// would find no entry and block the address against that decision. A record here outlives the
// entry, so the event is not acted on again; a new bounce or complaint has an id of its own and
// blocks as before.
//
// The suppressor writes its record once the event's block is fully recorded (entry, event,
// settling), so a record always means nothing of that event is left to do. A removal also writes
// one for the event that made the entry it deletes, before deleting it: a suppressor that
// stopped between the entry and its record then cannot block the address again either.
//
// Kept as long as webhook deliveries, the other per-event dedupe (domain/retention.ts): an event
// handled again after that is taken as new.
import { DuplicateKeyError, type DocumentStore } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';

export interface SuppressionSource {
  /** `<workspaceId>:<eventId>:<address>`: neither of the first two holds a colon. */
  _id: string;
  workspaceId: string;
  eventId: string;
  address: string;
  handledAt: string;
}

export interface SourceOfBlock { workspaceId: string; eventId: string; address: string }

export const suppressionSourcesOf = (documents: DocumentStore) => documents.collection<SuppressionSource>(COLLECTIONS.suppressionSources);

const idOf = (source: SourceOfBlock): string => `${source.workspaceId}:${source.eventId}:${source.address}`;

export async function ensureSuppressionSourceIndexes(documents: DocumentStore): Promise<void> {
  await suppressionSourcesOf(documents).ensureIndexes([{ name: 'handledAt', fields: [['handledAt', 'asc']] }]);
}

export async function wasHandled(documents: DocumentStore, source: SourceOfBlock): Promise<boolean> {
  return (await suppressionSourcesOf(documents).get(idOf(source))) !== null;
}

/** Idempotent: the first record stays, and its time with it. */
export async function markHandled(documents: DocumentStore, source: SourceOfBlock, now: Date): Promise<void> {
  try {
    await suppressionSourcesOf(documents).insert({ _id: idOf(source), ...source, handledAt: now.toISOString() });
  } catch (error) {
    if (!(error instanceof DuplicateKeyError)) throw error;
  }
}
