// The event catalog: every event type Relay appends, generated from the event schemas (the
// TypeBox definitions in domain/*/events.ts, the source of the code's own types), as an
// AsyncAPI 3 document. Served at GET /v1/asyncapi.json and printed by `relay events schema`.
// For each type: its fields, its stream, its schema version and upcasting, the status it moves
// recipients to and how, and the timeline entries and webhook events it gives.
import { readFileSync } from 'node:fs';
import type { TSchema } from '@sinclair/typebox';
import { EMAIL_EVENT_MEANINGS, webhookTypesOf } from '../../domain/email/events-catalog.ts';
import { EMAIL_EVENT_DATA, EMAIL_STREAM_PREFIX, type EmailEventType } from '../../domain/email/events.ts';
import { EMAIL_SCHEMA_VERSIONS, EMAIL_UPCASTS } from '../../domain/email/upcast.ts';
import { SUPPRESSION_EVENT_DATA, SUPPRESSION_SCHEMA_VERSIONS, SUPPRESSION_STREAM_PREFIX } from '../../domain/suppressions/events.ts';
import { SUPPRESSION_UPCASTS } from '../../domain/suppressions/upcast.ts';
import { RecipientsChargedDataSchema, USAGE_STREAM_PREFIX } from '../../domain/usage/quota.ts';
import { USAGE_SCHEMA_VERSIONS } from '../../domain/usage/upcast.ts';
import { TOPIC_CLEANUP_POLICY, TOPIC_MAX_MESSAGE_BYTES, TOPIC_RETENTION_BYTES, TOPIC_RETENTION_MS } from '../../infra/kafka/topic-config.ts';
import { EVENTS_TOPIC_PARTITIONS } from '../pipeline/topics.ts';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

export interface CatalogEntry {
  type: string;
  stream: string;
  summary: string;
  schemaVersion: number;
  /** How older versions are read (domain/*\/upcast.ts). */
  upcasting: string;
  data: TSchema;
  /** What it does to recipient statuses (email streams only). */
  statuses?: { gives: readonly string[]; merge: string };
  timeline?: readonly string[];
  webhooks?: readonly string[];
}

/** What an email event's addresses become when read (domain/email/upcast.ts). */
const CANONICAL_ON_READ = 'Addresses are read in today\'s canonical form (events written before 2026-11-28 may hold a quoted local part as written, e.g. "ann"@example.org for ann@example.org).';

const upcastingOf = (version: number, steps: ReadonlyArray<{ from: number; change: string }>, onRead = '') =>
  steps.length === 0
    ? `Version ${version} is the only one so far: stored data is read as it is${onRead ? `, but for this: ${onRead}` : '.'} A version above ${version} (written by a newer Relay) is not read: it becomes UnrecognizedEvent and changes nothing.`
    : steps.map((s) => `from version ${s.from}: ${s.change}`).join('; ');

