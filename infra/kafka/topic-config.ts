// The configuration the Kafka log (infra/kafka/log.ts) gives the topics it creates, Relay's
// events topic among them, and that the event catalog states in its Kafka channel binding
// (apps/services/event-catalog.ts). No kafkajs here: the catalog imports it in every mode.
//
// The events topic is what analysts consume with groups of their own, from the beginning
// (docs/analysing-events.md), so it keeps every record, as the event store does: no time bound
// (retention.ms -1, where Kafka's default deletes after 7 days), no size bound, and deletion
// (never compaction, which would keep only the last event of each stream, the record key) as
// its cleanup policy, set on the topic so that no broker default changes it. Sealed bodies in
// the events are unreadable after seven days anyway: their keys are destroyed.

/**
 * max.message.bytes of the topics the log creates: an email's event may be up to
 * MAX_EVENT_BYTES (15 MiB, infra/events-topic.ts), and a record adds its key, headers and
 * framing; Kafka's 1 MB default would stop the forwarder at the first large email.
 */
export const TOPIC_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/** Records are kept for ever: -1 lifts Kafka's time bound. */
export const TOPIC_RETENTION_MS = -1;

/** Nor is a partition's size bounded. */
export const TOPIC_RETENTION_BYTES = -1;

/** Old records are never deleted (the two bounds above) nor compacted. */
export const TOPIC_CLEANUP_POLICY = 'delete';

/** The topic configuration entries the log creates a topic with. */
export function topicConfigEntries(maxMessageBytes: number): Array<{ name: string; value: string }> {
  return [
    { name: 'max.message.bytes', value: String(maxMessageBytes) },
    { name: 'retention.ms', value: String(TOPIC_RETENTION_MS) },
    { name: 'retention.bytes', value: String(TOPIC_RETENTION_BYTES) },
    { name: 'cleanup.policy', value: TOPIC_CLEANUP_POLICY },
  ];
}
