// A fix for kafkajs 2.2.4 (its last release), applied once when the Kafka adapter loads.
//
// Each broker connection's request queue re-arms a "check the pending requests" timer even
// when nothing is pending: RequestQueue.scheduleCheckPendingRequests passes
// `throttledUntil - Date.now()` to setTimeout, and throttledUntil is -1 unless the broker
// throttles, so the delay is about minus the epoch. Node runs it after 1 ms, the timer finds
// nothing to do and arms itself again: every idle connection wakes its process about 800 times
// a second, and Node 24 prints a TimeoutNegativeWarning on every Kafka-connected process
// (kafkajs issue #1751; the proposed upstream fixes, #1755 and #1756, only clamp the delay and
// keep the loop). With nothing pending there is nothing to check, and push() schedules a check
// whenever it queues a request, so skipping the call then is all it takes: throttled or
// in-flight-limited requests are still checked as before.
import { createRequire } from 'node:module';

interface RequestQueueInternals {
  pending: unknown[];
  scheduleCheckPendingRequests(): void;
}

const PATCHED = Symbol.for('relay.kafkajs.requestQueue.idleCheck');

const RequestQueue = createRequire(import.meta.url)('kafkajs/src/network/requestQueue/index.js') as {
  prototype: RequestQueueInternals & { [PATCHED]?: true };
};
const proto = RequestQueue.prototype;
if (typeof proto.scheduleCheckPendingRequests !== 'function') {
  throw new Error('kafkajs changed: RequestQueue.scheduleCheckPendingRequests is gone; review infra/kafka/request-queue-fix.ts');
}
if (!proto[PATCHED]) {
  const schedule = proto.scheduleCheckPendingRequests;
  proto.scheduleCheckPendingRequests = function (this: RequestQueueInternals) {
    if (this.pending.length > 0) schedule.call(this);
  };
  proto[PATCHED] = true;
}
