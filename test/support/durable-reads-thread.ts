// Worker for test/durable-reads-threads.int.test.ts: the event store of another thread on the
// file the test's main thread writes (as `relay start`'s pipeline thread opens it). Its syncs
// wait for the test's word ('release'); it tells the test when one is asked for ('sync') and
// what its subscription delivers ('delivered').
import { parentPort, workerData } from 'node:worker_threads';
import { SqliteEventStore } from '../../infra/sqlite/event-store.ts';

const releases: Array<() => void> = [];
let released = false;
const store = new SqliteEventStore(workerData.file as string, {
  pollIntervalMs: 10,
  commitHold: async ({ stage }) => {
    if (stage !== 'sync' || released) return;
    parentPort!.postMessage({ kind: 'sync' });
    await new Promise<void>((resolve) => releases.push(resolve));
  },
});
const subscription = store.subscribeAll({}, async (event) => {
  parentPort!.postMessage({ kind: 'delivered', streamId: event.streamId });
});
parentPort!.on('message', async (message: string) => {
  if (message === 'release') {
    released = true;
    for (const release of releases.splice(0)) release();
    return;
  }
  await subscription.stop();
  await store.close();
  parentPort!.close();
});
parentPort!.postMessage({ kind: 'ready' });
