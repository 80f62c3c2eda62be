// What route plugins are given: the ports, the services and the configuration, never the adapters.
import type { RelayConfig } from '../../infra/config.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import type { JudgedStore, PartReport } from '../liveness.ts';
import type { RelayMetrics } from '../relay-metrics.ts';
import type { AdmissionFlow } from '../services/admission-flow.ts';
import type { Services } from '../services/services.ts';

export interface ApiContext {
  config: RelayConfig;
  events: EventStore;
  documents: DocumentStore;
  services: Services;
  /** Current time; tests move it to cross windows and months. */
  now: () => Date;
  /**
   * Readiness of what this process runs beyond its stores: `checks` (each long-running part,
   * the log) and each part's liveness report (apps/liveness.ts).
   */
  readiness: () => Promise<Readiness>;
  /**
   * The event and document stores as /readyz judges them where another thread writes to them on
   * connections of its own (`relay start`'s pipeline thread: apps/liveness.ts withThreadWrites);
   * absent: `events` and `documents` themselves.
   */
  judgedStores?: { events: JudgedStore; documents: JudgedStore };
  /** The process's metrics (apps/relay-metrics.ts): one registry per process, made where the process is composed. */
  metrics: RelayMetrics;
  /** Holds sends while the pipeline is too far behind (apps/services/admission-flow.ts); absent: sends never wait. */
  admissionFlow?: AdmissionFlow;
}

export interface Readiness {
  checks: Record<string, boolean>;
  parts: Record<string, PartReport>;
}
