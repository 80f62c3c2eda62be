// The decoded events of recently read streams, so that reading a stream again costs only what
// was appended since (the sqlite event store's readStream). One cache per store instance, so
// per thread and process; it holds only committed events, which are never changed or deleted,
// so what it holds can never become wrong: only incomplete, which the store's tail query covers.
//
// Each stream's entry is a window of consecutive revisions. Bounded in streams and in an
// estimate of bytes (the events' JSON text plus a fixed overhead per event), least recently
// used first out; a stream longer than its share keeps only its latest events (reads mostly
// come for a stream's end), and an event larger than that share is not kept at all.
import type { StoredEvent } from '../ports/event-store.ts';

export interface StreamCacheLimits {
  /** Streams kept at most. */
  maxStreams: number;
  /** Estimated bytes kept at most, over all streams. */
  maxBytes: number;
  /** Estimated bytes one stream may keep (its latest events); at most maxBytes. */
  maxStreamBytes: number;
}

/** A cached event with its estimated size. */
export interface CachedEvent {
  event: StoredEvent;
  bytes: number;
}

/** Consecutive revisions of one stream: `events[i]` has revision `first + i`. */
export interface StreamWindow {
  first: number;
  events: CachedEvent[];
  bytes: number;
}

/** Per event besides its JSON text: ids, stream id, position, time, the objects themselves. */
export const EVENT_OVERHEAD_BYTES = 400;

export class StreamCache {
  readonly #limits: StreamCacheLimits;
  /** Map order is recency: the first entry is the least recently used. */
  readonly #windows = new Map<string, StreamWindow>();
  #bytes = 0;

  constructor(limits: StreamCacheLimits) {
    this.#limits = { ...limits, maxStreamBytes: Math.min(limits.maxStreamBytes, limits.maxBytes) };
  }

  get streams(): number {
    return this.#windows.size;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** The stream's window (marked as just used), or undefined. */
  get(streamId: string): StreamWindow | undefined {
    const window = this.#windows.get(streamId);
    if (window) {
      this.#windows.delete(streamId);
      this.#windows.set(streamId, window);
    }
    return window;
  }

  /** Keeps `window` as the stream's (replacing what it had), trimmed to the stream's share, then evicts to the limits. */
  set(streamId: string, window: StreamWindow): void {
    this.delete(streamId);
    let drop = 0;
    let bytes = window.bytes;
    while (drop < window.events.length && bytes > this.#limits.maxStreamBytes) bytes -= window.events[drop++].bytes;
    if (drop === window.events.length) return;
    const kept = drop === 0 ? window : { first: window.first + drop, events: window.events.slice(drop), bytes };
    this.#windows.set(streamId, kept);
    this.#bytes += kept.bytes;
    for (const [oldest, evicted] of this.#windows) {
      if (this.#windows.size <= this.#limits.maxStreams && this.#bytes <= this.#limits.maxBytes) break;
      this.#windows.delete(oldest);
      this.#bytes -= evicted.bytes;
    }
  }

  delete(streamId: string): void {
    const window = this.#windows.get(streamId);
    if (!window) return;
    this.#windows.delete(streamId);
    this.#bytes -= window.bytes;
  }

  clear(): void {
    this.#windows.clear();
    this.#bytes = 0;
  }
}

/**
 * Freezes an event and everything in it. Cached events are shared by every caller of the store
 * in this thread, and the events' data flows into deciders, projections and the documents they
 * build: rather than trusting each of them (and each future one) never to change an object it
 * did not make, a change throws where it is made instead of corrupting what the next reader gets.
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}
