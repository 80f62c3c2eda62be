// The pipeline thread's side (./pipeline-thread.ts): starts its parts as a process of their
// own would, without an HTTP server, and reports to the main thread.
import { parentPort, workerData } from 'node:worker_threads';
import type { FromPipeline, PipelineThreadData, ThreadStore, ToPipeline } from './pipeline-thread.ts';
import { answerWithin, followStoreWrites, PROBE_TIMEOUT_MS, type JudgedStore } from '../liveness.ts';
import { StartAbandonedError } from '../process-lifecycle.ts';
import { startRelay, type RunningRelay } from '../relay.ts';

const port = parentPort!;
const { config, parts, processorPolicy } = workerData as PipelineThreadData;
const send = (message: FromPipeline) => port.postMessage(message);
const stopped = () => {
  send({ kind: 'stopped' });
  port.close();
};

// Nothing is reported per turn: what /metrics shows of this thread (its appended events
// among it) goes in the snapshot the main thread asks for at each scrape. Only its stores'
// write failures are told unasked, as they change.
const starting = startRelay(config, parts, { processorPolicy, inThread: true });
let relay: RunningRelay | null = null;
let stopAsked = false;
let stopFollowing = () => {};
const storesOf = ({ stores }: RunningRelay): Record<ThreadStore, JudgedStore> => ({ event_store: stores.events, document_store: stores.documents });
// Listened to from the start: a stop may come while the parts still start.
port.on('message', (message: ToPipeline) => {
  if (message.kind === 'stop') {
    stopAsked = true;
    stopFollowing();
    if (relay) void relay.stop().finally(stopped);
    else starting.abandon(stopped);
  } else if (!relay) {
    // Asked only once the thread said it is ready.
  } else if (message.kind === 'stop-claiming') {
    void relay.stopClaiming();
  } else if (message.kind === 'parts-status') {
    relay.liveness.statuses().then((parts) => send({ kind: 'parts-status', id: message.id, parts }));
  } else if (message.kind === 'metrics') {
    send({ kind: 'metrics', id: message.id, snapshot: relay.metrics.registry.snapshot() });
  } else if (message.kind === 'store-ping') {
    // Within the main thread's wait for an answer (pipeline-thread.ts), which judges the thread by it.
    answerWithin(storesOf(relay)[message.store].ping(), PROBE_TIMEOUT_MS, () => false).then((ready) => send({ kind: 'store-ping', id: message.id, ready }));
  }
});
try {
  relay = await starting;
  // A failure of a write made while the parts started is still remembered: told at the first look.
  if (!stopAsked) stopFollowing = followStoreWrites(storesOf(relay), (store, failure) => send({ kind: 'store-writes', store: store as ThreadStore, failure }));
  send({ kind: 'ready' });
  // Asked to stop while its last part started: it finished starting anyway.
  if (stopAsked) void relay.stop().finally(stopped);
} catch (error) {
  // A start given up has said `stopped` already.
  if (!(error instanceof StartAbandonedError)) {
    send({ kind: 'failed', message: (error as Error).message, stack: (error as Error).stack });
    port.close();
  }
}
