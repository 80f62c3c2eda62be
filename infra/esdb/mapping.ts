// Pure conversions between the event store port and @eventstore/db-client: positions,
// revisions, filters, recorded events, connection strings and which failures are worth a retry.
// Kept free of I/O so they are unit-tested without a server (test/esdb-mapping.unit.test.ts).
import {
  ANY,
  AccessDeniedError,
  InvalidArgumentError,
  NO_STREAM,
  NotFoundError,
  STREAM_EXISTS,
  StreamDeletedError,
  UnsupportedError,
  eventTypeFilter,
  excludeSystemEvents,
  streamNameFilter,
} from '@eventstore/db-client';
import type { AppendExpectedRevision, CurrentRevision, Filter, Position } from '@eventstore/db-client';
import type { EventFilter, ExpectedRevision, NewEvent, StoredEvent } from '../ports/event-store.ts';

const MAX_U64 = (1n << 64n) - 1n;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The opaque position string of the port: "commit/prepare" of the transaction log. */
export function formatPosition(position: Position): string {
  return `${position.commit}/${position.prepare}`;
}

/** null for "from the start"; a TypeError for anything this adapter did not hand out. */
export function parsePosition(position: string | null | undefined): Position | null {
  if (position === null || position === undefined) return null;
  const match = typeof position === 'string' ? /^(\d{1,20})\/(\d{1,20})$/.exec(position) : null;
  if (match) {
    const commit = BigInt(match[1]);
    const prepare = BigInt(match[2]);
    if (commit <= MAX_U64 && prepare <= MAX_U64) return { commit, prepare };
  }
  throw new TypeError(`"${String(position)}" is not a position of the EventStoreDB event store`);
}

/** Order of $all: by commit position, then by prepare position within one commit. */
export function comparePositions(a: Position, b: Position): number {
  if (a.commit !== b.commit) return a.commit < b.commit ? -1 : 1;
  if (a.prepare !== b.prepare) return a.prepare < b.prepare ? -1 : 1;
  return 0;
}

export function toClientExpectedRevision(expected: ExpectedRevision): AppendExpectedRevision {
  if (expected === 'any') return ANY;
  if (expected === 'no_stream') return NO_STREAM;
  if (expected === 'stream_exists') return STREAM_EXISTS;
  if (Number.isSafeInteger(expected) && expected >= 0) return BigInt(expected);
  throw new TypeError(`expectedRevision must be 'any', 'no_stream', 'stream_exists' or a revision >= 0, got ${String(expected)}`);
}

/**
 * The stream's actual revision from a WrongExpectedVersionError. Depending on the server and
 * the append path, a missing stream arrives as 'no_stream', -1 or the unsigned maximum.
 */
