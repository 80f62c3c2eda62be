// No event stops a consumer group, on Kafka + a MongoDB-wire store (test/support/poison-suite.ts).
import { distributedEnv } from './support/delivery-smtp-suite.ts';
import { poisonSuite } from './support/poison-suite.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS;
const mongoUrl = process.env.RELAY_MONGODB_URL;

poisonSuite(
  'distributed',
  () => distributedEnv(brokers!, mongoUrl!),
  brokers && mongoUrl ? undefined : 'RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set (start them with: eval "$(bash infra/engines/engines.sh up)")',
);
