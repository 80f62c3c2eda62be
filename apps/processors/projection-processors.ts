// The live processor of each projection (apps/services/projection-registry.ts): a consumer
// group that applies every email event to its read model, exactly as a rebuild does.
import type { StreamDocument, StreamProjection } from '../services/stream-projection.ts';
import { defineProcessor } from './processor.ts';

export const projectionProcessor = <D extends StreamDocument, Name extends string>(projection: StreamProjection<D, Name>) => defineProcessor({
  name: projection.processor,
  summary: projection.summary,
  eventTypes: projection.eventTypes,
  async init(deps) {
    await projection.ensureIndexes(deps.documents);
    return {};
  },
  async handle(event, _runtime, deps) {
    await projection.apply(deps.documents, deps.events, event);
    deps.onDebug?.('projected', { projection: projection.name, streamId: event.streamId, revision: event.revision });
  },
});
