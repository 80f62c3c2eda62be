// The log topic every event store event is forwarded to, keyed by stream id so that one
// email's events stay in order in one partition.
import type { StoredEvent } from '../../infra/ports/event-store.ts';
import type { LogRecord } from '../../infra/ports/log.ts';

export const EVENTS_TOPIC = 'relay.events';
export const EVENTS_TOPIC_PARTITIONS = 8;

export const encodeEvent = (event: StoredEvent): string => JSON.stringify(event);
export const decodeEvent = (record: LogRecord): StoredEvent => JSON.parse(record.value) as StoredEvent;
