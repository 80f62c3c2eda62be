// Test seams for the rebuild tests: a store that runs a test's step at a chosen moment of the
// rebuild, as a crash or a concurrent writer would come then.
import type { EventStore } from '../../infra/ports/event-store.ts';

/** The event store, but `after` runs once right after the `at`-th readAll has read (and before it returns). */
export function withHookAfterRead(events: EventStore, at: number, after: () => Promise<void>): EventStore {
  let calls = 0;
  return new Proxy(events, {
    get(target, property) {
      if (property === 'readAll') {
        return async (options: Parameters<EventStore['readAll']>[0]) => {
          const read = await target.readAll(options);
          if (++calls === at) await after();
          return read;
        };
      }
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
