// What route plugins are given: the ports, the services and the configuration, never the adapters.
import type { RelayConfig } from '../../infra/config.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import type { RelayMetrics } from '../relay-metrics.ts';
import type { Services } from '../services/services.ts';

export interface ApiContext {
  config: RelayConfig;
  events: EventStore;
  documents: DocumentStore;
  services: Services;
  /** Current time; tests move it to cross windows and months. */
  now: () => Date;
  /** Readiness of the parts this process runs beyond its stores (e.g. in-process processors). */
  readiness: () => Promise<Record<string, boolean>>;
  /** The process's metrics (apps/relay-metrics.ts): one registry per process, made where the process is composed. */
  metrics: RelayMetrics;
}
