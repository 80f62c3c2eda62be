// The one liveness shape (infra/liveness.ts) and the one rule that judges it (apps/liveness.ts):
// states and their changes, failures by place, progress, work waiting (told or probed), and
// when a part is not ready: stopped, recovering for the threshold, or work waiting with no
// progress for the threshold (or stuck by its own account).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Liveness, type PartState, type PartStatus } from '../infra/liveness.ts';
import { judge, PartsLiveness } from '../apps/liveness.ts';
import { Backoff } from '../infra/retry.ts';

const test = suite('liveness');

function clock(start = Date.parse('2026-03-01T10:00:00Z')) {
  let now = start;
  return { now: () => new Date(now), advance: (ms: number) => void (now += ms), ms: () => now };
}

test('a part starts running, its start counting as its last progress', () => {
  const c = clock();
  const status = new Liveness(c.now).snapshot();
  assert.equal(status, { state: 'running', since: c.now().toISOString(), lastProgressAt: c.now().toISOString(), workWaiting: false, waitingSince: null, error: null, stuck: null });
});

test('a failure makes it recovering until the place that failed succeeds; every change is told once', () => {
  const c = clock();
  const liveness = new Liveness(c.now);
  const changes: Array<[PartState, PartState, string | null]> = [];
  liveness.onChange((status, previous) => changes.push([previous, status.state, status.error]));
  c.advance(1000);
  liveness.failed(new Error('read refused'), 'read');
  c.advance(1000);
  liveness.failed(new Error('read refused again'), 'read');
  assert.is(liveness.snapshot().state, 'recovering');
  assert.is(liveness.snapshot().error, 'read refused again', 'the latest failure');
  assert.is(liveness.snapshot().since, '2026-03-01T10:00:01.000Z', 'recovering since the first failure');
  liveness.succeeded('publish');
  assert.is(liveness.snapshot().state, 'recovering', 'another place succeeding does not end it');
  c.advance(1000);
  liveness.succeeded('read');
  assert.is(liveness.snapshot().state, 'running');
  assert.is(liveness.snapshot().error, null);
  assert.equal(changes, [['running', 'recovering', 'read refused'], ['recovering', 'running', null]]);
});

test('two places failing: it runs again only once both succeeded', () => {
  const liveness = new Liveness();
  liveness.failed(new Error('a'), 'read');
  liveness.failed(new Error('b'), 'publish');
  liveness.progress('read');
  assert.is(liveness.state, 'recovering');
  assert.is(liveness.snapshot().error, 'b');
  liveness.progress('publish');
  assert.is(liveness.state, 'running');
});

test('progress moves lastProgressAt; stopped is final and keeps its error', () => {
  const c = clock();
  const liveness = new Liveness(c.now);
  c.advance(5000);
  liveness.progress();
  assert.is(liveness.snapshot().lastProgressAt, '2026-03-01T10:00:05.000Z');
  liveness.stopped(new Error('access denied'));
  liveness.failed(new Error('later'));
  liveness.succeeded();
  assert.is(liveness.state, 'stopped');
  assert.is(liveness.snapshot().error, 'access denied');
});

test('work waiting: told, or probed, since when it was first seen; a probe that fails counts as work waiting', async () => {
  const c = clock();
  const liveness = new Liveness(c.now);
  c.advance(1000);
  liveness.setWaiting(true);
  c.advance(1000);
  liveness.setWaiting(true);
  assert.is((await liveness.status()).workWaiting, true);
  assert.is(liveness.snapshot().waitingSince, '2026-03-01T10:00:01.000Z');
  liveness.setWaiting(false);
  assert.is(liveness.snapshot().waitingSince, null);
  let lag = 0;
  liveness.probeWaiting(async () => lag > 0);
  assert.is((await liveness.status()).workWaiting, false);
  lag = 3;
  assert.is((await liveness.status()).workWaiting, true);
  liveness.probeWaiting(async () => {
    throw new Error('the lag cannot be read');
  });
  assert.is((await liveness.status()).workWaiting, true);
});

const status = (over: Partial<PartStatus>): PartStatus => ({
  state: 'running', since: '2026-03-01T10:00:00.000Z', lastProgressAt: '2026-03-01T10:00:00.000Z', workWaiting: false, waitingSince: null, error: null, stuck: null, ...over,
});
const at = (iso: string) => Date.parse(iso);

