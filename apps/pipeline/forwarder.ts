// Follows the event store's global order and produces every event to the log. Its position
// is stored only after the log acknowledged the events, so a crash in between re-sends
// (consumers are idempotent) and never skips.
//
// Events are published in batches: the subscription hands them over one by one, and every
// event it has ready before the next turn of the event loop goes out in one publish (one
// transaction on the embedded log, one produce request on Kafka), up to MAX_BATCH events and
// MAX_BATCH_BYTES. A log that still refuses a batch for its size (a topic that takes smaller
// records than Relay's) gets it in halves. A single event it refuses cannot be published, and
// the forwarder cannot go past it (events stay in order): it is logged at error level with its
// id, once, and retried while the forwarder stays recovering (relay_part_up 0, its liveness
// error naming the event) until the topic takes it. Admission keeps such events from being
// written (apps/services/event-size.ts).
//
// Liveness (infra/liveness.ts): a failed read of the event store (the subscription reads again
// from the last event it delivered), a failed publish (retried with the same batch) or a failed
// checkpoint save makes it `recovering` until the next success; each batch the log acknowledged
// is progress; work waits while an event follows the acknowledged position. Only stop() or a
// subscription ended for good (a refused configuration) stops it.
//
// Logs (the part's logger, each line with `part: 'forwarder'`): the first failure of a place
// (read, publish, checkpoint) in a row is a warn line with the error and where the forwarder
// stands (the positions, and the stream and id of the event a publish begins with), each retry
// after it a debug line, until a call there succeeds; an event the log refuses and a
// subscription ended for good are error lines. Ids, types and positions only: an event's data
// (addresses, subjects) is never logged.
//
// Where the log serves the events topic from the event store's own rows (Log.followsEventStore:
// the embedded log in the event store's file) there is nothing to forward: the forwarder runs
// idle, running and never waiting, so that `relay forwarder`, `relay start` and /readyz are the
// same in every mode; it reads nothing and saves no checkpoint.
import { setImmediate } from 'node:timers/promises';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore, StoredEvent, Subscription } from '../../infra/ports/event-store.ts';
import { RecordsTooLargeError, type Log, type OutgoingRecord } from '../../infra/ports/log.ts';
import { Liveness } from '../../infra/liveness.ts';
import { createLogger, type Logger } from '../../infra/logging.ts';
import { retryUntilDone } from '../../infra/retry.ts';
import { COLLECTIONS } from '../services/collections.ts';
import { eventRecord } from '../../infra/events-topic.ts';
import { EVENTS_TOPIC_PARTITIONS, eventsTopic } from './topics.ts';

/** Where the forwarder of a namespace stands: the position of the last event the log acknowledged, as saved. */
export interface ForwarderCheckpoint {
  _id: string;
  position: string | null;
  updatedAt: string;
}

/** The checkpoint document of a namespace's forwarder (in `checkpoints`). */
export const forwarderCheckpointId = (namespace: string): string => `forwarder:${eventsTopic(namespace)}`;

export interface ForwarderOptions {
  events: EventStore;
  log: Log;
  documents: DocumentStore;
  /** Log namespace: the topic is `<namespace>.events`; one forwarder runs per namespace. */
  namespace: string;
  /** Events published before the position is saved (it is also saved when idle). */
  checkpointEvery?: number;
  /** Its liveness tracker (a new one when not given). */
  liveness?: Liveness;
  /** Told each failure: retried (the forwarder is recovering), or the one that stopped it. */
  onError?: (error: Error) => void;
  /** The process's logger (infra/logging.ts); without one, JSON lines on stdout at info. */
  logger?: ForwarderLogger;
}

/** What the forwarder logs with: a pino logger, or anything that takes its calls. */
export type ForwarderLogger = Pick<Logger, 'error' | 'warn' | 'debug'>;

/** The places that fail and retry, as liveness names them. */
type Place = 'read' | 'publish' | 'checkpoint';

const FAILED: Record<Place, string> = {
  read: 'forwarder: reading the event store failed; it reads again after the last event it was handed',
  publish: 'forwarder: publishing to the log failed; the same events are published again',
  checkpoint: 'forwarder: saving its position failed; it is saved again after the next batch or within 250 ms',
};

/** A single event the log refuses for its size: reported at error once, not as a failure to retry. */
class EventTooLargeError extends Error {}

