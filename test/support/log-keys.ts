// Aiming records at partitions: both log adapters place keys with Kafka's murmur2.
import { partitionForKey } from '../../infra/sqlite/partitioner.ts';

/** A key for each partition of a topic, so a test can aim records at partitions. */
export function keysByPartition(partitions: number): string[] {
  const keys: string[] = [];
  for (let i = 0; keys.filter(Boolean).length < partitions; i++) {
    keys[partitionForKey(`key-${i}`, partitions)] ??= `key-${i}`;
  }
  return keys;
}
