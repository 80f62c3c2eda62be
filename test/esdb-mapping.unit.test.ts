// The pure half of the EventStoreDB adapter: positions, revisions, filters, event mapping,
// connection strings and error classes. The I/O half runs in test/event-store.esdb.int.test.ts.
import {
  AccessDeniedError,
  CancelledError,
  DeadlineExceededError,
  EventStoreDBClient,
  InvalidArgumentError,
  StreamDeletedError,
  UnavailableError,
  UnknownError,
  UnsupportedError,
  convertToCommandError,
} from '@eventstore/db-client';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import {
  checkFilter,
  checkMaxCount,
  checkNewEvents,
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
  toRecord,
  toStoredEvent,
} from '../infra/esdb/mapping.ts';
import type { ResolvedLike } from '../infra/esdb/mapping.ts';

const MAX_U64 = (1n << 64n) - 1n;

function throwsType(fn: () => unknown, message: string): void {
  try {
    fn();
  } catch (error) {
    assert.instance(error, TypeError, message);
    return;
  }
  assert.unreachable(`${message}: expected a TypeError`);
}

test('positions round-trip through the opaque string, up to the unsigned 64-bit maximum', () => {
  for (const position of [{ commit: 0n, prepare: 0n }, { commit: 1234n, prepare: 1200n }, { commit: MAX_U64, prepare: MAX_U64 }]) {
    const text = formatPosition(position);
    assert.type(text, 'string');
    assert.equal(parsePosition(text), position);
  }
  assert.is(formatPosition({ commit: 42n, prepare: 7n }), '42/7');
  assert.is(parsePosition(null), null);
  assert.is(parsePosition(undefined), null);
});

test('parsePosition refuses what this adapter never hands out', () => {
  for (const bad of ['', 'abc', '12', '-1/0', '1/-1', '1/2/3', '1.5/2', ' 1/2', `${MAX_U64 + 1n}/0`, `0/${MAX_U64 + 1n}`, '123456789012345678901/0']) {
    throwsType(() => parsePosition(bad), `"${bad}"`);
  }
  throwsType(() => parsePosition(12 as unknown as string), 'a number');
});

test('comparePositions orders by commit, then prepare', () => {
  const p = (commit: number, prepare: number) => ({ commit: BigInt(commit), prepare: BigInt(prepare) });
  assert.is(comparePositions(p(5, 5), p(5, 5)), 0);
  assert.is(comparePositions(p(4, 9), p(5, 1)), -1);
  assert.is(comparePositions(p(6, 0), p(5, 9)), 1);
  assert.is(comparePositions(p(5, 3), p(5, 4)), -1);
  assert.is(comparePositions(p(5, 4), p(5, 3)), 1);
  // Beyond 2^53 the order must still be exact.
  assert.is(comparePositions({ commit: 2n ** 60n + 1n, prepare: 0n }, { commit: 2n ** 60n, prepare: 0n }), 1);
  const shuffled = [p(9, 9), p(1, 1), p(9, 3), p(3, 3)];
  assert.equal(shuffled.sort(comparePositions).map(formatPosition), ['1/1', '3/3', '9/3', '9/9']);
});

test('expected revisions map to the client constants and bigint revisions', () => {
  assert.is(toClientExpectedRevision('any'), 'any');
  assert.is(toClientExpectedRevision('no_stream'), 'no_stream');
  assert.is(toClientExpectedRevision('stream_exists'), 'stream_exists');
  assert.is(toClientExpectedRevision(0), 0n);
  assert.is(toClientExpectedRevision(41), 41n);
  for (const bad of [-1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 1, 'latest', undefined, null]) {
    throwsType(() => toClientExpectedRevision(bad as never), String(bad));
  }
});

test("the actual revision of a conflict is a number, or 'no_stream' however the server spells it", () => {
  assert.is(toActualRevision(0n), 0);
  assert.is(toActualRevision(17n), 17);
  assert.is(toActualRevision(3), 3);
  assert.is(toActualRevision('no_stream'), 'no_stream');
  assert.is(toActualRevision(-1n), 'no_stream');
  assert.is(toActualRevision(MAX_U64), 'no_stream');
  assert.is(toActualRevision(undefined), 'no_stream');
});

