// The live processor of each projection (apps/services/projection-registry.ts): a consumer
// group that applies every email event to its read model, exactly as a rebuild does.
//
// At start it also finishes the catch-up a rebuild interrupted after its swap still owes the
// read model (apps/services/rebuild.ts): the events this processor applied to the old collection
// while the rebuild ran are lost with it, and the processor, past them, never sees them again.
// The operator may never run the rebuild again; every start of the processor does it, beside the
// consumer, which it may race: both write by compare-and-set under the stream revision guard.
import { setTimeout as sleep } from 'node:timers/promises';
import { resumeCatchUps } from '../services/rebuild.ts';
import type { StreamDocument, StreamProjection } from '../services/stream-projection.ts';
import { defineProcessor, type ProcessorDeps, type ProcessorRuntime } from './processor.ts';

/** The wait before trying an owed catch-up again after it failed (a store down). */
const RESUME_RETRY_MS = 10_000;

export const projectionProcessor = <D extends StreamDocument, Name extends string>(projection: StreamProjection<D, Name>) => defineProcessor({
  name: projection.processor,
  summary: projection.summary,
  eventTypes: projection.eventTypes,
  async init(deps) {
    await projection.ensureIndexes(deps.documents);
    return finishOwedCatchUps(projection as unknown as StreamProjection, deps);
  },
  async handle(event, _runtime, deps) {
    await projection.apply(deps.documents, deps.events, event);
    deps.onDebug?.('projected', { projection: projection.name, streamId: event.streamId, revision: event.revision });
  },
});

/** Runs the owed catch-ups in the background until they are done or the processor stops. */
function finishOwedCatchUps(projection: StreamProjection, deps: ProcessorDeps): ProcessorRuntime {
  const stopping = new AbortController();
  const { signal } = stopping;
  const running = (async () => {
    while (!signal.aborted) {
      try {
        const result = await resumeCatchUps(deps.documents, deps.events, projection, {
          signal,
          onResume: (record) => deps.onInfo?.(`${projection.processor}: finishing the catch-up rebuild ${record._id} owes ${projection.collection} after its swap`, {
            processor: projection.processor, scratch: record._id, after: record.catchUpAfter ?? null,
          }),
        });
        if (result.resumed.length > 0) {
          deps.onInfo?.(`${projection.processor}: finished the catch-up of ${result.resumed.join(', ')}: ${result.events} events read`, {
            processor: projection.processor, resumed: result.resumed, events: result.events, skipped: result.skipped,
          });
        }
        if (result.unrenamed.length > 0) {
          deps.onInfo?.(`${projection.processor}: ${result.unrenamed.join(', ')} recorded a swap not renamed yet (a rebuild under way, or one that died renaming): relay projections rebuild ${projection.name} finishes it`, {
            processor: projection.processor, unrenamed: result.unrenamed,
          });
        }
        return;
      } catch (error) {
        if (signal.aborted) return;
        // Still owed (its record stays): tried again, and at every start.
        deps.onError(new Error(`${projection.processor}: the catch-up an interrupted rebuild owes ${projection.collection} failed; trying again in ${RESUME_RETRY_MS / 1000} s`, { cause: error }));
        await sleep(RESUME_RETRY_MS, undefined, { signal }).catch(() => {});
      }
    }
  })();
  return {
    async stop() {
      stopping.abort();
      await running;
    },
  };
}