/** Every event type that can be appended, with what it means. */
export function eventCatalog(): CatalogEntry[] {
  const email = (Object.keys(EMAIL_EVENT_DATA) as EmailEventType[]).map((type): CatalogEntry => ({
    type,
    stream: `${EMAIL_STREAM_PREFIX}<emailId>`,
    summary: EMAIL_EVENT_MEANINGS[type].summary,
    schemaVersion: EMAIL_SCHEMA_VERSIONS[type],
    upcasting: upcastingOf(EMAIL_SCHEMA_VERSIONS[type], EMAIL_UPCASTS[type], type === 'DeliveryClaimed' || type === 'DeliveryTransactionStarted' ? '' : CANONICAL_ON_READ),
    data: EMAIL_EVENT_DATA[type],
    statuses: { gives: EMAIL_EVENT_MEANINGS[type].statuses, merge: EMAIL_EVENT_MEANINGS[type].merge },
    timeline: EMAIL_EVENT_MEANINGS[type].timeline,
    webhooks: webhookTypesOf(type),
  }));
  const usage: CatalogEntry = {
    type: 'RecipientsCharged',
    stream: `${USAGE_STREAM_PREFIX}<workspaceId>-<YYYY-MM>`,
    summary: "An admitted email's recipients charged to its workspace's monthly allowance (and its development key's).",
    schemaVersion: USAGE_SCHEMA_VERSIONS.RecipientsCharged,
    upcasting: upcastingOf(USAGE_SCHEMA_VERSIONS.RecipientsCharged, []),
    data: RecipientsChargedDataSchema,
  };
  const suppressions = (Object.keys(SUPPRESSION_EVENT_DATA) as Array<keyof typeof SUPPRESSION_EVENT_DATA>).map((type): CatalogEntry => ({
    type,
    stream: `${SUPPRESSION_STREAM_PREFIX}<workspaceId>`,
    summary: type === 'RecipientSuppressed'
      ? "An address was added to its workspace's suppression list: by a user, or by a hard bounce or complaint."
      : "An address was removed from its workspace's suppression list: by a user; or an addition (by a user, a hard bounce or a complaint) " +
        'whose entry was removed while it was being recorded gives way to that removal, naming its own cause and reason.',
    schemaVersion: SUPPRESSION_SCHEMA_VERSIONS[type],
    upcasting: upcastingOf(SUPPRESSION_SCHEMA_VERSIONS[type], SUPPRESSION_UPCASTS[type]),
    data: SUPPRESSION_EVENT_DATA[type],
  }));
  return [...email, usage, ...suppressions];
}

/** A TypeBox schema as plain JSON Schema (its symbols dropped). */
const plain = (schema: TSchema): Record<string, unknown> => JSON.parse(JSON.stringify(schema));

const POSITION = {
  type: 'string',
  description: "The event's place in the event store's global order, opaque: pass it back as `relay events --after` / `--from`. " +
    'Embedded store: a decimal integer ("1", "2", …; gaps are possible). EventStoreDB: "<commit>/<prepare>" of its transaction log.',
};

function envelopeOf(entry: CatalogEntry): Record<string, unknown> {
  return {
    type: 'object',
    description: 'The record value: the event as the event store holds it (JSON).',
    required: ['id', 'streamId', 'revision', 'position', 'type', 'data', 'metadata', 'recordedAt'],
    properties: {
      id: { type: 'string', format: 'uuid', description: 'The event id: unique; a redelivered record has the same.' },
      streamId: { type: 'string', description: `The stream: ${entry.stream}.` },
      revision: { type: 'integer', minimum: 0, description: "The event's place in its stream (0, 1, 2, …)." },
      position: POSITION,
      type: { type: 'string', const: entry.type },
      data: plain(entry.data),
      metadata: {
        type: 'object',
        required: ['correlationId', 'causationId', 'schemaVersion'],
        properties: {
          correlationId: { type: 'string', description: 'The outside request (HTTP request id, CLI run) that started the chain.' },
          causationId: { type: 'string', description: 'The immediate cause: the request, or the event a processor reacted to.' },
          schemaVersion: { type: 'integer', minimum: 1, description: `The data's version; this Relay writes ${entry.schemaVersion}.` },
        },
      },
      recordedAt: { type: 'string', format: 'date-time', description: 'When the event store recorded it.' },
    },
  };
}

function descriptionOf(entry: CatalogEntry): string {
  const lines = [entry.summary, '', `Stream: \`${entry.stream}\`. Schema version: ${entry.schemaVersion}. Upcasting: ${entry.upcasting}`];
  if (entry.statuses) {
    const how = { set: 'set on every recipient', replace: 'replaces the status of the recipients it names', only_up: 'moves the recipient it names only to a status of higher precedence', none: 'changes no status' }[entry.statuses.merge as 'set' | 'replace' | 'only_up' | 'none'];
    lines.push(`Recipient statuses: ${entry.statuses.gives.join(', ') || 'none'} (${how}; docs/event-status-rules.md).`);
    lines.push(`Timeline entries: ${entry.timeline!.join(', ') || 'none'}. Webhook events: ${entry.webhooks!.join(', ') || 'none'}.`);
  }
  return lines.join('\n');
}

