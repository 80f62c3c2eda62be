// What a processor is: a consumer group on the events topic that reacts to some event types.
// A processor file exports one definition; `startProcessor` does the rest the same way for
// every processor (topic, group, filtering by type before decoding, upcasting, causation).
import type { RelayConfig } from '../../infra/config.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore, StoredEvent } from '../../infra/ports/event-store.ts';
import type { Log, LogConsumer } from '../../infra/ports/log.ts';
import type { Services } from '../services/services.ts';
import { EVENTS_TOPIC_PARTITIONS, decodeEvent, eventsTopic, groupOf } from './topics.ts';

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
}

/** What `init` may hand back: the processor's own working state, and how to stop what it started. */
export interface ProcessorRuntime {
  stop?(): Promise<void>;
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
   * crash or rebalance), so it must be idempotent. A throw retries the event, holding its
   * partition meanwhile, so slow or failing work belongs in the processor's own schedule.
   */
  handle(event: StoredEvent, runtime: R, deps: ProcessorDeps): Promise<void>;
}

export const defineProcessor = <Name extends string, R extends ProcessorRuntime>(definition: ProcessorDefinition<Name, R>) => definition;

export interface RunningProcessor {
  name: string;
  stop(): Promise<void>;
}

export async function startProcessor<R extends ProcessorRuntime>(definition: ProcessorDefinition<string, R>, deps: ProcessorDeps): Promise<RunningProcessor> {
  const runtime = (definition.init ? await definition.init(deps) : {}) as R;
  const topic = eventsTopic(deps.config.logNamespace);
  let consumer: LogConsumer;
  try {
    await deps.log.ensureTopic(topic, EVENTS_TOPIC_PARTITIONS);
    const types = new Set(definition.eventTypes);
    consumer = await deps.log.consume({
      group: groupOf(deps.config.logNamespace, definition.name),
      topic,
      fromBeginning: true,
      handle: async (record) => {
        // The forwarder names each record's type in a header: most records are skipped unread
        // (a record without it, e.g. republished by hand, is decoded to find out).
        const named = record.headers['event-type'];
        if (named !== undefined && !types.has(named)) return;
        const event = decodeEvent(record);
        if (!types.has(event.type)) return;
        await definition.handle(event, runtime, deps);
      },
      onHandlerError: (error) => deps.onError(error),
    });
  } catch (error) {
    await runtime.stop?.();
    throw error;
  }
  return {
    name: definition.name,
    async stop() {
      // The consumer first: its in-flight handler may still need what the runtime holds.
      await consumer.stop();
      await runtime.stop?.();
    },
  };
}
