// The stores of a Relay that already exists, for the commands that read or maintain one
// (events, parked, sites, webhooks, outbox, projections, and the management commands on a
// workspace or domain): they never create a store. Opening the embedded stores creates the
// data directory and its files, so a mistyped RELAY_DATA_DIR would otherwise get an empty Relay
// and the command would report "nothing" with exit 0. `relay start`, the part commands,
// `setup` and `user create` make the stores (openStores).
import { existsSync } from 'node:fs';
import type { RelayConfig } from '../../infra/config.ts';
import { embeddedFiles, openStores, type Stores, type StoresWithoutLog } from '../runtime.ts';

/** Which embedded stores a command reads: each must exist unless its URL points elsewhere. */
export type StoreNeed = 'events' | 'documents';

/**
 * The stores, or null after saying on stderr why there is none to read (exit 1 for the
 * caller). A store set by URL (RELAY_EVENTSTORE_URL, RELAY_MONGODB_URL) is not checked here.
 * The log is opened only for `{ log: true }` (what publishes to it): a command that does not
 * use it must not wait for, or fail on, Kafka brokers that are down.
 */
export function openExistingStores(config: RelayConfig, needs: StoreNeed[], options: { log: true }): Promise<Stores | null>;
export function openExistingStores(config: RelayConfig, needs?: StoreNeed[]): Promise<StoresWithoutLog | null>;
export async function openExistingStores(config: RelayConfig, needs: StoreNeed[] = ['events', 'documents'], options: { log?: true } = {}): Promise<Stores | StoresWithoutLog | null> {
  const files = embeddedFiles(config.dataDir);
  const missing = (need: StoreNeed) => (need === 'events' ? !config.eventStoreUrl && !existsSync(files.events) : !config.mongodbUrl && !existsSync(files.documents));
  const absent = needs.find(missing);
  if (absent) {
    const [store, variable] = absent === 'events' ? ['event store', 'RELAY_EVENTSTORE_URL'] : ['document store', 'RELAY_MONGODB_URL'];
    console.error(`relay: no ${store} in ${config.dataDir}: RELAY_DATA_DIR must name the data directory of a Relay (it holds relay.db, or events.db and documents.db), or set ${variable}`);
    return null;
  }
  return options.log ? openStores(config) : openStores(config, { withoutLog: true });
}
