// Delivery through a smarthost on Kafka + a MongoDB-wire store (test/support/delivery-smtp-suite.ts).
import { deliverySmtpSuite, distributedEnv } from './support/delivery-smtp-suite.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS;
const mongoUrl = process.env.RELAY_MONGODB_URL;

deliverySmtpSuite(
  'distributed',
  () => distributedEnv(brokers!, mongoUrl!),
  brokers && mongoUrl ? undefined : 'RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set (start them with: eval "$(bash infra/engines/engines.sh up)")',
);