/** Events per publish at most; the subscription waits while this many are unpublished. */
const MAX_BATCH = 500;
/**
 * Bytes per publish at most (keys, values, headers); an event larger than this goes alone.
 * Kafka refuses one partition's records of a request together over the topic's
 * max.message.bytes (16 MiB as infra/kafka/log.ts creates it): bounding the whole publish
 * bounds each partition's share, whatever the topic's partition count.
 */
const MAX_BATCH_BYTES = 8 * 1024 * 1024;
/** Bytes of unpublished events the subscription may hand over before it waits. */
const MAX_PENDING_BYTES = 32 * 1024 * 1024;
/** How long stop() keeps trying to publish what it holds before leaving it to the next start. */
const STOP_GRACE_MS = 5_000;

/** An event handed over by the subscription, not yet acknowledged by the log. */
interface Pending {
  record: OutgoingRecord;
  /** Its record's size: key, value and headers, in UTF-8. */
  bytes: number;
  position: string;
  event: Pick<StoredEvent, 'id' | 'type' | 'streamId'>;
}

function recordBytes(record: OutgoingRecord): number {
  let bytes = Buffer.byteLength(record.key) + Buffer.byteLength(record.value);
  for (const [name, value] of Object.entries(record.headers ?? {})) bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
  return bytes;
}

export interface Forwarder {
  stop(): Promise<void>;
  /** Position of the last event the log acknowledged (null also while it runs idle). */
  position(): string | null;
  liveness: Liveness;
}

