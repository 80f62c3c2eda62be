// Liveness through an outage of the events topic's reads in the embedded default, where the log
// serves that topic from the event store's rows (infra/sqlite/event-partitions.ts): the
// consumer groups' reads of it fail for a while with the error sqlite gives for an I/O failure
// (infra/sqlite/read-fault.ts); admissions go on. Each group reads again with a growing
// back-off from its committed offsets, reports itself recovering (503 past the stuck
// threshold), and handles everything once reads work again (test/contracts/liveness.contract.ts).
import { livenessContract } from './contracts/liveness.contract.ts';

let failing = false;
/** The statements that read the view: its partitions' ends and records. */
const VIEW_READS = /es_partition_ends|log_partition/;

livenessContract({
  name: 'the reads of the events topic, a view of the event store, fail (injected)',
  async setUp() {
    return {
      env: {},
      options: {
        readFault: (sql) => (failing && VIEW_READS.test(sql) ? Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR', errcode: 10 }) : null),
      },
    };
  },
  begin: async () => void (failing = true),
  end: async () => void (failing = false),
  tearDown: async () => void (failing = false),
  admitsDuring: true,
  notReadyDuring: ['projector', 'sender'],
});
