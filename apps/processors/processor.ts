// What a processor is: a consumer group on the events topic that reacts to some event types.
// A processor file exports one definition; `startProcessor` does the rest the same way for
// every processor (topic, group, filtering by type before decoding, upcasting, causation),
// including what happens when a handler throws: no event can stop a consumer group.
//
// A handler that throws is retried: the runner hands the failure to the log, which delivers the
// record again after its own doubling back-off (100 ms up to 5 s, holding only that partition),
// and the runner counts the failures of each held record. What a failure means depends on the
// stores, asked right after it (ping of the event store and the document store, with a timeout):
// - either does not answer: an outage, not the event's fault. The failure is not counted and
//   the record is retried for as long as the outage lasts: no event is parked for a store down.
// - both answer: the failure counts. At the `attempts`-th counted failure the event is parked (a
//   document in `parked_events`, apps/services/parked-events.ts), a warning goes out, and the
//   handler returns, so the offset is committed and the partition moves on. A park does not fail
//   on what it records (a record the store refuses is written again with ids and counts only:
//   parkEvent); if even that cannot be written, the store takes no writes: the record is retried
//   as in an outage (the processor `recovering`) and parked at its next failure.
// A record held longer than `stuckAfterMs` (an outage, or a handler that never settles) makes
// the processor `stuck`: /readyz answers 503 for its process (apps/relay.ts).
//
// Liveness (infra/liveness.ts): every record handled (applied, skipped or parked) is progress,
// and so is every record of other types the log passes over without handing it over (it may
// commit their offsets up to a second later, so the lag alone would say work waits);
// a consumer that cannot fetch or commit (its log went away) or a handler failing while a store
// does not answer makes it `recovering` until the next success; work waits while it holds a
// record or a partition it owns has records past the group's committed offset. A processor
// with a loop of its own (a dispatcher: `init` returns it) shows that loop as the part
// `<name>.dispatcher`.
import type { RelayConfig } from '../../infra/config.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore, StoredEvent } from '../../infra/ports/event-store.ts';
import type { Log, LogConsumer, LogRecord } from '../../infra/ports/log.ts';
import { Liveness } from '../../infra/liveness.ts';
import { ensureParkedIndexes, parkEvent, parkedEventId, resolveParked } from '../services/parked-events.ts';
import type { Services } from '../services/services.ts';
import type { RelayMetrics } from '../relay-metrics.ts';
import { EVENTS_TOPIC_PARTITIONS, decodeEvent, eventsTopic, groupOf } from '../pipeline/topics.ts';

/** Header of a record `relay parked retry` published again: only this consumer group handles it. */
export const RETRY_GROUP_HEADER = 'relay-retry-group';

/** How the runner treats a handler that throws (apps/processors/processor.ts, top). */
export interface ProcessorPolicy {
  /** Counted failures (the stores answering) after which the event is parked. Default 5. */
  attempts: number;
  /** A record held this long (retried, or in a handler) makes the processor stuck. Default 60 s. */
  stuckAfterMs: number;
  /** How long a store may take to answer ping before it counts as down. Default 2000 ms. */
  pingTimeoutMs: number;
}

export const DEFAULT_PROCESSOR_POLICY: ProcessorPolicy = {
  attempts: 5, stuckAfterMs: 60_000, pingTimeoutMs: 2000,
};

