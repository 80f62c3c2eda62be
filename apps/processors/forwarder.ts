// Follows the event store's global order and produces every event to the log. Its position
// is stored only after the log acknowledged the events, so a crash in between re-sends
// (consumers are idempotent) and never skips.
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore, StoredEvent, Subscription } from '../../infra/ports/event-store.ts';
import type { Log } from '../../infra/ports/log.ts';
import { COLLECTIONS } from '../services/collections.ts';
import { EVENTS_TOPIC_PARTITIONS, encodeEvent, eventsTopic } from './topics.ts';

interface Checkpoint {
  _id: string;
  position: string | null;
  updatedAt: string;
}

export interface ForwarderOptions {
  events: EventStore;
  log: Log;
  documents: DocumentStore;
  /** Log namespace: the topic is `<namespace>.events`; one forwarder runs per namespace. */
  namespace: string;
  /** Events published before the position is saved (it is also saved when idle). */
  checkpointEvery?: number;
  onError?: (error: Error) => void;
}

export interface Forwarder {
  stop(): Promise<void>;
  /** Position of the last event the log acknowledged. */
  position(): string | null;
}

export async function startForwarder(options: ForwarderOptions): Promise<Forwarder> {
  const { events, log, documents } = options;
  const checkpoints = documents.collection<Checkpoint>(COLLECTIONS.checkpoints);
  const topic = eventsTopic(options.namespace);
  const id = `forwarder:${topic}`;
  const every = options.checkpointEvery ?? 100;
  await log.ensureTopic(topic, EVENTS_TOPIC_PARTITIONS);

  let stored = await checkpoints.get(id);
  if (!stored) {
    try {
      stored = await checkpoints.insert({ _id: id, position: null, updatedAt: new Date().toISOString() });
    } catch {
      stored = await checkpoints.get(id);
    }
  }
  let version = stored!._v;
  let acknowledged: string | null = stored!.position;
  let saved = acknowledged;
  let sinceSave = 0;

  const save = async () => {
    if (acknowledged === saved) return;
    const next = await checkpoints.replace({ _id: id, position: acknowledged, updatedAt: new Date().toISOString() }, version);
    if (!next) throw new Error(`forwarder checkpoint ${id} was changed by another process; is a second forwarder running?`);
    version = next._v;
    saved = acknowledged;
    sinceSave = 0;
  };
  const idleSave = setInterval(() => void save().catch((e) => options.onError?.(e as Error)), 250);
  idleSave.unref();

  const subscription: Subscription = events.subscribeAll(
    { after: acknowledged, onError: options.onError },
    async (event: StoredEvent) => {
      await log.publish(topic, [{ key: event.streamId, value: encodeEvent(event), headers: { 'event-type': event.type, 'event-id': event.id } }]);
      acknowledged = event.position;
      if (++sinceSave >= every) await save();
    },
  );

  return {
    position: () => acknowledged,
    async stop() {
      clearInterval(idleSave);
      await subscription.stop();
      await save();
    },
  };
}
