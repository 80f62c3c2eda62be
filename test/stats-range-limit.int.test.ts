// The stats range limits (hours cover at most 31 days, days at most 400) bound the periods an
// answer holds, so they hold for the range rounded out to whole periods, as the answer is: bounds
// at :30 over exactly 31 days round out to 745 hours, and are refused (400 validation_error),
// where whole hours over 31 days give the 744 periods allowed. Driven through
// GET /v1/projects/:id/stats and its chart on the real API.
import { randomBytes } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

const test = suite('stats: range limits on the rounded range');
let t: TestApp;
let owner: Caller;
let projectId = '';

test.before(async () => {
  t = await startTestApp();
  owner = await newCaller(t, `owner-${randomBytes(3).toString('hex')}@example.test`);
  ({ projectId } = await workspaceWithProject(t, owner, 'production'));
});

test.after(async () => {
  await t.close();
});

const stats = (query: string, path = 'stats') => call(t, 'GET', `/v1/projects/${projectId}/${path}?${query}`, { as: owner });

test('hours: 31 days of whole hours are 744 periods; the same length at :30 rounds out to 745 and is refused', async () => {
  const whole = await stats('from=2026-10-01T00:00:00Z&to=2026-11-01T00:00:00Z&granularity=hour');
  assert.is(whole.statusCode, 200, whole.body);
  assert.is(whole.json().series.length, 744);
  const inside = await stats('from=2026-10-01T00:30:00Z&to=2026-11-01T00:00:00Z&granularity=hour');
  assert.is(inside.statusCode, 200, `rounded out it is the 744 hours above: ${inside.body}`);
  assert.is(inside.json().series.length, 744);
  for (const path of ['stats', 'stats/chart.svg']) {
    const halves = await stats('from=2026-10-01T00:30:00Z&to=2026-11-01T00:30:00Z&granularity=hour', path);
    assert.is(halves.statusCode, 400, `${path}: ${halves.statusCode} ${halves.body.slice(0, 200)}`);
    assert.is(halves.json().error.code, 'validation_error');
    assert.match(halves.json().error.message, /31 days/);
  }
});

test('days: 400 whole days are allowed; 400 days from noon to noon round out to 401 and are refused', async () => {
  const whole = await stats('from=2025-10-01T00:00:00Z&to=2026-11-05T00:00:00Z&granularity=day');
  assert.is(whole.statusCode, 200, whole.body);
  assert.is(whole.json().series.length, 400);
  const noon = await stats('from=2025-10-01T12:00:00Z&to=2026-11-05T12:00:00Z&granularity=day');
  assert.is(noon.statusCode, 400, `${noon.statusCode} ${noon.body.slice(0, 200)}`);
  assert.match(noon.json().error.message, /400 days/);
});

test.run();