export interface ProcessorDeps {
  config: RelayConfig;
  events: EventStore;
  documents: DocumentStore;
  log: Log;
  services: Services;
  now: () => Date;
  /** Told about a failure that will be retried (a handler's, or a background loop's). */
  onError: (error: Error) => void;
  onDebug?: (message: string, fields: Record<string, unknown>) => void;
  /** Told when this instance joins or leaves its consumer group and when its partitions change (logged at info). */
  onInfo?: (message: string, fields: Record<string, unknown>) => void;
  /**
   * Told when an event is parked or the processor gets stuck: what an operator must look at
   * (logged at warn). Without it, these go to onError.
   */
  onWarning?: (message: string, fields: Record<string, unknown>) => void;
  /** Told what is broken now and holds work up for every email (logged at error): a transport that cannot be used. */
  onAlert?: (message: string, fields: Record<string, unknown>) => void;
  /** The process's metrics (apps/relay-metrics.ts), for what the processor counts itself. */
  metrics?: RelayMetrics;
  /** Overrides of DEFAULT_PROCESSOR_POLICY (tests shorten the waits). */
  policy?: Partial<ProcessorPolicy>;
}

/** What `init` may hand back: the processor's own working state, and how to stop what it started. */
export interface ProcessorRuntime {
  stop?(): Promise<void>;
  /** Starts no new work of its own loop (a sender's claims) while the consumer goes on; resolves once the runs in flight ended. stop() follows. */
  stopClaiming?(): Promise<void>;
  /** The liveness of a loop of its own (a dispatcher), shown as the part `<name>.dispatcher`. */
  liveness?: Liveness;
}

export interface ProcessorDefinition<Name extends string = string, R extends ProcessorRuntime = ProcessorRuntime> {
  /** `relay processor <name>`; the consumer group is `<namespace>.<name>`. */
  name: Name;
  /** One line for `relay processor --help` and the docs. */
  summary: string;
  /** Event types it reacts to; records of other types are skipped without being decoded. */
  eventTypes: readonly string[];
  /** Prepares indexes, timers, connections; runs before the consumer joins its group. */
  init?(deps: ProcessorDeps): Promise<R>;
  /**
   * Reacts to one event. At-least-once: the same event may come again (redelivery after a
   * crash or rebalance, or `relay parked retry`, possibly after later events of its stream), so
   * it must be idempotent. A throw retries the event, holding its partition meanwhile, and
   * parks it after a few failures while the stores answer; so slow or failing work belongs in
   * the processor's own schedule.
   */
  handle(event: StoredEvent, runtime: R, deps: ProcessorDeps): Promise<void>;
}

export const defineProcessor = <Name extends string, R extends ProcessorRuntime>(definition: ProcessorDefinition<Name, R>) => definition;

/** A record held past `stuckAfterMs`: why the processor is not ready. */
export interface StuckRecord {
  reason: string;
  since: string;
  eventId: string;
  streamId: string;
  partition: number;
  offset: string;
  /** Counted failures so far (failures during an outage are not counted). */
  attempts: number;
  lastError: string | null;
}

export interface ProcessorStatus {
  name: string;
  group: string;
  /** Set while this instance holds a record past stuckAfterMs; null when it makes progress. */
  stuck: StuckRecord | null;
  /** Events this instance parked since it started (the store has all of them: relay parked list). */
  parked: number;
}

export interface RunningProcessor {
  name: string;
  /** What /readyz reports for this processor. */
  status(): ProcessorStatus;
  /** Its liveness by part: `<name>`, and `<name>.dispatcher` when it has one. */
  parts: ReadonlyMap<string, Liveness>;
  /** Its own loop starts no new work (ProcessorRuntime.stopClaiming); its consumer goes on until stop(). */
  stopClaiming(): Promise<void>;
  stop(): Promise<void>;
}

/** What a record names, decoded or not. */
interface Target {
  id: string;
  streamId: string;
  revision: number | null;
  position: string | null;
  type: string | null;
}

/** A record handed to the handler and not let go yet (per partition: one at a time). */
interface Held {
  offset: string;
  target: Target;
  /** Date.now() when it was first handed over. */
  since: number;
  lastAttemptAt: number;
  inFlight: boolean;
  /** Failures while the stores answered. */
  failures: number;
  firstFailedAt: Date | null;
  lastError: string | null;
  outage: boolean;
  warned: boolean;
}