test('the rule: stopped is not ready; so is recovering for the threshold; a shorter recovery is', () => {
  assert.equal(judge(status({ state: 'stopped', error: 'access denied' }), at('2026-03-01T10:00:01Z'), 60_000), { ready: false, reason: 'stopped: access denied' });
  assert.equal(judge(status({ state: 'stopped' }), at('2026-03-01T10:00:01Z'), 60_000), { ready: false, reason: 'stopped' });
  assert.equal(judge(status({ state: 'recovering', error: 'refused' }), at('2026-03-01T10:00:59Z'), 60_000), { ready: true, reason: null });
  assert.equal(judge(status({ state: 'recovering', error: 'refused' }), at('2026-03-01T10:01:00Z'), 60_000), { ready: false, reason: 'recovering for 60 s: refused' });
});

test('the rule: work waiting with no progress for the threshold is not ready; idle without work is', () => {
  const idle = status({ lastProgressAt: '2026-03-01T09:00:00.000Z' });
  assert.equal(judge(idle, at('2026-03-01T10:00:00Z'), 60_000), { ready: true, reason: null }, 'nothing to do: an hour without progress is fine');
  const arrived = { ...idle, workWaiting: true, waitingSince: '2026-03-01T10:00:00.000Z' };
  assert.equal(judge(arrived, at('2026-03-01T10:00:01Z'), 60_000), { ready: true, reason: null }, 'work that just arrived after an idle hour');
  assert.equal(judge(arrived, at('2026-03-01T10:01:00Z'), 60_000), { ready: false, reason: 'work waiting and no progress for 60 s' });
  assert.equal(judge({ ...arrived, lastProgressAt: '2026-03-01T10:00:30.000Z' }, at('2026-03-01T10:01:00Z'), 60_000), { ready: true, reason: null }, 'progress while it waits');
  assert.equal(judge(status({ workWaiting: true }), at('2026-03-01T10:00:30Z'), 60_000), { ready: true, reason: null });
  assert.equal(judge(status({ workWaiting: true }), at('2026-03-01T10:00:01.5Z'), 1_000), { ready: false, reason: 'work waiting and no progress for 1.5 s' });
  assert.equal(judge(status({ stuck: 'held one record for 61 s' }), at('2026-03-01T10:00:01Z'), 60_000), { ready: false, reason: 'stuck: held one record for 61 s' });
});

test('parts of a process and of another thread are judged together; changes of state are logged', async () => {
  const lines: Array<[string, string]> = [];
  const logger = {
    info: (_: object, message: string) => void lines.push(['info', message]),
    warn: (_: object, message: string) => void lines.push(['warn', message]),
    error: (_: object, message: string) => void lines.push(['error', message]),
  };
  const parts = new PartsLiveness({ stuckAfterMs: 60_000, logger });
  const forwarder = new Liveness();
  parts.add('forwarder', forwarder);
  parts.addRemote(async () => ({ sender: status({ state: 'stopped', error: 'its consumer stopped' }) }));
  forwarder.failed(new Error('disk I/O error'));
  forwarder.progress();
  const report = await parts.report();
  assert.equal(Object.keys(report).sort(), ['forwarder', 'sender']);
  assert.is(report.forwarder.ready, true);
  assert.is(report.sender.ready, false);
  assert.is(report.sender.reason, 'stopped: its consumer stopped');
  assert.is(lines[0][0], 'warn');
  assert.match(lines[0][1], 'forwarder is recovering: disk I/O error');
  assert.is(lines[1][0], 'info');
  assert.match(lines[1][1], /forwarder recovered after \d/);
  forwarder.stopped(new Error('access denied'));
  assert.equal(lines[2], ['error', 'forwarder stopped: access denied']);
});

test('back-off: doubles from the first delay to the cap, and starts again after a reset', () => {
  const backoff = new Backoff({ initialDelayMs: 100, maxDelayMs: 500 });
  assert.equal([backoff.next(), backoff.next(), backoff.next(), backoff.next(), backoff.next()], [100, 200, 400, 500, 500]);
  backoff.reset();
  assert.is(backoff.next(), 100);
});

test.run();
