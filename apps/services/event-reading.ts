// Reading the event store's global order for analysts: `relay events`, `relay events export` and
// `relay projections run` read through here, in batches, with the decoding and upcasting the
// projections use (domain/*/upcast.ts), optional bounds by time or position, a project filter
// and redaction. Memory stays flat whatever the length of the history: one batch at a time (and,
// for a project filter, one number per email stream met within the bounds).
import { createHash } from 'node:crypto';
import { daysIn } from '../../domain/calendar.ts';
import { EMAIL_STREAM_PREFIX } from '../../domain/email/events.ts';
import { upcastEmailEvent } from '../../domain/email/upcast.ts';
import { canonicalAddress, parseMailbox } from '../../domain/mailbox.ts';
import { SUPPRESSION_STREAM_PREFIX } from '../../domain/suppressions/events.ts';
import { upcastSuppressionEvent } from '../../domain/suppressions/upcast.ts';
import { USAGE_STREAM_PREFIX } from '../../domain/usage/quota.ts';
import { upcastUsageEvent } from '../../domain/usage/upcast.ts';
import type { EventFilter, EventStore, StoredEvent } from '../../infra/ports/event-store.ts';
import { MIN_MAC_BYTES, type SecretBox } from '../../infra/secrets/secret-box.ts';
import { addressesInText, firstAddress } from '../../domain/addresses-in-text.ts';

/** Where reading starts or stops: a global position (exclusive start, inclusive end) or an instant (recordedAt). */
export type Bound = { position: string } | { time: Date };

/** How a time bound is written, for messages. */
export const TIME_FORMS = '2026-11-01, 2026-11-01T10:00:00 or 2026-11-01T10:00:00+02:00, UTC unless an offset is given';

// A date; then optionally a time of day (seconds and their fraction optional, "T" or a space
// before it); then optionally "Z" or an offset.
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:[Zz]|([+-])(\d{2}):?(\d{2}))?)?$/;

/**
 * A bound as written on the command line: text that starts with a date is an instant, anything
 * else a position of the store. An instant is UTC unless an offset is given, whatever the
 * machine's time zone: recordedAt, which it is compared with, is UTC, and a command must select
 * the same events wherever it runs. A date or time of day that does not exist (2026-02-30,
 * 24:00) is a problem, not carried over into the next month or day as Date would.
 */
export function parseBound(text: string): Bound | { problem: string } {
  if (!/^\d{4}-\d{2}-\d{2}/.test(text)) return text === '' ? { problem: 'nothing given' } : { position: text };
  const m = DATE_TIME.exec(text);
  if (!m) return { problem: `${JSON.stringify(text)} is no time; write ${TIME_FORMS}` };
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map((part) => Number(part ?? 0));
  const [fraction = '', sign, offsetHours = '0', offsetMinutes = '0'] = m.slice(7);
  if (month < 1 || month > 12) return { problem: `${text} does not exist: there is no month ${m[2]}` };
  if (day < 1 || day > daysIn(year, month)) return { problem: `${text} does not exist: ${m[1]}-${m[2]} has ${daysIn(year, month)} days` };
  if (hour > 23 || minute > 59 || second > 59) return { problem: `${text} does not exist: hours go up to 23, minutes and seconds up to 59` };
  if (Number(offsetHours) > 23 || Number(offsetMinutes) > 59) return { problem: `${text}: ${sign}${offsetHours}:${offsetMinutes} is no offset from UTC` };
  // setUTCFullYear, unlike Date.UTC, takes years 0 to 99 as written.
  const written = new Date(0);
  written.setUTCFullYear(year, month - 1, day);
  written.setUTCHours(hour, minute, second, Number(fraction.padEnd(3, '0').slice(0, 3)));
  const offsetMs = sign === undefined ? 0 : (sign === '-' ? -1 : 1) * (Number(offsetHours) * 60 + Number(offsetMinutes)) * 60_000;
  return { time: new Date(written.getTime() - offsetMs) };
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
  /**
   * Told, after each batch, the position of the last event this read went past, whether it was
   * kept or not (a time bound, a type or a project leaves some out): where a follower picks up
   * after this read, even when it printed nothing.
   */
  onRead?: (position: string) => void;
}

