// The one way a command becomes events: read the stream, fold it, decide, append with the
// revision the decision was made on. Two processes deciding on the same stream at once cannot
// both append: the loser gets WrongExpectedRevisionError, reads what it missed and decides
// again (when the command allows retries), so every rule in `decide` holds without a lock and
// on any event store.
import { randomUUID } from 'node:crypto';
import type { Decider, DomainEvent, StreamReader } from '../../domain/decider.ts';
import type { CommandOrigin, EventMetadata } from '../../domain/events/metadata.ts';
import { WrongExpectedRevisionError, type EventStore, type NewEvent } from '../../infra/ports/event-store.ts';

/** A stream folded up to `revision` (-1: no event yet). */
export interface Loaded<S> {
  state: S;
  revision: number;
}

export interface HandleOptions<S, E> {
  /** What the events' metadata names as correlation and cause; per event when one append carries several commands' events. */
  origin: CommandOrigin | ((event: E) => CommandOrigin);
  /**
   * How many times to decide when another writer got in first. 1 (the default) lets the
   * conflict surface; commands whose rules re-decided on the new state give the right answer
   * (idempotent replays, quota charges, lifecycle steps) allow more.
   */
  attempts?: number;
  /** The stream as already read (e.g. for a replay check or from a cache): skips the first read. */
  loaded?: Loaded<S>;
  /** Work that must precede the append of these events (e.g. charging a quota); runs again after a conflict. */
  beforeAppend?: (events: E[], state: S) => Promise<void>;
}

export interface Handled<S, E> {
  /** What this call appended; empty when the decision was that nothing happens. */
  events: E[];
  /** The ids the appended events got, in order (the causation ids of what follows from them). */
  eventIds: string[];
  /** The stream's state after them. */
  state: S;
  revision: number;
}

export interface LoadOptions<S> {
  /** Folded already: only what follows is read. */
  from?: Loaded<S>;
  /** The stream as it stood right after this revision (what a processor reacting to that event saw). */
  upTo?: number;
}

/** Reads the events after `from` (the whole stream without it), up to `upTo`, and folds them on. */
export async function loadStream<S, E extends DomainEvent>(
  store: EventStore, streamId: string, decider: StreamReader<S, E>, options: LoadOptions<S> = {},
): Promise<Loaded<S>> {
  const start = options.from ?? { state: decider.initialState(), revision: -1 };
  if (options.upTo !== undefined && options.upTo <= start.revision) return start;
  const maxCount = options.upTo === undefined ? undefined : options.upTo - start.revision;
  const fresh = await store.readStream(streamId, { fromRevision: start.revision + 1, maxCount });
  if (fresh.length === 0) return start;
  const readable = fresh.map((e) => decider.upcast(e)).filter((e): e is E => e !== null);
  return { state: decider.fold(readable, start.state), revision: fresh[fresh.length - 1].revision };
}

export function toNewEvent<E extends DomainEvent>(event: E, origin: CommandOrigin, schemaVersion = 1): NewEvent {
  const metadata: EventMetadata = { ...origin, schemaVersion };
  return { id: randomUUID(), type: event.type, data: event.data as Record<string, unknown>, metadata: { ...metadata } };
}

export async function handleCommand<C, S, E extends DomainEvent>(
  store: EventStore, streamId: string, decider: Decider<C, S, E>, command: C, options: HandleOptions<S, E>,
): Promise<Handled<S, E>> {
  const attempts = options.attempts ?? 1;
  let loaded = options.loaded ?? (await loadStream(store, streamId, decider));
  for (let attempt = 1; ; attempt++) {
    const events = decider.decide(command, loaded.state);
    if (events.length === 0) return { events, eventIds: [], state: loaded.state, revision: loaded.revision };
    await options.beforeAppend?.(events, loaded.state);
    try {
      const versions = decider.schemaVersions as Record<string, number> | undefined;
      const written = events.map((e) => toNewEvent(e, typeof options.origin === 'function' ? options.origin(e) : options.origin, versions?.[e.type] ?? 1));
      const appended = await store.append(streamId, written, { expectedRevision: loaded.revision < 0 ? 'no_stream' : loaded.revision });
      return { events, eventIds: written.map((e) => e.id), state: decider.fold(events, loaded.state), revision: appended.nextExpectedRevision };
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError) || attempt >= attempts) throw error;
      // A store behind what was folded lost appends this process saw take effect (a batch whose
      // commit failed after a deferred-durability scope was given its writes): fold it again.
      const behind = error.actual === 'no_stream' ? loaded.revision >= 0 : error.actual < loaded.revision;
      loaded = await loadStream(store, streamId, decider, { from: behind ? undefined : loaded });
      // Writers that keep colliding (a hot stream) spread out instead of retrying in lockstep.
      if (attempt > 3) await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt));
    }
  }
}

/** One stream type's command handler, bound to its store and decider: callers name the stream by its entity's id. */
export interface StreamHandler<C, S, E extends DomainEvent> {
  load(id: string, options?: LoadOptions<S>): Promise<Loaded<S>>;
  /** handleCommand on the entity's stream; `attempts` defaults to the binding's. */
  handle(id: string, command: C, options: HandleOptions<S, E>): Promise<Handled<S, E>>;
}

export function bindStreams<C, S, E extends DomainEvent>(
  store: EventStore, decider: Decider<C, S, E>, streamIdOf: (id: string) => string, defaults: { attempts: number },
): StreamHandler<C, S, E> {
  return {
    load: (id, options) => loadStream(store, streamIdOf(id), decider, options),
    handle: (id, command, options) => handleCommand(store, streamIdOf(id), decider, command, { attempts: defaults.attempts, ...options }),
  };
}
