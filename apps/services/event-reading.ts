// Reading the event store's global order for analysts: `relay events`, `relay events export` and
// `relay projections run` read through here, in batches, with the decoding and upcasting the
// projections use (domain/*/upcast.ts), optional bounds by time or position, a project filter
// and redaction. Memory stays flat whatever the length of the history: one batch at a time (and,
// for a project filter, one number per email stream of that project).
import { createHash } from 'node:crypto';
import { EMAIL_STREAM_PREFIX } from '../../domain/email/events.ts';
import { upcastEmailEvent } from '../../domain/email/upcast.ts';
import { USAGE_STREAM_PREFIX } from '../../domain/usage/quota.ts';
import { upcastUsageEvent } from '../../domain/usage/upcast.ts';
import type { EventFilter, EventStore, StoredEvent } from '../../infra/ports/event-store.ts';

/** Where reading starts or stops: a global position (exclusive start, inclusive end) or an instant (recordedAt). */
export type Bound = { position: string } | { time: Date };

/** `2026-11-01`, `2026-11-01T10:00:00Z`: an instant; anything else is taken for a position of the store. */
export function parseBound(text: string): Bound | null {
  if (/^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(text)) {
    const time = new Date(/T|\s/.test(text) ? text : `${text}T00:00:00Z`);
    return Number.isNaN(time.getTime()) ? null : { time };
  }
  return text === '' ? null : { position: text };
}

export interface ReadOptions {
  from?: Bound | null;
  to?: Bound | null;
  filter?: EventFilter;
  /** Exact event types. */
  types?: ReadonlySet<string>;
  /** Email events of this project only (other streams are workspace-wide and left out). */
  projectId?: string;
  batchSize?: number;
  /** Stop after this many events. */
  limit?: number;
}

/** A 53-bit number for a stream id: a project filter remembers its streams in a few bytes each. */
const streamKey = (streamId: string): number => {
  const h = createHash('sha256').update(streamId).digest();
  return h.readUIntBE(0, 6) * 32 + (h[6] >> 3);
};

/**
 * The events of the global order within the bounds, a batch at a time. Events are in position
 * order, which follows the order the store recorded them in: a time bound ends the read at the
 * first event recorded at or after it.
 */
export async function* readGlobalOrder(events: EventStore, options: ReadOptions = {}): AsyncGenerator<StoredEvent[]> {
  const batchSize = options.batchSize ?? 1000;
  const from = options.from ?? null;
  const to = options.to ?? null;
  let after: string | null = from && 'position' in from ? from.position : null;
  let left = options.limit ?? Infinity;
  const project = options.projectId ? new Set<number>() : null;
  for (;;) {
    const batch = await events.readAll({ after, maxCount: batchSize, filter: options.filter });
    if (batch.length === 0) return;
    after = batch[batch.length - 1].position;
    const kept: StoredEvent[] = [];
    let ended = false;
    for (const event of batch) {
      if (to && ('time' in to ? Date.parse(event.recordedAt) >= to.time.getTime() : event.position === to.position)) {
        if ('position' in to) kept.push(event);
        ended = true;
        break;
      }
      if (from && 'time' in from && Date.parse(event.recordedAt) < from.time.getTime()) continue;
      if (options.types && !options.types.has(event.type)) continue;
      if (project && !inProject(project, options.projectId!, event)) continue;
      kept.push(event);
    }
    const taken = kept.slice(0, left);
    left -= taken.length;
    if (taken.length > 0) yield taken;
    if (ended || left <= 0 || batch.length < batchSize) return;
  }
}

function inProject(streams: Set<number>, projectId: string, event: StoredEvent): boolean {
  if (!event.streamId.startsWith(EMAIL_STREAM_PREFIX)) return false;
  if (event.type === 'EmailAccepted' || event.type === 'EmailSuppressed') {
    if (event.data.projectId !== projectId) return false;
    streams.add(streamKey(event.streamId));
    return true;
  }
  return streams.has(streamKey(event.streamId));
}

/**
 * The event as today's code reads it (the one reading point of each stream type): data written
 * by an older Relay converted, a type or version this one does not know marked
 * UnrecognizedEvent. Other streams are read as stored.
 */
export function upcastStored(event: StoredEvent): StoredEvent {
  if (event.streamId.startsWith(EMAIL_STREAM_PREFIX)) {
    const read = upcastEmailEvent(event);
    return { ...event, type: read.type, data: read.data as unknown as Record<string, unknown> };
  }
  if (event.streamId.startsWith(USAGE_STREAM_PREFIX)) {
    const read = upcastUsageEvent(event);
    return read ? { ...event, type: read.type, data: read.data as unknown as Record<string, unknown> } : { ...event, type: 'UnrecognizedEvent', data: { type: event.type } };
  }
  return event;
}

const ADDRESS = /[^\s<>"'(),;:[\]]+@([^\s<>"'(),;:[\]]+)/g;

/** An address as redaction shows it: a hash of the whole address (the same address, the same hash), and its domain. */
export const hashAddress = (address: string): string => {
  const at = address.lastIndexOf('@');
  const domain = at < 0 ? '' : address.slice(at + 1).toLowerCase();
  return `${createHash('sha256').update(address.trim().toLowerCase()).digest('hex').slice(0, 16)}@${domain}`;
};

/** Keys that hold content or addresses, and what redaction makes of them. */
const SEALED = new Set(['content']);

/** Fields holding mailboxes ("Name <address>"): the name goes with the address. */
const MAILBOXES = new Set(['to', 'cc', 'replyTo']);

function redactValue(key: string, value: unknown): unknown {
  if (SEALED.has(key)) return null;
  if (MAILBOXES.has(key) && typeof value === 'string') return hashAddress(value.match(ADDRESS)?.[0] ?? value);
  if (MAILBOXES.has(key) && Array.isArray(value)) return value.map((v) => redactValue(key, v));
  if (typeof value === 'string') return value.replace(ADDRESS, (match) => hashAddress(match));
  if (Array.isArray(value)) return value.map((v) => redactValue('', v));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, redactValue(k, v)]));
  }
  return value;
}

/**
 * The event without what an analyst's copy should not hold: sealed content (bodies, BCC) is
 * dropped (null), and every address anywhere in the data (recipients, the sender, reply-to, in
 * replies and reasons) becomes a hash of it with its domain: the same address gives the same
 * hash, so counts and joins still work. Subjects, tags and metadata are the sender's own and stay.
 */
export function redactEvent(event: StoredEvent): StoredEvent {
  return { ...event, data: redactValue('', event.data) as Record<string, unknown> };
}

/** CSV of events (RFC 4180): one row per event, the data as a JSON cell. */
export const CSV_COLUMNS = ['position', 'recordedAt', 'streamId', 'revision', 'id', 'type', 'schemaVersion', 'correlationId', 'causationId', 'occurredAt', 'data'] as const;

const cell = (value: unknown): string => {
  const text = value === null || value === undefined ? '' : typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
};

export function csvRow(event: StoredEvent): string {
  const m = event.metadata ?? {};
  const values: Record<(typeof CSV_COLUMNS)[number], unknown> = {
    position: event.position, recordedAt: event.recordedAt, streamId: event.streamId, revision: event.revision, id: event.id, type: event.type,
    schemaVersion: m.schemaVersion ?? 1, correlationId: m.correlationId, causationId: m.causationId, occurredAt: event.data.occurredAt, data: event.data,
  };
  return CSV_COLUMNS.map((c) => cell(values[c])).join(',');
}
