// The distributed event store: the port on EventStoreDB through @eventstore/db-client (gRPC).
// EventStoreDB already has the port's semantics (expected revisions, idempotent appends by event
// id, the $all order, catch-up subscriptions); this adapter translates types and errors, and adds
// what the port promises beyond the server: exclusive `after` positions, prefix filters on both
// stream and type, serial handler calls with retries, and resubscription after a drop.
import {
  BACKWARDS,
  END,
  EventStoreDBClient,
  START,
  StreamNotFoundError,
  WrongExpectedVersionError,
  jsonEvent,
} from '@eventstore/db-client';
import type { AllStreamResolvedEvent, AllStreamSubscription, ChannelCredentialOptions, Credentials, Position, StreamingRead } from '@eventstore/db-client';
import { parseConnectionString } from '@eventstore/db-client/dist/Client/parseConnectionString.js';
import type { ConnectionOptions } from '@eventstore/db-client/dist/Client/parseConnectionString.js';
import { accessSync, constants, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { WrongExpectedRevisionError } from '../ports/event-store.ts';
import { wholeNumberProblem, type WholeNumberOption } from '../url-whole-numbers.ts';
import type {
  AppendResult,
  EventStore,
  ExpectedRevision,
  NewEvent,
  ReadAllOptions,
  StoredEvent,
  SubscribeAllOptions,
  Subscription,
} from '../ports/event-store.ts';
import {
  checkFilter,
  checkMaxCount,
  checkNewEvents,
  checkRevision,
  clientConnectionString,
  comparePositions,
  formatPosition,
  isTransient,
  matchesFilter,
  parsePosition,
  positionOf,
  subscriptionFilter,
  toActualRevision,
  toClientExpectedRevision,
  toStoredEvent,
} from './mapping.ts';
import type { ResolvedLike } from './mapping.ts';
import { retryUntilDone, sleep } from '../retry.ts';
import { PERCENT_ENCODE_USERINFO, quotableUrlToken } from '../url-refusals.ts';

export interface EsdbEventStoreOptions {
  /** Events fetched per request while readAll pages through $all. Default 500. */
  readBatchSize?: number;
  /** First delay before a failed handler call is retried, or a dropped subscription resubscribes; it doubles up to maxRetryDelayMs. Default 50 ms. */
  retryDelayMs?: number;
  /** Default 5000 ms. */
  maxRetryDelayMs?: number;
  /** How long ping() waits for an answer. Default 5000 ms. */
  pingTimeoutMs?: number;
}

const ignore = (): void => {};

function errorOf(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}


/** Every item of a finite read. */
async function collect<T>(read: StreamingRead<T>): Promise<T[]> {
  // The client emits server errors as 'error' events: the iterator below receives them, and
  // this listener keeps one that arrives after iteration ended from crashing the process.
  read.on('error', ignore);
  const items: T[] = [];
  for await (const item of read) items.push(item);
  return items;
}

/**
 * The query options the client reads: the keys of `mapToQueryOption` in
 * @eventstore/db-client/dist/Client/parseConnectionString.js (6.2.1), matched as it matches
 * them, ignoring case, "-" and "_". The client ignores any other key after writing the whole
 * connection string to the console, so it is refused before the client sees it. Check this
 * list against that file when the client is upgraded.
 */
const CLIENT_QUERY_OPTIONS = [
  'tls', 'tlsVerifyCert', 'tlsCAFile', 'userCertFile', 'userKeyFile', 'connectionName', 'defaultDeadline', 'keepAliveInterval',
  'keepAliveTimeout', 'throwOnAppendFailure', 'nodePreference', 'discoveryInterval', 'gossipTimeout', 'maxDiscoverAttempts',
  // Not in mapToQueryOption: verifyKeyValuePair falls back to the raw key, and reads this one
  // in exactly this spelling (as esdb+discover:// does).
  'dnsDiscover',
];
const flatCase = (key: string): string => key.trim().toLowerCase().replace(/[_-]/g, '');
const KNOWN_OPTIONS = new Map(CLIENT_QUERY_OPTIONS.map((option) => [flatCase(option), option]));
const FILE_OPTIONS = ['tlsCAFile', 'userCertFile', 'userKeyFile'] as const;
/**
 * The options the client reads with parseInt (verifyKeyValuePair), with what their number
 * counts: milliseconds, but seconds for gossipTimeout (dist/Client/discovery.js, createDeadline)
 * and a count for maxDiscoverAttempts. parseInt stops at the first character that is not a
 * digit and the client takes no unit, so "10s" would be a 10 ms deadline, "1.5" 1 and "1e4" 1:
 * only a whole number is accepted, from `min` (the client itself refuses a defaultDeadline below
 * 1 and keep-alives below -1, which turns them off, but only once it is made, and not as a
 * configuration error).
 */
const WHOLE_NUMBER_OPTIONS = new Map<string, WholeNumberOption>([
  ['defaultDeadline', { unit: 'milliseconds', min: 1 }],
  ['keepAliveInterval', { unit: 'milliseconds', min: -1, minMeans: '-1: off' }],
  ['keepAliveTimeout', { unit: 'milliseconds', min: -1, minMeans: '-1: off' }],
  ['discoveryInterval', { unit: 'milliseconds', min: 0 }],
  ['gossipTimeout', { unit: 'seconds', min: 1 }],
  ['maxDiscoverAttempts', { unit: 'attempts', min: 1 }],
]);

/**
 * A connection string the client would refuse or misread. The message never holds the string,
 * nor a part of it that could be user information: a query key is named only when it is a short
 * word and no "@" follows the host.
 */
export class EventStoreUrlError extends Error {
  override name = 'EventStoreUrlError';
}

interface EventStoreConnection {
  options: ConnectionOptions;
  credentials: Credentials | undefined;
}

/**
 * Takes a connection string apart: the user name and password, and the rest read by the
 * client's own parser. Only the rest reaches the client as a string, so whatever it prints of
 * one (an unknown option, tlsVerifyCert=false, DEBUG=esdb:*, its parse errors) holds no password.
 * `quiet` leaves tlsVerifyCert out of the parse (its value is checked here): the client ignores
 * that option and only warns about it, which it then does once, when it connects.
 */
function takeApart(url: string, { quiet }: { quiet: boolean }): EventStoreConnection {
  const string = clientConnectionString(url.trim()).replace(/\/+$/, '');
  const scheme = /^[^:/?#]+:\/\//.exec(string)?.[0];
  if (!scheme) throw new EventStoreUrlError('expected esdb://host:2113 or esdb+discover://host:2113');
  const afterScheme = string.slice(scheme.length);
  const authorityEnd = afterScheme.search(/[/?#]/);
  // An "@" after the host: user information cut short by an unescaped "/", "?" or "#" (what
  // follows would be read as hosts or options and quoted in a refusal). Nothing of it is quoted.
  if (authorityEnd !== -1 && afterScheme.slice(authorityEnd).includes('@')) {
    throw new EventStoreUrlError(`has an "@" after its host; ${PERCENT_ENCODE_USERINFO}`);
  }
  const at = afterScheme.slice(0, authorityEnd === -1 ? undefined : authorityEnd).lastIndexOf('@');
  const credentials = at === -1 ? undefined : userCredentials(afterScheme.slice(0, at));
  const rest = afterScheme.slice(at + 1);
  const queryStart = rest.indexOf('?');
  const hosts = queryStart === -1 ? rest : rest.slice(0, queryStart);
  const pairs = queryStart === -1 ? [] : rest.slice(queryStart + 1).split(/[&?]/).map(queryOption);
  const parsed = pairs.filter((pair) => !(quiet && pair.option === 'tlsVerifyCert'));
  // Where each pair lies in the string parsed, to name the option the client's parser stopped at.
  let connectionString = `${scheme}${hosts}`;
  const spans = parsed.map((pair, i) => {
    const start = connectionString.length;
    connectionString += `${i === 0 ? '?' : '&'}${pair.option}=${pair.value}`;
    return { option: pair.option, start, end: connectionString.length };
  });
  let options: ConnectionOptions;
  try {
    options = parseConnectionString(connectionString);
  } catch (error) {
    // The client decodes some values (connectionName, the file options) with decodeURIComponent.
    if (error instanceof URIError) throw new EventStoreUrlError('an option\'s value is not percent-encoded correctly');
    const { location, expected } = error as { location?: unknown; expected?: unknown };
    if (!Array.isArray(location) || typeof expected !== 'string') throw error;
    const span = spans.find((s) => location[0] >= s.start && location[0] < s.end);
    throw new EventStoreUrlError(span ? `${span.option}: expected ${expected}` : `the host list: expected ${expected}`);
  }
  if (quiet) {
    const verify = pairs.find((pair) => pair.option === 'tlsVerifyCert');
    if (verify && !['true', 'false'].includes(verify.value.trim())) throw new EventStoreUrlError('tlsVerifyCert: expected true or false');
  }
  if (!options.userCertFile !== !options.userKeyFile) throw new EventStoreUrlError('userCertFile and userKeyFile go together (a client certificate and its key)');
  for (const option of FILE_OPTIONS) {
    const file = options[option];
    if (file === undefined || (option === 'tlsCAFile' && options.tls === false)) continue;
    try {
      accessSync(resolve(file), constants.R_OK);
    } catch (error) {
      throw new EventStoreUrlError(`${option}: cannot read ${resolve(file)} (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`);
    }
  }
  return { options, credentials };
}

function userCredentials(userinfo: string): Credentials {
  const colon = userinfo.indexOf(':');
  if (colon <= 0 || colon === userinfo.length - 1) throw new EventStoreUrlError('the user information must be user:password');
  try {
    return { username: decodeURIComponent(userinfo.slice(0, colon)), password: decodeURIComponent(userinfo.slice(colon + 1)) };
  } catch {
    throw new EventStoreUrlError('the user name or password is not percent-encoded correctly');
  }
}

function queryOption(pair: string): { key: string; option: string; value: string } {
  const equals = pair.indexOf('=');
  const key = equals === -1 ? pair : pair.slice(0, equals);
  const value = equals === -1 ? '' : pair.slice(equals + 1);
  if (key.trim() === '') throw new EventStoreUrlError('the query holds an empty option (expected ?key=value&key=value)');
  const option = KNOWN_OPTIONS.get(flatCase(key));
  if (!option) {
    const named = quotableUrlToken(key.trim()) ? `unknown option "${key.trim()}"` : 'an unknown option';
    throw new EventStoreUrlError(`${named} (the client reads ${CLIENT_QUERY_OPTIONS.join(', ')})`);
  }
  if (value.trim() === '') throw new EventStoreUrlError(`${option}: expected a value (${option}=…)`);
  const whole = WHOLE_NUMBER_OPTIONS.get(option);
  const problem = whole ? wholeNumberProblem(option, value.trim(), whole, 'client') : null;
  if (problem !== null) throw new EventStoreUrlError(problem);
  return { key, option, value };
}

/** What makes a connection string one the client would refuse or misread, or null; prints nothing. */
export function eventStoreUrlProblem(url: string): string | null {
  try {
    takeApart(url, { quiet: true });
    return null;
  } catch (error) {
    if (error instanceof EventStoreUrlError) return error.message;
    throw error;
  }
}

/**
 * The client EventStoreDBClient.connectionString builds (dist/Client/index.js), but given the
 * credentials beside the parsed options rather than inside a string.
 */
function clientOf({ options, credentials }: EventStoreConnection): EventStoreDBClient {
  const channel: ChannelCredentialOptions = { insecure: options.tls === false };
  if (!channel.insecure && options.tlsCAFile) channel.rootCertificate = readFileSync(resolve(options.tlsCAFile));
  if (options.userCertFile && options.userKeyFile) {
    channel.userCertFile = readFileSync(resolve(options.userCertFile));
    channel.userKeyFile = readFileSync(resolve(options.userKeyFile));
  }
  const { throwOnAppendFailure, keepAliveInterval, keepAliveTimeout, defaultDeadline, connectionName } = options;
  const client = { throwOnAppendFailure, keepAliveInterval, keepAliveTimeout, defaultDeadline, connectionName };
  const { nodePreference, discoveryInterval, gossipTimeout, maxDiscoverAttempts } = options;
  const cluster = { ...client, nodePreference, discoveryInterval, gossipTimeout, maxDiscoverAttempts };
  if (options.dnsDiscover) return new EventStoreDBClient({ ...cluster, discover: options.hosts[0] }, channel, credentials);
  if (options.hosts.length > 1) return new EventStoreDBClient({ ...cluster, endpoints: options.hosts }, channel, credentials);
  return new EventStoreDBClient({ ...client, endpoint: options.hosts[0] }, channel, credentials);
}

export class EsdbEventStore implements EventStore {
  readonly #client: EventStoreDBClient;
  readonly #readBatchSize: number;
  readonly #retryDelayMs: number;
  readonly #maxRetryDelayMs: number;
  readonly #pingTimeoutMs: number;
  readonly #subscriptions = new Set<Subscription>();
  #closed = false;

  /**
   * Connects lazily: the first call opens the gRPC channel, so this neither waits nor fails on an
   * absent server. A connection string the client cannot read is an EventStoreUrlError.
   */
  static connect(connectionString: string, options: EsdbEventStoreOptions = {}): EsdbEventStore {
    return new EsdbEventStore(clientOf(takeApart(connectionString, { quiet: false })), options);
  }

  /** The store owns the client: close() disposes it. */
  constructor(client: EventStoreDBClient, options: EsdbEventStoreOptions = {}) {
    this.#client = client;
    this.#readBatchSize = Math.max(2, options.readBatchSize ?? 500);
    this.#retryDelayMs = options.retryDelayMs ?? 50;
    this.#maxRetryDelayMs = options.maxRetryDelayMs ?? 5000;
    this.#pingTimeoutMs = options.pingTimeoutMs ?? 5000;
  }

  async append(streamId: string, events: NewEvent[], options: { expectedRevision: ExpectedRevision }): Promise<AppendResult> {
    this.#assertOpen();
    const expected = options?.expectedRevision;
    const clientExpected = toClientExpectedRevision(expected);
    checkNewEvents(streamId, events);
    if (events.length === 0) return this.#appendNothing(streamId, expected);

    // The ids are the caller's, so a retried append is recognised by the server and written once.
    const data = events.map((event) =>
      jsonEvent({
        id: event.id.toLowerCase(),
        type: event.type,
        data: event.data ?? {},
        ...(event.metadata ? { metadata: event.metadata } : {}),
      }),
    );
    let result;
    try {
      result = await this.#client.appendToStream(streamId, data, { expectedRevision: clientExpected });
    } catch (error) {
      if (error instanceof WrongExpectedVersionError) {
        throw new WrongExpectedRevisionError(streamId, expected, toActualRevision(error.actualVersion));
      }
      throw error;
    }
    if (!result.success) {
      // Only with throwOnAppendFailure=false in the connection string; the revision the client
      // reports then is not reliable (batch appends), so it is read.
      throw new WrongExpectedRevisionError(streamId, expected, (await this.#lastOfStream(streamId))?.revision ?? 'no_stream');
    }
    const nextExpectedRevision = Number(result.nextExpectedRevision);
    // The server reports one position per append. For a single event it is that event's; for
    // several events (and for an idempotent replay) it is not documented to be the last one's,
    // so the last event is read back: its position is then the one readStream and readAll show.
    if (events.length === 1 && result.position) return { nextExpectedRevision, position: formatPosition(result.position) };
    const position = (await this.#eventAt(streamId, nextExpectedRevision)) ?? result.position;
    if (!position) throw new Error(`EventStoreDB reported no position for the append to ${streamId}`);
    return { nextExpectedRevision, position: formatPosition(position) };
  }

  /** An empty append writes nothing on any store; it still answers the expected-revision check. */
  async #appendNothing(streamId: string, expected: ExpectedRevision): Promise<AppendResult> {
    const last = await this.#lastOfStream(streamId);
    const actual = last ? last.revision : 'no_stream';
    const ok = typeof expected === 'number' ? actual === expected : expected === 'no_stream' ? !last : expected === 'stream_exists' ? !!last : true;
    if (!ok) throw new WrongExpectedRevisionError(streamId, expected, actual);
    return { nextExpectedRevision: last ? last.revision : -1, position: last ? formatPosition(last.position) : '0/0' };
  }

  async #lastOfStream(streamId: string): Promise<{ revision: number; position: Position } | null> {
    try {
      const [last] = await collect(this.#client.readStream(streamId, { fromRevision: END, direction: BACKWARDS, maxCount: 1 }));
      const position = last ? positionOf(last as ResolvedLike) : undefined;
      return last?.event && position ? { revision: Number(last.event.revision), position } : null;
    } catch (error) {
      if (error instanceof StreamNotFoundError) return null;
      throw error;
    }
  }

  async #eventAt(streamId: string, revision: number): Promise<Position | undefined> {
    const [event] = await collect(this.#client.readStream(streamId, { fromRevision: BigInt(revision), maxCount: 1 }));
    return event ? positionOf(event as ResolvedLike) : undefined;
  }

  async readStream(streamId: string, options: { fromRevision?: number; maxCount?: number } = {}): Promise<StoredEvent[]> {
    this.#assertOpen();
    if (typeof streamId !== 'string' || streamId === '') throw new TypeError('streamId must be a non-empty string');
    checkRevision('fromRevision', options.fromRevision);
    checkMaxCount(options.maxCount);
    if (options.maxCount === 0) return [];
    let resolved;
    try {
      resolved = await collect(
        this.#client.readStream(streamId, {
          fromRevision: BigInt(options.fromRevision ?? 0),
          ...(options.maxCount !== undefined ? { maxCount: options.maxCount } : {}),
        }),
      );
    } catch (error) {
      if (error instanceof StreamNotFoundError) return [];
      throw error;
    }
    return resolved.flatMap((r) => toStoredEvent(r as ResolvedLike) ?? []);
  }

  async readAll(options: ReadAllOptions = {}): Promise<StoredEvent[]> {
    this.#assertOpen();
    let cursor = parsePosition(options.after);
    const upTo = parsePosition(options.upTo);
    if (upTo && cursor && comparePositions(upTo, cursor) < 0) throw new TypeError(`upTo ${options.upTo} is before after ${options.after}`);
    checkMaxCount(options.maxCount);
    checkFilter(options.filter);
    const limit = options.maxCount ?? Number.POSITIVE_INFINITY;
    const found: StoredEvent[] = [];
    if (limit === 0) return found;
    // This client reads $all without server-side filters (only subscriptions take them), so
    // pages are filtered here. A read from a position includes the event at that position,
    // which is the one already seen: it is skipped, which makes `after` exclusive.
    for (;;) {
      const page = await collect(this.#client.readAll({ fromPosition: cursor ?? START, maxCount: this.#readBatchSize }));
      let advanced = false;
      for (const resolved of page) {
        const position = positionOf(resolved);
        if (!position || (cursor && comparePositions(position, cursor) <= 0)) continue;
        // $all is read in order: the first event past the end bound ends the read.
        if (upTo && comparePositions(position, upTo) > 0) return found;
        cursor = position;
        advanced = true;
        const event = toStoredEvent(resolved);
        if (event && matchesFilter(event, options.filter)) {
          found.push(event);
          if (found.length >= limit) return found;
        }
      }
      if (page.length < this.#readBatchSize) return found;
      if (!advanced) throw new Error(`reading $all made no progress after position ${cursor ? formatPosition(cursor) : 'start'}`);
    }
  }

  /** $all holds no count: the events after `after` are read (up to `limit`) and counted. */
  async countAfter(after: string | null, limit: number): Promise<number> {
    return (await this.readAll({ after, maxCount: limit })).length;
  }

  subscribeAll(options: SubscribeAllOptions, onEvent: (event: StoredEvent) => Promise<void>): Subscription {
    this.#assertOpen();
    let cursor = parsePosition(options.after);
    const filter = options.filter;
    checkFilter(filter);
    const serverFilter = subscriptionFilter(filter);
    const abort = new AbortController();
    let current: AllStreamSubscription | undefined;

    // Handler failures are retried forever (infra/retry.ts says why), as in the sqlite adapter.
    const deliver = (event: StoredEvent): Promise<boolean> =>
      retryUntilDone(() => onEvent(event), { initialDelayMs: this.#retryDelayMs, maxDelayMs: this.#maxRetryDelayMs }, abort.signal);

    // One server subscription at a time, from the last position handled. When it drops (server
    // restart, leader change, network), a new one starts from there after a back-off that
    // grows while nothing gets through; onError is called only for a refusal no retry can change.
    let failing = false;
    const resumed = () => {
      if (!failing) return;
      failing = false;
      try {
        options.onReadResumed?.();
      } catch {
        // A subscriber's callback must not end the subscription.
      }
    };
    const run = async (): Promise<void> => {
      let delay = this.#retryDelayMs;
      while (!abort.signal.aborted) {
        const subscription = this.#client.subscribeToAll({ fromPosition: cursor ?? START, filter: serverFilter });
        subscription.on('error', ignore);
        // The server confirms a subscription once it runs: reads work again.
        subscription.on('confirmation', resumed);
        current = subscription;
        let failure: unknown;
        try {
          for await (const resolved of subscription as AsyncIterable<AllStreamResolvedEvent>) {
            if (abort.signal.aborted) break;
            const position = positionOf(resolved);
            // Whether or not the server repeats the event at the start position, this keeps
            // `after` exclusive, and drops anything already handled before a resubscribe.
            resumed();
            if (!position || (cursor && comparePositions(position, cursor) <= 0)) continue;
            const event = toStoredEvent(resolved);
            if (event && matchesFilter(event, filter) && !(await deliver(event))) break;
            cursor = position;
            delay = this.#retryDelayMs;
          }
        } catch (error) {
          failure = error;
        } finally {
          current = undefined;
          void subscription.unsubscribe().catch(ignore);
          subscription.destroy();
        }
        if (abort.signal.aborted) return;
        if (failure !== undefined && !isTransient(failure)) {
          options.onError?.(errorOf(failure));
          return;
        }
        if (failure !== undefined) {
          failing = true;
          try {
            options.onReadFailed?.(errorOf(failure), delay);
          } catch {
            // as above
          }
        }
        await sleep(delay, abort.signal);
        delay = Math.min(delay * 2, this.#maxRetryDelayMs);
      }
    };

    const done = Promise.resolve()
      .then(run)
      .catch((error: unknown) => {
        if (!abort.signal.aborted) options.onError?.(errorOf(error));
      });
    const subscription: Subscription = {
      stop: async () => {
        abort.abort();
        // Ends a wait for the next event at once; a running handler call is awaited through `done`.
        current?.destroy();
        await done;
        this.#subscriptions.delete(subscription);
      },
    };
    this.#subscriptions.add(subscription);
    return subscription;
  }

  async ping(): Promise<boolean> {
    if (this.#closed) return false;
    // Reads honour no deadline in this client, so the wait is bounded here.
    const read = this.#client.readAll({ fromPosition: START, maxCount: 1 });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), this.#pingTimeoutMs);
    });
    try {
      return await Promise.race([collect(read).then(() => true, () => false), timeout]);
    } finally {
      clearTimeout(timer);
      void read.cancel().catch(ignore);
    }
  }

  /** Stops every subscription (waiting for in-flight handler calls), then disposes the client. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((s) => s.stop()));
    await this.#client.dispose();
  }

  #assertOpen(): void {
    if (this.#closed) throw new Error('the event store is closed');
  }
}