test('new events, filters and counts are checked as the sqlite adapter checks them', () => {
  const id = '0b5d3c1e-6b1f-4c3a-9a51-2a0f6f1d9e11';
  checkNewEvents('s-1', [{ id, type: 'A', data: {} }, { id: id.toUpperCase(), type: 'B', data: {} }]);
  checkNewEvents('s-1', []);
  throwsType(() => checkNewEvents('', [{ id, type: 'A', data: {} }]), 'empty stream id');
  throwsType(() => checkNewEvents('s-1', [{ id: 'not-a-uuid', type: 'A', data: {} }]), 'bad id');
  throwsType(() => checkNewEvents('s-1', [{ id, type: '', data: {} }]), 'empty type');
  checkFilter(undefined);
  checkFilter({ streamPrefixes: ['a'], eventTypePrefixes: ['B', 'C'] });
  throwsType(() => checkFilter({ streamPrefixes: [] }), 'empty prefix list');
  throwsType(() => checkFilter({ eventTypePrefixes: [1 as unknown as string] }), 'non-string prefix');
  checkMaxCount(undefined);
  checkMaxCount(0);
  throwsType(() => checkMaxCount(-1), 'negative maxCount');
  throwsType(() => checkMaxCount(2.5), 'fractional maxCount');
});

test('matchesFilter: any of the prefixes, both dimensions, literal characters, never system events', () => {
  const e = (streamId: string, type: string) => ({ streamId, type });
  assert.ok(matchesFilter(e('email-1', 'EmailAccepted'), undefined));
  assert.not.ok(matchesFilter(e('email-1', '$metadata'), undefined), 'system event types are dropped');
  assert.not.ok(matchesFilter(e('$ce-email', '$>'), { streamPrefixes: ['$ce'] }), 'even when a prefix asks for their stream');
  const byStream = { streamPrefixes: ['email-', 'domain-'] };
  assert.ok(matchesFilter(e('domain-9', 'X'), byStream));
  assert.not.ok(matchesFilter(e('user-1', 'X'), byStream));
  const both = { streamPrefixes: ['email-'], eventTypePrefixes: ['Email'] };
  assert.ok(matchesFilter(e('email-1', 'EmailAccepted'), both));
  assert.not.ok(matchesFilter(e('email-1', 'Unrelated'), both));
  assert.not.ok(matchesFilter(e('user-1', 'EmailAccepted'), both));
  assert.ok(matchesFilter(e('a_b%-1', 'x'), { streamPrefixes: ['a_b%'] }));
  assert.not.ok(matchesFilter(e('aXbZ-1', 'x'), { streamPrefixes: ['a_b%'] }), 'no wildcards');
});

test('subscriptionFilter narrows on the server by stream, else by type, else drops system events', () => {
  const streamPrefixes = ['email-'];
  const byStream = subscriptionFilter({ streamPrefixes, eventTypePrefixes: ['Email'] });
  assert.is(byStream.filterOn, 'streamName');
  assert.equal('prefixes' in byStream ? byStream.prefixes : null, ['email-']);
  streamPrefixes.push('later-');
  assert.equal('prefixes' in byStream ? byStream.prefixes : null, ['email-'], "the caller's array is copied");

  const byType = subscriptionFilter({ eventTypePrefixes: ['Email', 'Domain'] });
  assert.is(byType.filterOn, 'eventType');
  assert.equal('prefixes' in byType ? byType.prefixes : null, ['Email', 'Domain']);

  const none = subscriptionFilter(undefined);
  assert.is(none.filterOn, 'eventType');
  const regex = new RegExp('regex' in none ? none.regex : '(?!)');
  assert.ok(regex.test('EmailAccepted'));
  assert.not.ok(regex.test('$metadata'));

  // The client refuses a subscription whose checkpoint interval is not positive.
  for (const filter of [byStream, byType, none]) assert.ok(filter.checkpointInterval > 0);
});

test('toRecord keeps JSON objects and wraps everything else instead of dropping it', () => {
  const object = { a: 1, nested: { b: [1, 2] } };
  assert.is(toRecord(object), object);
  assert.equal(toRecord(undefined), {});
  assert.equal(toRecord(null), {});
  assert.equal(toRecord(new Uint8Array()), {});
  assert.equal(toRecord(new TextEncoder().encode('{"k":"v"}')), { k: 'v' });
  assert.equal(toRecord(new TextEncoder().encode('[1,2]')), { value: [1, 2] });
  assert.equal(toRecord(Uint8Array.from([0xff, 0x00, 0x10])), { value: Buffer.from([0xff, 0x00, 0x10]).toString('base64') });
  assert.equal(toRecord([1, 'x']), { value: [1, 'x'] });
  assert.equal(toRecord('text'), { value: 'text' });
});