export function toActualRevision(actual: CurrentRevision | bigint | number | undefined): number | 'no_stream' {
  if (typeof actual === 'bigint' && actual >= 0n && actual <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(actual);
  if (typeof actual === 'number' && Number.isSafeInteger(actual) && actual >= 0) return actual;
  return 'no_stream';
}

/** Checks new events as the sqlite adapter does, so code that works on one works on the other. */
export function checkNewEvents(streamId: string, events: NewEvent[]): void {
  if (typeof streamId !== 'string' || streamId === '') throw new TypeError('streamId must be a non-empty string');
  if (!Array.isArray(events)) throw new TypeError('events must be an array');
  for (const event of events) {
    if (typeof event?.id !== 'string' || !UUID.test(event.id)) throw new TypeError(`event id must be a UUID, got "${String(event?.id)}"`);
    if (typeof event.type !== 'string' || event.type === '') throw new TypeError('event type must be a non-empty string');
  }
}

export function checkRevision(name: string, value: number | undefined): void {
  if (value !== undefined && (!Number.isSafeInteger(value) || value < 0)) {
    throw new TypeError(`${name} must be a revision >= 0, got ${String(value)}`);
  }
}

export function checkMaxCount(maxCount: number | undefined): void {
  if (maxCount !== undefined && (!Number.isSafeInteger(maxCount) || maxCount < 0)) {
    throw new TypeError(`maxCount must be a non-negative integer, got ${String(maxCount)}`);
  }
}

function checkPrefixes(name: string, prefixes: string[] | undefined): void {
  if (prefixes === undefined) return;
  // An empty list would silently match nothing, which is never what a caller means.
  if (!Array.isArray(prefixes) || prefixes.length === 0 || prefixes.some((p) => typeof p !== 'string')) {
    throw new TypeError(`filter.${name} must be a non-empty array of strings`);
  }
}

export function checkFilter(filter: EventFilter | undefined): void {
  checkPrefixes('streamPrefixes', filter?.streamPrefixes);
  checkPrefixes('eventTypePrefixes', filter?.eventTypePrefixes);
}

/** EventStoreDB's own events ($metadata, $>, $settings, projection output...) are not the application's. */
export function isSystemEventType(type: string): boolean {
  return type.startsWith('$');
}

/** The full filter, applied on the client: the server can narrow on one dimension only. */
export function matchesFilter(event: { streamId: string; type: string }, filter: EventFilter | undefined): boolean {
  if (isSystemEventType(event.type)) return false;
  const { streamPrefixes, eventTypePrefixes } = filter ?? {};
  if (streamPrefixes && !streamPrefixes.some((p) => event.streamId.startsWith(p))) return false;
  if (eventTypePrefixes && !eventTypePrefixes.some((p) => event.type.startsWith(p))) return false;
  return true;
}

/**
 * The server-side filter of a subscription. EventStoreDB filters on the stream name or on the
 * event type, not both, so this picks the stream prefixes when given (the other dimension and
 * system events are then dropped by matchesFilter), else the type prefixes, else it drops
 * system events on the server.
 */
export function subscriptionFilter(filter: EventFilter | undefined): Filter {
  if (filter?.streamPrefixes) return streamNameFilter({ prefixes: [...filter.streamPrefixes] });
  if (filter?.eventTypePrefixes) return eventTypeFilter({ prefixes: [...filter.eventTypePrefixes] });
  return excludeSystemEvents();
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}

/**
 * The port carries objects. Relay writes JSON objects only; anything else (another writer's
 * binary or scalar payload) is wrapped rather than dropped, so nothing read is silently lost.
 */
export function toRecord(value: unknown): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (isPlainObject(value)) return value;
  if (value instanceof Uint8Array) {
    if (value.length === 0) return {};
    const text = Buffer.from(value).toString('utf8');
    try {
      return toRecord(JSON.parse(text));
    } catch {
      return { value: Buffer.from(value).toString('base64') };
    }
  }
  return { value };
}

/** What toStoredEvent needs of the client's ResolvedEvent / AllStreamResolvedEvent. */
export interface ResolvedLike {
  event?: {
    streamId: string;
    id: string;
    revision: bigint;
    type: string;
    data: unknown;
    metadata: unknown;
    created: Date;
    position?: Position;
  };
  commitPosition?: bigint;
}

/** The $all position of a resolved event; stream reads carry it from EventStoreDB 22.6 on. */
export function positionOf(resolved: ResolvedLike): Position | undefined {
  if (resolved.event?.position) return resolved.event.position;
  // Without a per-event position only the commit is known; for the single-event implicit
  // transactions the gRPC API writes, prepare and commit coincide.
  if (resolved.commitPosition !== undefined) return { commit: resolved.commitPosition, prepare: resolved.commitPosition };
  return undefined;
}

/** null for what the port does not show: a missing event (deleted link target) or a system event. */
export function toStoredEvent(resolved: ResolvedLike): StoredEvent | null {
  const event = resolved.event;
  if (!event || isSystemEventType(event.type)) return null;
  const position = positionOf(resolved);
  if (!position) {
    throw new Error(`EventStoreDB did not report the position of event ${event.id} in ${event.streamId} (stream reads need a 22.6 or later server)`);
  }
  const created = event.created instanceof Date && !Number.isNaN(event.created.getTime()) ? event.created : new Date(0);
  return {
    id: event.id,
    streamId: event.streamId,
    revision: Number(event.revision),
    position: formatPosition(position),
    type: event.type,
    data: toRecord(event.data),
    metadata: toRecord(event.metadata),
    recordedAt: created.toISOString(),
  };
}

/**
 * The client (6.x) only knows esdb:// and esdb+discover://; the configuration also accepts the
 * kurrentdb:// and kurrent:// spellings of newer releases, which mean the same.
 */
export function clientConnectionString(url: string): string {
  const match = /^(kurrentdb|kurrent)(\+discover)?:\/\//i.exec(url);
  return match ? `esdb${match[2] ?? ''}://${url.slice(match[0].length)}` : url;
}

/**
 * Whether a dropped subscription is worth resubscribing: a missing server, a deadline, a
 * cancelled call or a leader change pass; a refusal that no retry can change does not.
 */
export function isTransient(error: unknown): boolean {
  return !(
    error instanceof AccessDeniedError ||
    error instanceof InvalidArgumentError ||
    error instanceof UnsupportedError ||
    error instanceof NotFoundError ||
    error instanceof StreamDeletedError
  );
}
