// Positive markers to wait for before asserting that nothing else happened (never a fixed sleep
// alone): a consumer group has committed everything published so far, an email's work item is
// gone (no delivery step is scheduled any more).
import { eventsTopic, groupOf } from '../../apps/pipeline/topics.ts';
import { workItems } from '../../apps/services/delivery/work-items.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { Log } from '../../infra/ports/log.ts';
import { waitUntil } from './eventually.ts';

/**
 * Waits until each group has committed every record published to `topic` before this call:
 * what it was handed is handled, and nothing it had not committed is left to hand over again.
 */
export async function committedToEnd(log: Log, topic: string, groups: readonly string[], what: string, timeoutMs = 20_000): Promise<void> {
  const ends = new Map((await log.groupOffsets(topic, groups)).map((o) => [o.partition, BigInt(o.end)]));
  await waitUntil(async () => (await log.groupOffsets(topic, groups)).every((o) => {
    const end = ends.get(o.partition) ?? 0n;
    return end <= BigInt(o.start) || (o.committed !== null && BigInt(o.committed) >= end);
  }), what, timeoutMs);
}

/** Waits until the processors' groups have handled every event forwarded so far. */
export function processorsCaughtUp(t: { stores: { log: Log }; config: { logNamespace: string } }, processors: readonly string[], timeoutMs?: number): Promise<void> {
  const groups = processors.map((p) => groupOf(t.config.logNamespace, p));
  return committedToEnd(t.stores.log, eventsTopic(t.config.logNamespace), groups, `${processors.join(', ')} caught up`, timeoutMs);
}

/** Waits until the email has no work item: its delivery is finished and no step can be scheduled for it again. */
export function workItemGone(documents: DocumentStore, emailId: string, timeoutMs?: number): Promise<void> {
  return waitUntil(async () => (await workItems(documents).get(emailId)) === null, `${emailId} has no work item left`, timeoutMs);
}