/** A 53-bit number for a stream id: a project filter remembers its streams in a few bytes each. */
const streamKey = (streamId: string): number => {
  const h = createHash('sha256').update(streamId).digest();
  return h.readUIntBE(0, 6) * 32 + (h[6] >> 3);
};

/** First events looked up at a time: enough to hide a networked store's round trips, few enough not to flood it. */
const LOOKUPS_AT_ONCE = 16;

/**
 * Which email streams belong to a project: the one their first event (EmailAccepted or
 * EmailSuppressed) names. A stream whose first event the read meets is told by it; one met
 * later in its life (an email accepted before the read's start, whose outcomes come after it)
 * has its first event read, once. That costs a read per such email, where learning them from
 * the history before the start would read all of it; and each answer, yes or no, is kept, one
 * number per email stream met within the bounds, so no stream is looked up twice.
 */
class ProjectStreams {
  readonly #events: EventStore;
  readonly #projectId: string;
  readonly #known = new Map<number, boolean>();

  constructor(events: EventStore, projectId: string) {
    this.#events = events;
    this.#projectId = projectId;
  }

  #owns(first: StoredEvent | undefined): boolean {
    return (first?.type === 'EmailAccepted' || first?.type === 'EmailSuppressed') && first.data.projectId === this.#projectId;
  }

  /** Learns the project of every email stream of these events, before has() is asked about them. */
  async learn(events: StoredEvent[]): Promise<void> {
    const unknown = new Map<string, number>();
    for (const event of events) {
      if (!event.streamId.startsWith(EMAIL_STREAM_PREFIX)) continue;
      const key = streamKey(event.streamId);
      if (this.#known.has(key) || unknown.has(event.streamId)) continue;
      if (event.revision === 0) this.#known.set(key, this.#owns(event));
      else unknown.set(event.streamId, key);
    }
    const streams = [...unknown];
    for (let i = 0; i < streams.length; i += LOOKUPS_AT_ONCE) {
      await Promise.all(streams.slice(i, i + LOOKUPS_AT_ONCE).map(async ([streamId, key]) => {
        const [first] = await this.#events.readStream(streamId, { maxCount: 1 });
        this.#known.set(key, this.#owns(first));
      }));
    }
  }

  has(event: StoredEvent): boolean {
    return event.streamId.startsWith(EMAIL_STREAM_PREFIX) && this.#known.get(streamKey(event.streamId)) === true;
  }
}

/**
 * The events of the global order within the bounds, a batch at a time. Events are in position
 * order, which follows the order the store recorded them in: a time bound ends the read at the
 * first event recorded at or after it. A position bound is passed to the store, which alone
 * orders its positions: it ends the read wherever that position falls, at an event or in a gap.
 */
export async function* readGlobalOrder(events: EventStore, options: ReadOptions = {}): AsyncGenerator<StoredEvent[]> {
  const batchSize = options.batchSize ?? 1000;
  const from = options.from ?? null;
  const to = options.to ?? null;
  let after: string | null = from && 'position' in from ? from.position : null;
  const upTo = to && 'position' in to ? to.position : null;
  const startMs = from && 'time' in from ? from.time.getTime() : null;
  const endMs = to && 'time' in to ? to.time.getTime() : null;
  const within = (event: StoredEvent) => {
    const at = Date.parse(event.recordedAt);
    return (startMs === null || at >= startMs) && (endMs === null || at < endMs) && (!options.types || options.types.has(event.type));
  };
  let left = options.limit ?? Infinity;
  const project = options.projectId ? new ProjectStreams(events, options.projectId) : null;
  for (;;) {
    const batch = await events.readAll({ after, upTo, maxCount: batchSize, filter: options.filter });
    if (batch.length === 0) return;
    after = batch[batch.length - 1].position;
    if (project) await project.learn(batch.filter(within));
    const kept: StoredEvent[] = [];
    let ended = false;
    // The last event gone past: no further than the last one taken when the limit cuts the batch.
    let passed: string | null = null;
    for (const event of batch) {
      if (endMs !== null && Date.parse(event.recordedAt) >= endMs) {
        ended = true;
        break;
      }
      if (kept.length >= left) {
        ended = true;
        break;
      }
      passed = event.position;
      if (!within(event)) continue;
      if (project && !project.has(event)) continue;
      kept.push(event);
    }
    left -= kept.length;
    if (kept.length > 0) yield kept;
    if (passed !== null) options.onRead?.(passed);
    if (ended || left <= 0 || batch.length < batchSize) return;
  }
}

