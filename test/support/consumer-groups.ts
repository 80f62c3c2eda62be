// Waiting for a processor's consumer group: a positive marker that it has handled everything
// (the events are in the log, and its committed offsets reached the end of every partition).
import { eventsTopic, groupOf } from '../../apps/pipeline/topics.ts';
import type { TestApp } from './app.ts';
import { waitUntil } from './eventually.ts';

export async function groupCaughtUp(t: Pick<TestApp, 'stores' | 'config'>, processor: string, records: number, timeoutMs = 120_000): Promise<void> {
  const topic = eventsTopic(t.config.logNamespace);
  const group = groupOf(t.config.logNamespace, processor);
  await waitUntil(async () => {
    const offsets = await t.stores.log.groupOffsets(topic, [group]);
    return offsets.reduce((n, o) => n + Number(o.end), 0) >= records && offsets.every((o) => o.committed !== null && o.committed === o.end);
  }, `${group} has handled all ${records} records`, timeoutMs);
}
