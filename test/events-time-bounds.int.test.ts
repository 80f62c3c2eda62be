// `relay events --since/--until` and `relay events export --from/--to` read a time bound as UTC
// unless it gives an offset: recordedAt, which the bound compares with, is UTC, so the same
// command gives the same events on machines in any time zone (the date-only form was UTC already;
// a date-time without a zone was read in the machine's zone). A date or time of day that does not
// exist (2026-02-30, 24:00) is refused (exit 2) with what is wrong, where it used to become another
// (2026-03-02). Driven through the real CLI as a child process on a real embedded event store, in
// a time zone twelve hours from UTC.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { loadConfig } from '../infra/config.ts';
import { accepted, toNewEvent } from './support/email-events.ts';
import { runRelay } from './support/relay-process.ts';

const test = suite('relay events: time bounds');
const dataDir = mkdtempSync(join(tmpdir(), 'relay-bounds-'));
let recordedAt = '';

test.before(async () => {
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
  try {
    await stores.events.append(emailStreamId('em_bound1'), [toNewEvent(accepted({ emailId: 'em_bound1' }))], { expectedRevision: 'no_stream' });
    [{ recordedAt }] = await stores.events.readAll({ maxCount: 1 });
  } finally {
    await stores.close();
  }
});

test.after(() => rmSync(dataDir, { recursive: true, force: true }));

// An operator in UTC+12 (Etc/GMT-12 is UTC+12 in the tz database's inverted sign).
const env = { RELAY_DATA_DIR: dataDir, TZ: 'Etc/GMT-12' };
const printed = (stdout: string) => stdout.trim().split('\n').filter(Boolean).length;
/** `ms` from when the event was recorded, in UTC, written without a zone (2026-11-01T10:00:00). */
const zoneless = (ms: number) => new Date(Date.parse(recordedAt) + ms).toISOString().slice(0, 19);

test('a bound without a zone is read as UTC, as recordedAt and the date-only form are, whatever the machine\'s zone', async () => {
  const later = zoneless(3_600_000);
  const withZone = await runRelay(['events', '--since', `${later}Z`], env);
  assert.is(withZone.code, 0, withZone.stderr);
  assert.is(printed(withZone.stdout), 0, 'sanity: nothing was recorded after the bound');
  const withoutZone = await runRelay(['events', '--since', later], env);
  assert.is(withoutZone.code, 0, withoutZone.stderr);
  assert.is(printed(withoutZone.stdout), 0, `--since ${later} printed an event recorded at ${recordedAt}: it was read as ${later}+12:00`);
  const exported = await runRelay(['events', 'export', '--from', later.replace('T', ' ')], env);
  assert.is(exported.code, 0, exported.stderr);
  assert.is(printed(exported.stdout), 0, `export --from "${later.replace('T', ' ')}" exported an event recorded before it`);
  // An hour before the event, the same bound selects it.
  const earlier = await runRelay(['events', '--since', zoneless(-3_600_000)], env);
  assert.is(earlier.code, 0, earlier.stderr);
  assert.is(printed(earlier.stdout), 1, 'the event recorded after the bound is printed');
});

test('an offset, when given, is honoured: the same instant written in another zone selects the same events', async () => {
  // An hour before the event in UTC, written as the wall time of UTC+02:00.
  const before = new Date(Date.parse(recordedAt) - 3_600_000 + 2 * 3_600_000).toISOString().slice(0, 19);
  const run = await runRelay(['events', 'export', '--to', `${before}+02:00`], env);
  assert.is(run.code, 0, run.stderr);
  assert.is(printed(run.stdout), 0, `export --to ${before}+02:00 (an hour before ${recordedAt}) exported it`);
  const after = await runRelay(['events', 'export', '--to', `${zoneless(3_600_000 + 2 * 3_600_000)}+0200`], env);
  assert.is(after.code, 0, after.stderr);
  assert.is(printed(after.stdout), 1, 'an hour after it, the event is exported');
});

test('a date or time that does not exist is refused (exit 2), not moved into the next month or day', async () => {
  for (const [args, problem] of [
    [['events', 'export', '--from', '2026-02-30'], '2026-02 has 28 days'],
    [['events', '--until', '2026-11-01T24:00:00'], 'hours go up to 23'],
    [['events', '--since', '2026-13-01'], 'no month 13'],
    [['events', 'export', '--to', '2026-11-01T10:00:00+24:00'], 'is no offset'],
  ] as const) {
    const run = await runRelay([...args], env);
    assert.is(run.code, 2, `${args.join(' ')}: exit ${run.code}; stderr: ${run.stderr.split('\n')[0]}`);
    assert.is(printed(run.stdout), 0, `${args.join(' ')} printed events`);
    assert.match(run.stderr.split('\n')[0], problem);
  }
  const leap = await runRelay(['events', 'export', '--to', '2028-02-29'], env);
  assert.is(leap.code, 0, `a leap day exists: ${leap.stderr}`);
});

test('the usage says how times are read', async () => {
  const help = await runRelay(['events', '--help'], env);
  assert.is(help.code, 0, help.stderr);
  assert.match(help.stdout, 'UTC unless an offset is given');
});

test.run();
