// Keeps the email read model: a consumer group over the events topic that applies each
// email event to its document with compare-and-set. The stream revision stored in the
// document guards every write, so a redelivered event changes nothing; a gap (an event
// whose predecessors are missing) is filled from the event store, the source of truth.
import { EMAIL_STREAM_PREFIX } from '../../domain/email/events.ts';
import { DuplicateKeyError, type DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore, StoredEvent } from '../../infra/ports/event-store.ts';
import type { Log, LogConsumer } from '../../infra/ports/log.ts';
import { applyToEmailView, type EmailView } from '../../projections/email-view.ts';
import { COLLECTIONS } from '../services/collections.ts';
import { ensureEmailViewIndexes } from '../services/email-reads.ts';
import { asEmailEvent } from '../services/email-stream.ts';
import { EVENTS_TOPIC_PARTITIONS, decodeEvent, eventsTopic, groupOf } from './topics.ts';


/** Applies one event (and any missing predecessors) to the email's document. */
export async function projectEmailEvent(documents: DocumentStore, events: EventStore, event: StoredEvent, collection: string = COLLECTIONS.emails): Promise<void> {
  const views = documents.collection<EmailView>(collection);
  const emailId = event.streamId.slice(EMAIL_STREAM_PREFIX.length);
  for (;;) {
    const current = await views.get(emailId);
    const applied = current?.streamRevision ?? -1;
    if (event.revision <= applied) return;
    const pending = event.revision === applied + 1
      ? [event]
      : await events.readStream(event.streamId, { fromRevision: applied + 1, maxCount: event.revision - applied });
    let next: EmailView | null = current;
    for (const e of pending) next = applyToEmailView(next, asEmailEvent(e));
    if (next === null || next === current) return;
    if (current === null) {
      try {
        await views.insert(next);
        return;
      } catch (error) {
        if (error instanceof DuplicateKeyError) continue; // another instance inserted first: re-read
        throw error;
      }
    }
    const { _v, ...body } = next as EmailView & { _v?: number };
    void _v;
    if (await views.replace(body, current._v)) return;
    // Lost a compare-and-set race with another instance: re-read and re-apply.
  }
}

export interface EmailProjectorOptions {
  events: EventStore;
  log: Log;
  documents: DocumentStore;
  /** Log namespace: reads `<namespace>.events` as group `<namespace>.projector`. */
  namespace: string;
  onHandlerError?: (error: Error) => void;
  /** Told about each event applied (for debug logs). */
  onProjected?: (event: { partition: number; streamId: string; revision: number }) => void;
}

export async function startEmailProjector(options: EmailProjectorOptions): Promise<LogConsumer> {
  await ensureEmailViewIndexes(options.documents);
  const topic = eventsTopic(options.namespace);
  await options.log.ensureTopic(topic, EVENTS_TOPIC_PARTITIONS);
  return options.log.consume({
    group: groupOf(options.namespace, 'projector'),
    topic,
    fromBeginning: true,
    handle: async (record) => {
      if (!record.key.startsWith(EMAIL_STREAM_PREFIX)) return;
      const event = decodeEvent(record);
      await projectEmailEvent(options.documents, options.events, event);
      options.onProjected?.({ partition: record.partition, streamId: event.streamId, revision: event.revision });
    },
    onHandlerError: (error) => options.onHandlerError?.(error),
  });
}
