// How an event of the event store travels as a record of the log's events topic, whoever puts
// it there: the forwarder publishing it (apps/pipeline/forwarder.ts), or the embedded log
// serving the event store's own rows as the topic (infra/sqlite/event-partitions.ts). Keyed by
// its stream, so that one stream's events stay in order in one partition; its type and id in
// headers, so that a group skips the types it does not handle without decoding them; the
// stored event as JSON.
import type { StoredEvent } from './ports/event-store.ts';
import type { OutgoingRecord } from './ports/log.ts';

/** Partitions of the events topic (where it is created; an existing topic keeps its count). */
export const EVENTS_TOPIC_PARTITIONS = 8;

/**
 * The largest event, as encodeEvent writes it (UTF-8 bytes), that the events topic must carry:
 * admission refuses an email whose event would be larger (apps/services/event-size.ts), and a
 * log must take a record of this size with its key, headers and framing (the Kafka adapter
 * creates topics with max.message.bytes 16 MiB). A send request is at most 10 MiB, its event up
 * to about 14 MiB (sealed bodies are base64: 4 bytes for 3), so only an email whose template
 * multiplied its variables can reach this.
 */
export const MAX_EVENT_BYTES = 15 * 1024 * 1024;

export const eventRecordHeaders = (type: string, id: string): Record<string, string> => ({ 'event-type': type, 'event-id': id });

export const encodeEvent = (event: StoredEvent): string => JSON.stringify(event);

export const eventRecord = (event: StoredEvent): OutgoingRecord => ({
  key: event.streamId,
  value: encodeEvent(event),
  headers: eventRecordHeaders(event.type, event.id),
});

/** A stored event's columns as the sqlite event store keeps them: data and metadata already JSON. */
export interface StoredEventText {
  id: string;
  streamId: string;
  revision: number;
  position: number;
  type: string;
  data: string;
  metadata: string;
  recordedAt: string;
}

/**
 * encodeEvent of the same event, written from the stored text without parsing data and
 * metadata (test/events-topic.unit.test.ts holds the two equal).
 */
export const encodeEventText = (e: StoredEventText): string =>
  `{"id":${JSON.stringify(e.id)},"streamId":${JSON.stringify(e.streamId)},"revision":${e.revision},"position":"${e.position}",` +
  `"type":${JSON.stringify(e.type)},"data":${e.data},"metadata":${e.metadata},"recordedAt":${JSON.stringify(e.recordedAt)}}`;
