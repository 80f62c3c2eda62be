// The send/read contract (test/conformance) in distributed mode: two API instances, each
// with its own connections and caches, over real Kafka and a MongoDB-compatible store
// (FerretDB from infra/engines) sharing one event store. Requests alternate between the
// instances, so rate limits, quotas and idempotency are exercised across processes.
import { runConformance } from './conformance/index.ts';
import { harnessRef, startDistributedHarness } from './conformance/harness.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS;
const mongoUrl = process.env.RELAY_MONGODB_URL;

runConformance(
  'distributed',
  harnessRef(() => startDistributedHarness(brokers!, mongoUrl!)),
  brokers && mongoUrl ? undefined : 'RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set (start them with: eval "$(bash infra/engines/engines.sh up)")',
);
