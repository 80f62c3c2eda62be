// Webhooks on Kafka + a MongoDB-wire store (test/support/webhooks-suite.ts).
import { distributedEnv } from './support/delivery-smtp-suite.ts';
import { webhooksSuite } from './support/webhooks-suite.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS;
const mongoUrl = process.env.RELAY_MONGODB_URL;

webhooksSuite(
  'distributed',
  () => distributedEnv(brokers!, mongoUrl!),
  brokers && mongoUrl ? undefined : 'RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set (start them with: eval "$(bash infra/engines/engines.sh up)")',
);
