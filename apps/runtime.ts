// Chooses the adapters behind each port from configuration. Nothing else in the code base
// knows which ones run: an unset URL means the embedded (node:sqlite) adapter, one file per
// store under RELAY_DATA_DIR, so that even embedded no write spans two stores.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { RelayConfig } from '../infra/config.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import type { Log } from '../infra/ports/log.ts';

export interface Stores {
  events: EventStore;
  documents: DocumentStore;
  log: Log;
  /** Which adapter serves each port, for logs and /readyz. */
  kinds: { events: string; documents: string; log: string };
  close(): Promise<void>;
}

export async function openStores(config: RelayConfig): Promise<Stores> {
  mkdirSync(config.dataDir, { recursive: true });
  const opened: Array<{ close(): Promise<void> }> = [];
  try {
    const events = await openEventStore(config);
    opened.push(events.store);
    const documents = await openDocumentStore(config);
    opened.push(documents.store);
    const log = await openLog(config);
    opened.push(log.store);
    return {
      events: events.store,
      documents: documents.store,
      log: log.store,
      kinds: { events: events.kind, documents: documents.kind, log: log.kind },
      close: async () => {
        for (const store of opened.reverse()) await store.close().catch(() => {});
      },
    };
  } catch (error) {
    for (const store of opened.reverse()) await store.close().catch(() => {});
    throw error;
  }
}

async function openEventStore(config: RelayConfig): Promise<{ store: EventStore; kind: string }> {
  if (config.eventStoreUrl) {
    const { EsdbEventStore } = await import('../infra/esdb/event-store.ts');
    return { store: EsdbEventStore.connect(config.eventStoreUrl), kind: 'eventstoredb' };
  }
  const { SqliteEventStore } = await import('../infra/sqlite/event-store.ts');
  return { store: new SqliteEventStore(join(config.dataDir, 'events.db')), kind: 'sqlite' };
}

async function openDocumentStore(config: RelayConfig): Promise<{ store: DocumentStore; kind: string }> {
  if (config.mongodbUrl) {
    const { MongoDocumentStore } = await import('../infra/mongodb/document-store.ts');
    return { store: await MongoDocumentStore.connect(config.mongodbUrl), kind: 'mongodb' };
  }
  const { SqliteDocumentStore } = await import('../infra/sqlite/document-store.ts');
  return { store: new SqliteDocumentStore(join(config.dataDir, 'documents.db')), kind: 'sqlite' };
}

async function openLog(config: RelayConfig): Promise<{ store: Log; kind: string }> {
  if (config.kafkaBrokers) {
    const { KafkaLog } = await import('../infra/kafka/log.ts');
    return { store: await KafkaLog.connect(config.kafkaBrokers), kind: 'kafka' };
  }
  const { SqliteLog } = await import('../infra/sqlite/log.ts');
  return { store: new SqliteLog(join(config.dataDir, 'log.db')), kind: 'sqlite' };
}
