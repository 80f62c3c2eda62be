// Feedback (bounces and complaints) on Kafka + a MongoDB-wire store (test/support/feedback-suite.ts).
import { distributedEnv } from './support/delivery-smtp-suite.ts';
import { feedbackSuite } from './support/feedback-suite.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS;
const mongoUrl = process.env.RELAY_MONGODB_URL;

feedbackSuite(
  'distributed',
  () => distributedEnv(brokers!, mongoUrl!),
  brokers && mongoUrl ? undefined : 'RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set (start them with: eval "$(bash infra/engines/engines.sh up)")',
);