/**
 * A held record whose last attempt is older than this is no longer this instance's (the
 * partition moved in a rebalance): it does not make the processor stuck. The logs retry a
 * record at least every 5 s.
 */
const HELD_FRESH_MS = 30_000;

/** Milliseconds as seconds, to a tenth below ten. */
const seconds1 = (ms: number): string => (ms < 10_000 ? (ms / 1000).toFixed(1) : String(Math.round(ms / 1000)));

const errorOf = (value: unknown): Error => (value instanceof Error ? value : new Error(String(value)));

function describe(target: Target, record: LogRecord): string {
  const revision = target.revision === null ? '' : `@${target.revision}`;
  return `${target.type ?? 'record'} ${target.streamId}${revision} (event ${target.id}, ${record.topic}/${record.partition}@${record.offset})`;
}

export async function startProcessor<R extends ProcessorRuntime>(definition: ProcessorDefinition<string, R>, deps: ProcessorDeps): Promise<RunningProcessor> {
  const policy: ProcessorPolicy = { ...DEFAULT_PROCESSOR_POLICY, ...deps.policy };
  const runtime = (definition.init ? await definition.init(deps) : {}) as R;
  const topic = eventsTopic(deps.config.logNamespace);
  const group = groupOf(deps.config.logNamespace, definition.name);
  const held = new Map<number, Held>();
  const liveness = new Liveness();
  // The partitions this instance owns now (its work: other instances' partitions are theirs).
  let ownedPartitions: number[] = [];
  let parkedHere = 0;
  const warn = (message: string, fields: Record<string, unknown>) => {
    if (deps.onWarning) deps.onWarning(message, { processor: definition.name, ...fields });
    else deps.onError(new Error(`${message} ${JSON.stringify(fields)}`));
  };

  const answers = (ping: () => Promise<boolean>) => new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), policy.pingTimeoutMs);
    Promise.resolve().then(ping).then((ok) => resolve(ok === true), () => resolve(false)).finally(() => clearTimeout(timer));
  });
  const storesAnswer = async () => (await Promise.all([answers(() => deps.events.ping()), answers(() => deps.documents.ping())])).every(Boolean);

  const hold = (record: LogRecord, target: Target): Held => {
    const current = held.get(record.partition);
    if (current && current.offset === record.offset) return current;
    const now = Date.now();
    const fresh: Held = { offset: record.offset, target, since: now, lastAttemptAt: now, inFlight: false, failures: 0, firstFailedAt: null, lastError: null, outage: false, warned: false };
    held.set(record.partition, fresh);
    return fresh;
  };
  const release = (record: LogRecord) => {
    if (held.get(record.partition)?.offset === record.offset) held.delete(record.partition);
  };

  async function park(h: Held, record: LogRecord, error: Error): Promise<void> {
    let parked: Awaited<ReturnType<typeof parkEvent>>;
    try {
      parked = await parkEvent(deps.documents, {
        processor: definition.name, group, event: h.target, error, attempts: h.failures,
        firstFailedAt: h.firstFailedAt ?? deps.now(), lastFailedAt: deps.now(),
        record: { topic: record.topic, partition: record.partition, offset: record.offset },
      });
    } catch (parkError) {
      const cause = errorOf(parkError);
      liveness.failed(cause, 'park');
      throw new Error(`${definition.name}: ${describe(h.target, record)} could not be parked (retried; parked at its next failure): ${cause.message}`, { cause });
    }
    liveness.succeeded('park');
    parkedHere++;
    release(record);
    warn(`${definition.name}: parked ${describe(h.target, record)} after ${h.failures} failed attempts; its partition moves on (relay parked list --processor ${definition.name})`, {
      parkedId: parked._id, eventId: h.target.id, streamId: h.target.streamId, revision: h.target.revision, type: h.target.type, attempts: h.failures, error: error.message,
    });
  }

  /** Runs the handler once; a failure is counted, parked, or handed back to the log (see the top). */
  async function attempt(record: LogRecord, target: Target, work: () => Promise<void>): Promise<'applied' | 'parked'> {
    const h = hold(record, target);
    h.inFlight = true;
    h.lastAttemptAt = Date.now();
    let failure: Error;
    try {
      await work();
      h.inFlight = false;
      release(record);
      return 'applied';
    } catch (error) {
      failure = errorOf(error);
    }
    h.inFlight = false;
    h.lastAttemptAt = Date.now();
    h.lastError = failure.message;
    if (!(await storesAnswer())) {
      h.outage = true;
      liveness.failed(failure, 'handle');
      throw new Error(`${definition.name}: ${describe(target, record)} failed while a store does not answer (not counted; retried until the stores answer): ${failure.message}`, { cause: failure });
    }
    h.outage = false;
    h.failures++;
    h.firstFailedAt ??= deps.now();
    if (h.failures >= policy.attempts) {
      await park(h, record, failure);
      return 'parked';
    }
    throw new Error(`${definition.name}: ${describe(target, record)} failed (attempt ${h.failures} of ${policy.attempts} before it is parked): ${failure.message}`, { cause: failure });
  }

  // Only records of the partitions this instance owns are its work (see onMembership below).
  const heldOnOwned = () => [...held].filter(([partition]) => ownedPartitions.includes(partition));
  const isStuck = (h: Held, now: number) => now - h.since >= policy.stuckAfterMs && (h.inFlight || now - h.lastAttemptAt <= HELD_FRESH_MS);

  function stuckRecord(now: number): StuckRecord | null {
    let oldest: [number, Held] | null = null;
    for (const entry of heldOnOwned()) if (isStuck(entry[1], now) && (!oldest || entry[1].since < oldest[1].since)) oldest = entry;
    if (!oldest) return null;
    const [partition, h] = oldest;
    const seconds = seconds1(now - h.since);
    const why = h.inFlight ? 'its handler has not returned' : h.outage ? 'a store does not answer' : 'it keeps failing';
    return {
      reason: `held ${h.target.type ?? 'record'} ${h.target.streamId} (partition ${partition}, offset ${h.offset}) for ${seconds} s: ${why}`,
      since: new Date(h.since).toISOString(), eventId: h.target.id, streamId: h.target.streamId, partition, offset: h.offset, attempts: h.failures, lastError: h.lastError,
    };
  }

  // A stuck processor says so once per record, without waiting for someone to ask /readyz.
  const watch = setInterval(() => {
    const now = Date.now();
    for (const [partition, h] of held) {
      if (h.warned || !isStuck(h, now)) continue;
      h.warned = true;
      warn(`${definition.name}: stuck on one record for more than ${seconds1(policy.stuckAfterMs)} s; /readyz reports it`, {
        partition, offset: h.offset, eventId: h.target.id, streamId: h.target.streamId, inFlight: h.inFlight, outage: h.outage, attempts: h.failures, lastError: h.lastError,
      });
    }
  }, Math.max(50, Math.min(5000, Math.floor(policy.stuckAfterMs / 2))));
  watch.unref();

  let consumer: LogConsumer;
  try {
    await ensureParkedIndexes(deps.documents);
    await deps.log.ensureTopic(topic, EVENTS_TOPIC_PARTITIONS);
    const types = new Set(definition.eventTypes);
    const progressing = (handle: (record: LogRecord) => Promise<void>) => async (record: LogRecord) => {
      await handle(record);
      liveness.progress('handle');
    };
    consumer = await deps.log.consume({
      group,
      topic,
      // The embedded log passes over the other types without reading them; for a log that hands
      // them over anyway, the header check below skips them.
      types: definition.eventTypes,
      // Progress, not a handler's success: a failing handler elsewhere stays failing.
      onPassedOver: () => liveness.progress('passed over'),
      fromBeginning: true,
      // Every record handled (applied, skipped or parked) is progress.
      handle: progressing(async (record) => {
        // A record `relay parked retry` published again is for one group only.
        const retryFor = record.headers[RETRY_GROUP_HEADER];
        if (retryFor !== undefined && retryFor !== group) return;
        // The forwarder names each record's type in a header: most records are skipped unread
        // (a record without it, e.g. republished by hand, is decoded to find out).
        const named = record.headers['event-type'];
        if (named !== undefined && !types.has(named)) return;
        let event: StoredEvent;
        try {
          event = decodeEvent(record);
          if (typeof event?.id !== 'string' || typeof event.streamId !== 'string' || typeof event.type !== 'string') throw new Error('not an event: it lacks id, streamId or type');
        } catch (error) {
          // Nothing to retry: the record is parked under its place in the log.
          const target: Target = { id: `record:${record.topic}/${record.partition}/${record.offset}`, streamId: record.key, revision: null, position: null, type: named ?? null };
          const h = hold(record, target);
          h.failures = Math.max(h.failures, 1);
          return park(h, record, new Error(`undecodable record: ${errorOf(error).message}`));
        }
        if (!types.has(event.type)) return;
        const target: Target = { id: event.id, streamId: event.streamId, revision: event.revision, position: event.position ?? null, type: event.type };
        const outcome = await attempt(record, target, () => definition.handle(event, runtime, deps));
        // Applied after all: the parked record goes (a failure here retries the whole record).
        if (retryFor === group && outcome === 'applied') await resolveParked(deps.documents, parkedEventId(group, event.id));
      }),
      onHandlerError: (error) => deps.onError(error),
      onState: (state, error) => {
        if (state === 'running') liveness.succeeded('log');
        else if (state === 'recovering') liveness.failed(error, 'log');
        else liveness.stopped(error ?? new Error('its consumer stopped'));
      },
      onMembership: ({ change, memberId, partitions }) => {
        const owned = partitions.length === 0 ? 'no partitions' : `partitions ${partitions.join(', ')}`;
        const message = change === 'left' ? `${definition.name}: left consumer group ${group}`
          : change === 'joined' ? `${definition.name}: joined consumer group ${group}${partitions.length > 0 ? `, assigned ${owned}` : ''}`
          : `${definition.name}: assigned ${owned} of ${topic}`;
        ownedPartitions = change === 'left' ? [] : partitions;
        // A record held on a partition that moved away is another member's now: it is handled
        // there, and this instance would never let it go (apply or park it) here.
        for (const partition of held.keys()) if (!ownedPartitions.includes(partition)) held.delete(partition);
        deps.onInfo?.(message, { processor: definition.name, group, memberId, partitions });
      },
    });
  } catch (error) {
    clearInterval(watch);
    await runtime.stop?.();
    throw error;
  }
  liveness.reportStuck(() => stuckRecord(Date.now())?.reason ?? null);
  liveness.probeWaiting(async () => {
    if (heldOnOwned().length > 0) return true;
    if (ownedPartitions.length === 0) return false;
    const mine = new Set(ownedPartitions);
    const offsets = await deps.log.groupOffsets(topic, [group]);
    return offsets.some((o) => mine.has(o.partition) && BigInt(o.end) > BigInt(o.committed ?? o.start));
  });
  const parts = new Map<string, Liveness>([[definition.name, liveness]]);
  if (runtime.liveness) parts.set(`${definition.name}.dispatcher`, runtime.liveness);
  return {
    name: definition.name,
    status: () => ({ name: definition.name, group, stuck: stuckRecord(Date.now()), parked: parkedHere }),
    parts,
    stopClaiming: async () => runtime.stopClaiming?.(),
    async stop() {
      clearInterval(watch);
      // The consumer first: its in-flight handler may still need what the runtime holds.
      await consumer.stop();
      await runtime.stop?.();
      held.clear();
      liveness.stopped();
    },
  };
}
