// The pipeline thread's side (./pipeline-thread.ts): starts its parts as a process of their
// own would, without an HTTP server, and reports to the main thread.
import { parentPort, workerData } from 'node:worker_threads';
import type { FromPipeline, PipelineThreadData, ToPipeline } from './pipeline-thread.ts';
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
// among it) goes in the snapshot the main thread asks for at each scrape.
const starting = startRelay(config, parts, { processorPolicy, inThread: true });
let relay: RunningRelay | null = null;
let stopAsked = false;
// Listened to from the start: a stop may come while the parts still start.
port.on('message', (message: ToPipeline) => {
  if (message.kind === 'stop') {
    stopAsked = true;
    if (relay) void relay.stop().finally(stopped);
    else starting.abandon(stopped);
  } else if (!relay) {
    // Asked only once the thread said it is ready.
  } else if (message.kind === 'parts-status') {
    relay.liveness.statuses().then((parts) => send({ kind: 'parts-status', id: message.id, parts }));
  } else if (message.kind === 'metrics') {
    send({ kind: 'metrics', id: message.id, snapshot: relay.metrics.registry.snapshot() });
  }
});
try {
  relay = await starting;
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