/**
 * The event as today's code reads it (the one reading point of each stream type): data written
 * by an older Relay converted, a type or version this one does not know marked
 * UnrecognizedEvent. A stream of a kind this version does not know (written by a newer Relay)
 * is not read either: its events are UnrecognizedEvent too, never passed on as stored.
 */
export function upcastStored(event: StoredEvent): StoredEvent {
  const read = (type: string, data: unknown): StoredEvent => ({ ...event, type, data: data as Record<string, unknown> });
  if (event.streamId.startsWith(EMAIL_STREAM_PREFIX)) {
    const upcast = upcastEmailEvent(event);
    return read(upcast.type, upcast.data);
  }
  if (event.streamId.startsWith(USAGE_STREAM_PREFIX)) {
    const upcast = upcastUsageEvent(event);
    return upcast ? read(upcast.type, upcast.data) : read('UnrecognizedEvent', { type: event.type });
  }
  if (event.streamId.startsWith(SUPPRESSION_STREAM_PREFIX)) {
    const upcast = upcastSuppressionEvent(event);
    return read(upcast.type, upcast.data);
  }
  return read('UnrecognizedEvent', { type: event.type });
}

/** What redaction puts in place of an address: see addressTokens. */
export type AddressToken = (address: string) => string;

/** Every address in the text replaced by its token, plain or URL-encoded. */
function redactText(text: string, token: AddressToken): string {
  const found = addressesInText(text);
  let out = '';
  let copied = 0;
  for (const { start, end, address } of found) {
    out += text.slice(copied, start) + token(address);
    copied = end;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** The purpose of the MAC that makes a redacted address's token (infra/secrets/secret-box.ts). */
export const REDACTION_MAC_PURPOSE = 'redacted-address';

/**
 * An address as redaction shows it: `<token>@<domain>`, the token the first 80 bits (20 hex
 * digits) of a MAC under RELAY_SECRET_KEY's current key, purpose REDACTION_MAC_PURPOSE, of the
 * whole address in the canonical form Relay keys recipients by (domain/mailbox.ts:
 * "john.doe"@… is john.doe@…). One mailbox has one token however it was written, in every
 * export of the installation while its key stays; without the key a guessed address cannot be
 * tested against a token (an unkeyed hash could be computed by anyone). Another installation,
 * or this one after a key rotation, gives other tokens.
 */
export function addressTokens(secrets: Pick<SecretBox, 'mac'>): AddressToken {
  return (address) => {
    const canonical = canonicalAddress(address.trim());
    const at = canonical.lastIndexOf('@');
    const domain = at < 0 ? '' : canonical.slice(at + 1);
    return `${secrets.mac(REDACTION_MAC_PURPOSE, canonical).subarray(0, MIN_MAC_BYTES).toString('hex')}@${domain}`;
  };
}

/** Keys that hold content or addresses, and what redaction makes of them. */
const SEALED = new Set(['content']);

/**
 * Fields holding one address each (or null), replaced whole by its token whatever it looks like: the
 * normalized recipients, the sender, a recipient's or a suppression's address.
 */
const ADDRESSES = new Set(['toAddresses', 'ccAddresses', 'fromAddress', 'address', 'originalAddress']);

/** Recipients' mailboxes ("Name <address>"): the name goes with the address, the whole becomes its token. */
const MAILBOXES = new Set(['to', 'cc', 'replyTo']);

/** The sender's own mailbox: its name stays (as subjects do), its address becomes its token. */
const SENDER_MAILBOXES = new Set(['from']);

/** The sender's own free-form data: its keys mean nothing to Relay (a `to` there is no recipient); addresses in it are redacted as text. */
const FREE_FORM = new Set(['metadata', 'tags', 'headers']);

function redactFreeForm(value: unknown, token: AddressToken): unknown {
  if (typeof value === 'string') return redactText(value, token);
  if (Array.isArray(value)) return value.map((v) => redactFreeForm(v, token));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [redactText(k, token), redactFreeForm(v, token)]));
  }
  return value;
}