export async function startForwarder(options: ForwarderOptions): Promise<Forwarder> {
  const { events, log, documents } = options;
  const checkpoints = documents.collection<ForwarderCheckpoint>(COLLECTIONS.checkpoints);
  const topic = eventsTopic(options.namespace);
  const id = forwarderCheckpointId(options.namespace);
  const every = options.checkpointEvery ?? 100;
  const liveness = options.liveness ?? new Liveness();
  const logger = options.logger ?? createLogger({ level: 'info', format: 'json' });
  // The places failing now: their next failures are retries, logged at debug.
  const failing = new Set<Place>();
  const failed = (place: Place, where: () => Record<string, unknown>) => (error: unknown, retryInMs?: number) => {
    liveness.failed(error, place);
    options.onError?.(error as Error);
    const again = failing.has(place) || error instanceof EventTooLargeError;
    failing.add(place);
    logger[again ? 'debug' : 'warn']({ part: 'forwarder', topic, ...where(), retryInMs, err: error }, FAILED[place]);
  };
  const succeeded = (place: Place, progress = false) => {
    failing.delete(place);
    if (progress) liveness.progress(place);
    else liveness.succeeded(place);
  };
  await log.ensureTopic(topic, EVENTS_TOPIC_PARTITIONS);
  if (log.followsEventStore?.(topic)) {
    return { position: () => null, liveness, stop: async () => liveness.stopped() };
  }

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

  // Saves run one after another: the timer's save and a batch's save must not race each other
  // with the same version, which made a lone forwarder report a second one.
  const saveNow = async () => {
    if (acknowledged === saved) return;
    const position = acknowledged;
    const next = await checkpoints.replace({ _id: id, position, updatedAt: new Date().toISOString() }, version);
    if (!next) {
      // Another forwarder wrote it (two running, or one that overlapped this one's start). The
      // next save goes on from what it wrote rather than failing for good; positions only
      // decide what is published again after a restart, and publishing again is harmless.
      version = (await checkpoints.get(id))?._v ?? version;
      throw new Error(`forwarder checkpoint ${id} was changed by another process; is a second forwarder running?`);
    }
    version = next._v;
    saved = position;
    sinceSave = 0;
    succeeded('checkpoint');
  };
  let saving: Promise<void> = Promise.resolve();
  const save = (): Promise<void> => {
    const run = saving.then(saveNow, saveNow);
    saving = run.catch(() => {});
    return run;
  };
  const saveFailed = failed('checkpoint', () => ({ position: acknowledged, savedPosition: saved }));
  const idleSave = setInterval(() => void save().catch(saveFailed), 250);
  idleSave.unref();

  const abort = new AbortController();
  let pending: Pending[] = [];
  let pendingBytes = 0;
  let publishing: Promise<void> | null = null;
  // Events per publish for now: halved when the log refuses a batch for its size, doubled back after each publish.
  let batchLimit = MAX_BATCH;
  // The event last reported as one the log refuses: said once, not at every retry.
  let reportedTooLarge: string | null = null;

  const nextBatch = (): Pending[] => {
    let count = 0;
    let bytes = 0;
    while (count < pending.length && count < batchLimit && (count === 0 || bytes + pending[count].bytes <= MAX_BATCH_BYTES)) bytes += pending[count++].bytes;
    return pending.slice(0, count);
  };

  /** Where a batch begins and ends, for the log: positions, and the first event's stream and id. */
  const batchFields = (batch: Pending[]) => ({
    position: batch[0].position, lastPosition: batch[batch.length - 1].position, events: batch.length,
    bytes: batch.reduce((sum, p) => sum + p.bytes, 0), streamId: batch[0].event.streamId, eventId: batch[0].event.id,
  });

  const publishBatch = async (batch: Pending[]): Promise<'published' | 'split'> => {
    try {
      await log.publish(topic, batch.map((p) => p.record));
      return 'published';
    } catch (error) {
      if (!(error instanceof RecordsTooLargeError)) throw error;
      if (batch.length > 1) {
        failed('publish', () => ({ ...batchFields(batch), split: true }))(error);
        return 'split';
      }
      const { event, bytes, position } = batch[0];
      const stuck = new EventTooLargeError(
        `event ${event.id} (${event.type} of ${event.streamId}, ${bytes} bytes) is larger than the log takes in one record; ` +
          `nothing after it can be forwarded until the topic takes it (Kafka: raise its max.message.bytes): ${error.message}`,
        { cause: error },
      );
      if (reportedTooLarge !== event.id) {
        reportedTooLarge = event.id;
        logger.error(
          { part: 'forwarder', topic, eventId: event.id, type: event.type, streamId: event.streamId, position, bytes, err: error },
          'forwarder: an event is larger than the log takes in one record; nothing after it is forwarded until the topic takes it (Kafka: raise its max.message.bytes)',
        );
      }
      throw stuck;
    }
  };

  const publishPending = async () => {
    // Let the subscription hand over what it already has, so it goes out in one publish.
    await setImmediate();
    while (pending.length > 0 && !abort.signal.aborted) {
      const batch = nextBatch();
      let outcome = 'published' as 'published' | 'split';
      const done = await retryUntilDone(async () => void (outcome = await publishBatch(batch)), { initialDelayMs: 50, maxDelayMs: 5_000 }, abort.signal, failed('publish', () => batchFields(batch)));
      if (!done) return;
      if (outcome === 'split') {
        batchLimit = Math.ceil(batch.length / 2);
        continue;
      }
      batchLimit = Math.min(MAX_BATCH, batchLimit * 2);
      pending = pending.slice(batch.length);
      for (const p of batch) pendingBytes -= p.bytes;
      acknowledged = batch[batch.length - 1].position;
      succeeded('publish', true);
      sinceSave += batch.length;
      if (sinceSave >= every) await save().catch(saveFailed);
    }
  };
  const kick = () => {
    if (publishing) return;
    publishing = publishPending().finally(() => {
      publishing = null;
      if (pending.length > 0 && !abort.signal.aborted) kick();
    });
  };

  // The position of the last event the subscription handed over: it reads again after it.
  let handedOver = acknowledged;
  const subscription: Subscription = events.subscribeAll(
    {
      after: acknowledged,
      onReadFailed: failed('read', () => ({ after: handedOver })),
      onReadResumed: () => succeeded('read'),
      // Only an error no retry can change ends a subscription.
      onError: (error) => {
        liveness.stopped(error);
        options.onError?.(error);
        logger.error({ part: 'forwarder', topic, after: handedOver, position: acknowledged, err: error }, 'forwarder: stopped, reading the event store failed for good; nothing more is forwarded until it restarts');
      },
    },
    async (event: StoredEvent) => {
      const record = eventRecord(event);
      const bytes = recordBytes(record);
      handedOver = event.position;
      pending.push({ record, bytes, position: event.position, event: { id: event.id, type: event.type, streamId: event.streamId } });
      pendingBytes += bytes;
      kick();
      while ((pending.length >= MAX_BATCH || pendingBytes >= MAX_PENDING_BYTES) && publishing) await publishing;
    },
  );

  // Work waits while the event store holds an event past the acknowledged position.
  liveness.probeWaiting(async () => pending.length > 0 || await events.countAfter(acknowledged, 1) > 0);

  return {
    position: () => acknowledged,
    liveness,
    async stop() {
      clearInterval(idleSave);
      await subscription.stop();
      const giveUp = setTimeout(() => abort.abort(), STOP_GRACE_MS);
      while (publishing) await publishing;
      clearTimeout(giveUp);
      abort.abort();
      try {
        await save();
      } finally {
        liveness.stopped();
      }
    },
  };
}
