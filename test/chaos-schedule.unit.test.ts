// The chaos run's kill schedule (test/chaos/schedule.ts): a seed replays it exactly.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { killSchedule } from './chaos/schedule.ts';

const test = suite('chaos kill schedule');
const options = { seed: 42, intervalMs: 1000, durationMs: 60_000, targets: ['api', 'sender', 'sender', 'forwarder'] };

test('the same seed gives the same schedule; another seed another one', () => {
  assert.equal(killSchedule(options), killSchedule({ ...options }));
  assert.not.equal(killSchedule(options), killSchedule({ ...options, seed: 43 }));
});

test('gaps are 0.5 to 1.5 intervals, every kill before the end, every part one of the targets', () => {
  const kills = killSchedule(options);
  assert.ok(kills.length >= 40 && kills.length <= 120, `${kills.length} kills`);
  let previous = 0;
  for (const kill of kills) {
    assert.ok(kill.atMs - previous >= 499 && kill.atMs - previous <= 1501, `gap ${kill.atMs - previous}`);
    assert.ok(kill.atMs < options.durationMs);
    assert.ok(options.targets.includes(kill.part));
    previous = kill.atMs;
  }
});

test('a part listed twice is picked about twice as often', () => {
  const kills = killSchedule({ ...options, durationMs: 3_000_000 });
  const count = (part: string) => kills.filter((k) => k.part === part).length;
  const ratio = count('sender') / count('api');
  assert.ok(ratio > 1.6 && ratio < 2.4, `sender/api ${ratio}`);
});

test('no target: refused', () => {
  assert.throws(() => killSchedule({ ...options, targets: [] }), /no part to kill/);
});

test.run();