function redactMailbox(value: string, keepName: boolean, token: AddressToken): string {
  const parsed = parseMailbox(value);
  if (!parsed.ok) return keepName ? redactText(value, token) : token(firstAddress(value) ?? value);
  const replaced = token(parsed.value.address);
  if (!keepName || parsed.value.displayName === null) return replaced;
  // The name as written (before the angle brackets), its addresses redacted too.
  const name = parsed.value.mailbox.slice(0, parsed.value.mailbox.lastIndexOf('<')).trim();
  return `${redactText(name, token)} <${replaced}>`;
}

function redactValue(key: string, value: unknown, token: AddressToken): unknown {
  if (SEALED.has(key)) return null;
  if (FREE_FORM.has(key)) return redactFreeForm(value, token);
  if (Array.isArray(value)) return value.map((v) => redactValue(ADDRESSES.has(key) || MAILBOXES.has(key) || SENDER_MAILBOXES.has(key) ? key : '', v, token));
  if (typeof value === 'string') {
    if (ADDRESSES.has(key)) return token(value);
    if (MAILBOXES.has(key)) return redactMailbox(value, false, token);
    if (SENDER_MAILBOXES.has(key)) return redactMailbox(value, true, token);
    return redactText(value, token);
  }
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, redactValue(k, v, token)]));
  }
  return value;
}

/**
 * The event without what an analyst's copy should not hold: sealed content (bodies, BCC) is
 * dropped (null), and every address anywhere in the data (recipients, the sender, reply-to, in
 * replies and reasons) becomes its token with its domain (`token`: addressTokens, keyed): the
 * same address gives the same token, so counts and joins still work. Address fields are
 * replaced whole, mailboxes parsed as
 * admission parses them (a recipient's name goes with its address; the sender's name stays),
 * and free text by the rules above (plain and URL-encoded addresses). Subjects, tags and
 * metadata are the sender's own and stay, addresses in them redacted.
 */
export function redactEvent(event: StoredEvent, token: AddressToken): StoredEvent {
  return { ...event, data: redactValue('', event.data, token) as Record<string, unknown> };
}

/** CSV of events (RFC 4180): one row per event, the data as a JSON cell. */
export const CSV_COLUMNS = ['position', 'recordedAt', 'streamId', 'revision', 'id', 'type', 'schemaVersion', 'correlationId', 'causationId', 'occurredAt', 'data'] as const;

const cell = (value: unknown, json: (value: unknown) => string): string => {
  const text = value === null || value === undefined ? '' : typeof value === 'string' ? value : typeof value === 'object' ? json(value) : String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
};

/** `json` writes the data cell: the caller's, so that what it escapes for its reader still parses as JSON. */
export function csvRow(event: StoredEvent, json: (value: unknown) => string): string {
  const m = event.metadata ?? {};
  const values: Record<(typeof CSV_COLUMNS)[number], unknown> = {
    position: event.position, recordedAt: event.recordedAt, streamId: event.streamId, revision: event.revision, id: event.id, type: event.type,
    schemaVersion: m.schemaVersion ?? 1, correlationId: m.correlationId, causationId: m.causationId, occurredAt: event.data.occurredAt, data: event.data,
  };
  return CSV_COLUMNS.map((c) => cell(values[c], json)).join(',');
}
