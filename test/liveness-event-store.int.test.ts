// Liveness through an outage of the event store's reads (embedded, injected): reads of its
// global order, which the forwarder's subscription follows, fail for a while with the error
// sqlite gives for an I/O failure (infra/sqlite/read-fault.ts); appends and stream reads go on,
// so emails are admitted meanwhile. The subscription reads again with a growing back-off, the
// forwarder reports itself recovering (503 past the stuck threshold) and forwards everything
// from where it was once reads work again (test/contracts/liveness.contract.ts). The data
// directory has a log.db of its own, as one made before the log moved into the event store's
// file: there the forwarder copies the events (test/liveness-events-view.int.test.ts: the view).
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { livenessContract } from './contracts/liveness.contract.ts';

let failing = false;
/** The statements that read the events table in global order ($all): subscriptions, readAll, countAfter. */
const GLOBAL_ORDER = /FROM es_events WHERE position|max\(position\)/;

livenessContract({
  name: 'the event store\'s reads of its global order fail (injected)',
  async setUp(dataDir) {
    closeSync(openSync(join(dataDir, 'log.db'), 'a'));
    return {
      env: {},
      options: {
        readFault: (sql) => (failing && GLOBAL_ORDER.test(sql) ? Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR', errcode: 10 }) : null),
      },
    };
  },
  begin: async () => void (failing = true),
  end: async () => void (failing = false),
  tearDown: async () => void (failing = false),
  admitsDuring: true,
  notReadyDuring: ['forwarder'],
});