/** The catalog as an AsyncAPI 3.0 document of the `<namespace>.events` topic. */
export function asyncApiDocument(): Record<string, unknown> {
  const catalog = eventCatalog();
  const messages = Object.fromEntries(catalog.map((entry) => [entry.type, {
    name: entry.type,
    title: entry.type,
    summary: entry.summary,
    description: descriptionOf(entry),
    contentType: 'application/json',
    headers: {
      type: 'object',
      required: ['event-type', 'event-id'],
      properties: {
        'event-type': { type: 'string', const: entry.type, description: 'The event type, so consumers skip records without decoding them.' },
        'event-id': { type: 'string', description: 'The event id.' },
      },
    },
    payload: envelopeOf(entry),
    bindings: { kafka: { key: { type: 'string', description: `The stream id (${entry.stream}): one stream's events keep their order in one partition.` }, bindingVersion: '0.5.0' } },
    'x-relay': {
      stream: entry.stream,
      schemaVersion: entry.schemaVersion,
      upcasting: entry.upcasting,
      ...(entry.statuses ? { statuses: entry.statuses.gives, merge: entry.statuses.merge, timeline: entry.timeline, webhooks: entry.webhooks } : {}),
    },
  }]));
  const refs = catalog.map((entry) => ({ $ref: `#/channels/events/messages/${entry.type}` }));
  return {
    asyncapi: '3.0.0',
    info: {
      title: 'Relay events',
      version: VERSION,
      description:
        'Every event Relay appends to its event store, as the forwarder publishes it to the Kafka topic `<namespace>.events` ' +
        '(RELAY_LOG_NAMESPACE, default relay) and as `relay events` and `relay events export` print it. Records are keyed by stream id: ' +
        'the events of one email keep their order; delivery is at least once, so a consumer may see a record again (same event id, ' +
        'same revision) and must apply it once. Relay creates the topic keeping every event (retention.ms and retention.bytes -1, ' +
        'cleanup.policy delete: the channel\'s Kafka binding), so a consumer group of your own reads the whole history from the beginning. ' +
        'Generated from the event schemas; see docs/analysing-events.md.',
    },
    defaultContentType: 'application/json',
    servers: {
      kafka: { host: 'localhost:9092', protocol: 'kafka', description: 'The brokers of RELAY_KAFKA_BROKERS (distributed mode).' },
    },
    channels: {
      events: {
        address: '{namespace}.events',
        title: 'Every event, in the order the forwarder read them',
        parameters: { namespace: { description: 'RELAY_LOG_NAMESPACE', default: 'relay' } },
        messages: Object.fromEntries(catalog.map((entry) => [entry.type, { $ref: `#/components/messages/${entry.type}` }])),
        // The topic as Relay creates it (infra/kafka/topic-config.ts): every event kept,
        // so that a group of an analyst's own reads the whole history from the beginning. A topic
        // that existed before keeps its own configuration, and Relay warns of what differs.
        bindings: {
          kafka: {
            partitions: EVENTS_TOPIC_PARTITIONS,
            topicConfiguration: {
              'cleanup.policy': [TOPIC_CLEANUP_POLICY],
              'retention.ms': TOPIC_RETENTION_MS,
              'retention.bytes': TOPIC_RETENTION_BYTES,
              'max.message.bytes': TOPIC_MAX_MESSAGE_BYTES,
            },
            bindingVersion: '0.5.0',
          },
        },
      },
    },
    operations: {
      consumeEvents: {
        action: 'receive',
        title: 'Consume the events with a consumer group of your own',
        channel: { $ref: '#/channels/events' },
        messages: refs,
      },
    },
    components: { messages },
  };
}