function resolved(overrides: Partial<NonNullable<ResolvedLike['event']>> = {}, commitPosition?: bigint): ResolvedLike {
  return {
    event: {
      streamId: 'email-1',
      id: '0b5d3c1e-6b1f-4c3a-9a51-2a0f6f1d9e11',
      revision: 3n,
      type: 'EmailAccepted',
      data: { to: ['a@example.com'] },
      metadata: { correlationId: 'c-1' },
      created: new Date('2025-01-02T03:04:05.678Z'),
      position: { commit: 900n, prepare: 880n },
      ...overrides,
    },
    ...(commitPosition !== undefined ? { commitPosition } : {}),
  };
}

test('toStoredEvent maps a recorded event field by field', () => {
  assert.equal(toStoredEvent(resolved()), {
    id: '0b5d3c1e-6b1f-4c3a-9a51-2a0f6f1d9e11',
    streamId: 'email-1',
    revision: 3,
    position: '900/880',
    type: 'EmailAccepted',
    data: { to: ['a@example.com'] },
    metadata: { correlationId: 'c-1' },
    recordedAt: '2025-01-02T03:04:05.678Z',
  });
  assert.equal(toStoredEvent(resolved({ metadata: undefined }))!.metadata, {}, 'absent metadata is an empty object');
});

test('toStoredEvent: position falls back to the commit position; system and missing events are dropped', () => {
  assert.is(toStoredEvent(resolved({ position: undefined }, 777n))!.position, '777/777');
  assert.equal(positionOf(resolved({}, 1n)), { commit: 900n, prepare: 880n }, "the event's own position wins");
  assert.is(positionOf({}), undefined);
  assert.is(toStoredEvent(resolved({ type: '$metadata' })), null);
  assert.is(toStoredEvent({ commitPosition: 5n }), null);
  try {
    toStoredEvent(resolved({ position: undefined }));
    assert.unreachable('an event without any position cannot be mapped');
  } catch (error) {
    assert.match(String(error), /position/);
  }
});

test('kurrentdb:// and kurrent:// connection strings become esdb:// ones the client parses', () => {
  assert.is(clientConnectionString('kurrentdb://admin:changeit@db:2113?tls=false'), 'esdb://admin:changeit@db:2113?tls=false');
  assert.is(clientConnectionString('kurrentdb+discover://a:2113,b:2113'), 'esdb+discover://a:2113,b:2113');
  assert.is(clientConnectionString('KURRENT://db:2113'), 'esdb://db:2113');
  assert.is(clientConnectionString('esdb://db:2113?tls=false'), 'esdb://db:2113?tls=false');
  // Parsing connects nothing: the client opens its channel on the first call.
  for (const url of ['kurrentdb://127.0.0.1:2113?tls=false', 'kurrent+discover://a:2113,b:2113?tls=false']) {
    const client = EventStoreDBClient.connectionString(clientConnectionString(url));
    assert.ok(client instanceof EventStoreDBClient, url);
    void client.dispose();
  }
});

test('dropped subscriptions are retried unless the server refused for good', () => {
  // The errors as the client builds them from gRPC statuses (UNAVAILABLE, DEADLINE_EXCEEDED,
  // server-side CANCELLED, INTERNAL, UNAUTHENTICATED).
  const fromStatus = (code: number) => convertToCommandError(Object.assign(new Error(`status ${code}`), { code, details: `status ${code}` }));
  const transient = [fromStatus(14), fromStatus(4), fromStatus(1), fromStatus(13), new Error('socket hang up')];
  assert.equal(transient.slice(0, 4).map((e) => e.constructor), [UnavailableError, DeadlineExceededError, CancelledError, UnknownError]);
  for (const error of transient) assert.ok(isTransient(error), error.message);
  const refused = [fromStatus(16), new InvalidArgumentError('bad filter'), new UnsupportedError('subscribeToAll', '20.6'), new StreamDeletedError(undefined, '$all')];
  assert.instance(refused[0], AccessDeniedError);
  for (const error of refused) assert.not.ok(isTransient(error), error.constructor.name);
});

test.run();
