// Liveness through an outage of the log: a Kafka broker of this test's own (never the shared
// one) is halted and started again on its data, while the API keeps admitting emails into the
// embedded event store. The forwarder and the consumer groups come back by themselves
// (test/contracts/liveness.contract.ts says what is checked).
import { livenessContract } from './contracts/liveness.contract.ts';
import { startPrivateKafka, type PrivateEngine } from './support/private-engine.ts';

let kafka: PrivateEngine | null = null;

livenessContract({
  name: 'the Kafka broker goes away and comes back',
  async setUp() {
    kafka = await startPrivateKafka();
    return { env: { RELAY_KAFKA_BROKERS: kafka.address } };
  },
  begin: () => kafka!.halt(),
  end: () => kafka!.resume(),
  tearDown: async () => {
    await kafka?.stop();
    kafka = null;
  },
  admitsDuring: true,
  notReadyDuring: ['log', 'forwarder'],
}, process.env.RELAY_KAFKA_BROKERS ? undefined : 'the engines are not installed here (CI starts them: eval "$(bash infra/engines/engines.sh up)"); this test starts a Kafka broker of its own from the same install');
