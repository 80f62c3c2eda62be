// The pipeline thread's side (./pipeline-thread.ts): starts its parts as a process of their
// own would, without an HTTP server, and reports to the main thread.
import { parentPort, workerData } from 'node:worker_threads';
import type { FromPipeline, PipelineThreadData, ToPipeline } from './pipeline-thread.ts';
import { startRelay } from '../relay.ts';

const port = parentPort!;
const { config, parts, processorPolicy } = workerData as PipelineThreadData;
const send = (message: FromPipeline) => port.postMessage(message);

try {
  // Nothing is reported per turn: what /metrics shows of this thread (its appended events
  // among it) goes in the snapshot the main thread asks for at each scrape.
  const relay = await startRelay(config, parts, { processorPolicy, inThread: true });
  port.on('message', (message: ToPipeline) => {
    if (message.kind === 'parts-status') {
      relay.liveness.statuses().then((parts) => send({ kind: 'parts-status', id: message.id, parts }));
    } else if (message.kind === 'metrics') {
      send({ kind: 'metrics', id: message.id, snapshot: relay.metrics.registry.snapshot() });
    } else if (message.kind === 'stop') {
      relay.stop().finally(() => {
        send({ kind: 'stopped' });
        port.close();
      });
    }
  });
  send({ kind: 'ready' });
} catch (error) {
  send({ kind: 'failed', message: (error as Error).message, stack: (error as Error).stack });
  port.close();
}
