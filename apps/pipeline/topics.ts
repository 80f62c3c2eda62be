// The log topic every event store event reaches (infra/events-topic.ts: how it travels there),
// keyed by stream id so that one email's events stay in order in one partition.
import type { StoredEvent } from '../../infra/ports/event-store.ts';
import type { LogRecord } from '../../infra/ports/log.ts';
export { EVENTS_TOPIC_PARTITIONS, encodeEvent } from '../../infra/events-topic.ts';

/** The events topic of a namespace (RELAY_LOG_NAMESPACE, default "relay"). */
export const eventsTopic = (namespace: string): string => `${namespace}.events`;
/** The consumer group of a processor in a namespace. */
export const groupOf = (namespace: string, processor: string): string => `${namespace}.${processor}`;

export const decodeEvent = (record: LogRecord): StoredEvent => JSON.parse(record.value) as StoredEvent;
