// `after` (inclusive) and `before` (exclusive) take every RFC 3339 date-time and bound at its
// instant. Bounds were compared as Date#toISOString strings: an instant in year 10000 is
// "+010000-…", which sorts before every stored "2026-…", so before=9999-12-31T23:59:59-01:00
// listed nothing and after= the same listed everything. And valid date-times were refused 400:
// years 0000-0099 (Date.UTC reads them as 1900-1999) and a lower-case "t" or "z" (RFC 3339 §5.6).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { isDateTime } from '../apps/api/validation.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { DASHBOARD_ORIGIN, populateTemplateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ t: TestApp; w: TemplateWorld; id: string; createdAt: string }>('list date bounds');
test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DASHBOARD_ORIGIN: DASHBOARD_ORIGIN }, { processors: ['projector'] });
  ctx.w = await populateTemplateWorld(ctx.t);
  const r = await ctx.t.app.inject({
    method: 'POST', url: '/v1/emails',
    headers: { authorization: `Bearer ${ctx.w.apiKey}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ from: `app@${ctx.w.domain}`, to: `ann@${ctx.w.domain}`, subject: 'Hi', text: 'x' }),
  });
  assert.is(r.statusCode, 202, r.body);
  ctx.id = r.json().id;
  for (let i = 0; i < 100 && (await list(ctx, '')).json().emails.length === 0; i++) await new Promise((ok) => setTimeout(ok, 50));
  ctx.createdAt = (await list(ctx, '')).json().emails[0].createdAt;
});
test.after(async ({ t }) => t.close());

type Ctx = { t: TestApp; w: TemplateWorld };
const list = ({ t, w }: Ctx, query: string) =>
  t.app.inject({ method: 'GET', url: `/v1/emails${query}`, headers: { authorization: `Bearer ${w.apiKey}` } });
const listAsMember = ({ t, w }: Ctx, query: string) =>
  t.app.inject({ method: 'GET', url: `/v1/projects/${w.projectId}/emails${query}`, headers: { cookie: w.owner.cookie } });

async function idsOf(ctx: Ctx, name: 'after' | 'before', dateTime: string): Promise<string[]> {
  const query = `?${name}=${encodeURIComponent(dateTime)}`;
  const [byKey, byMember] = [await list(ctx, query), await listAsMember(ctx, query)];
  assert.is(byKey.statusCode, 200, `${name}=${dateTime}: ${byKey.body}`);
  assert.is(byMember.statusCode, 200, `${name}=${dateTime} (member): ${byMember.body}`);
  const ids = (byKey.json().emails as Array<{ id: string }>).map((e) => e.id);
  assert.equal((byMember.json().emails as Array<{ id: string }>).map((e) => e.id), ids, `${name}=${dateTime}: the member's list agrees`);
  return ids;
}

test('instants in year 10000 and beyond: before lists the email, after lists nothing', async (ctx) => {
  for (const later of ['9999-12-31T23:59:59-01:00', '9999-12-31T23:59:59.9995Z', '9999-12-31t23:00:00-23:59']) {
    assert.equal(await idsOf(ctx, 'before', later), [ctx.id], `before=${later}`);
    assert.equal(await idsOf(ctx, 'after', later), [], `after=${later}`);
  }
});

test('instants in years 0000-0099, also before year 0000 by their offset: after lists the email, before lists nothing', async (ctx) => {
  for (const earlier of ['0000-01-01T00:30:00+01:00', '0000-01-01T00:00:00Z', '0001-01-01T00:00:00Z', '0099-12-31T23:59:59.999Z', '0000-02-29T12:00:00-12:00']) {
    assert.equal(await idsOf(ctx, 'after', earlier), [ctx.id], `after=${earlier}`);
    assert.equal(await idsOf(ctx, 'before', earlier), [], `before=${earlier}`);
  }
});

test('a lower-case "t" and "z" bound at the same instant as upper case: after inclusive, before exclusive', async (ctx) => {
  const exact = ctx.createdAt.replace('T', 't').replace('Z', 'z');
  assert.equal(await idsOf(ctx, 'after', exact), [ctx.id]);
  assert.equal(await idsOf(ctx, 'before', exact), []);
  const oneMsLater = new Date(Date.parse(ctx.createdAt) + 1).toISOString().toLowerCase();
  assert.equal(await idsOf(ctx, 'after', oneMsLater), []);
  assert.equal(await idsOf(ctx, 'before', oneMsLater), [ctx.id]);
  assert.equal(await idsOf(ctx, 'after', '2020-01-01t00:00:00z'), [ctx.id]);
});

test('after and before together, both beyond the four-digit years, select nothing and everything as they should', async (ctx) => {
  const both = (after: string, before: string) => list(ctx, `?after=${encodeURIComponent(after)}&before=${encodeURIComponent(before)}`);
  const ids = async (r: ReturnType<typeof both>) => {
    const response = await r;
    assert.is(response.statusCode, 200, response.body);
    return (response.json().emails as Array<{ id: string }>).map((e) => e.id);
  };
  assert.equal(await ids(both('0000-01-01T00:00:00+14:00', '9999-12-31T23:59:59-14:00')), [ctx.id]);
  assert.equal(await ids(both('9999-12-31T23:59:59-14:00', '9999-12-31T23:59:59-14:00')), []);
});

test('which date-times the API takes: RFC 3339 with calendar dates that exist', () => {
  const valid = [
    '2026-01-01T00:00:00Z', '2026-01-01t00:00:00z', '2026-01-01T00:00:00.123456789+05:30', '0000-01-01T00:00:00Z', '0000-02-29T00:00:00Z',
    '0099-12-31T23:59:59-00:00', '2024-02-29t23:59:59.5-23:59', '9999-12-31T23:59:59+00:00',
  ];
  const invalid = [
    '2026-02-29T00:00:00Z', '0100-02-29T00:00:00Z', '2026-04-31T00:00:00Z', '2026-00-01T00:00:00Z', '2026-13-01T00:00:00Z', '2026-01-00T00:00:00Z',
    '2026-01-01T24:00:00Z', '2026-01-01T00:60:00Z', '2026-12-31T23:59:60Z', '2026-01-01T00:00:00+24:00', '2026-01-01T00:00:00+01:60',
    '2026-01-01 00:00:00Z', '2026-01-01T00:00:00', '2026-01-01', '26-01-01T00:00:00Z', '+02026-01-01T00:00:00Z', '2026-01-01T00:00:00.Z', 'yesterday',
  ];
  for (const value of valid) assert.ok(isDateTime(value), value);
  for (const value of invalid) assert.not.ok(isDateTime(value), value);
});

test('stats take lower-case date-times as the same instants', async ({ t, w }) => {
  const stats = (from: string, to: string) => t.app.inject({
    method: 'GET', url: `/v1/projects/${w.projectId}/stats?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`, headers: { cookie: w.owner.cookie },
  });
  const upper = await stats('2026-01-01T00:00:00+01:00', '2026-01-02T00:00:00Z');
  const lower = await stats('2026-01-01t00:00:00+01:00', '2026-01-02t00:00:00z');
  assert.is(upper.statusCode, 200, upper.body);
  assert.is(lower.statusCode, 200, lower.body);
  assert.equal([lower.json().from, lower.json().to], [upper.json().from, upper.json().to]);
});

test('stats refuse a range that reaches out of the four-digit years in UTC (an offset can carry it there)', async ({ t, w }) => {
  const stats = (from: string, to: string) => t.app.inject({
    method: 'GET', url: `/v1/projects/${w.projectId}/stats?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`, headers: { cookie: w.owner.cookie },
  });
  const late = await stats('9999-12-31T00:00:00Z', '9999-12-31T23:59:59-01:00');
  assert.is(late.statusCode, 400, late.body);
  assert.equal(late.json().error, { code: 'validation_error', message: 'query.to: must fall within 0000-01-01T00:00:00Z and 9999-12-31T00:00:00Z' });
  const early = await stats('0000-01-01T00:00:00+01:00', '0000-01-02T00:00:00Z');
  assert.is(early.statusCode, 400, early.body);
  assert.match(early.json().error.message, 'query.from');
  const edge = await stats('9999-12-30T00:00:00Z', '9999-12-31T00:00:00Z');
  assert.is(edge.statusCode, 200, edge.body);
  assert.equal([edge.json().from, edge.json().to], ['9999-12-30T00:00:00.000Z', '9999-12-31T00:00:00.000Z']);
});

test('stats without from start a day before to, but never before 0000-01-01T00:00:00Z (the figures and the chart)', async ({ t, w }) => {
  const get = (path: string) => t.app.inject({ method: 'GET', url: `/v1/projects/${w.projectId}/${path}?to=0000-01-01T12:00:00Z`, headers: { cookie: w.owner.cookie } });
  const stats = await get('stats');
  assert.is(stats.statusCode, 200, stats.body);
  const body = stats.json() as { from: string; to: string; series: Array<{ period: string }> };
  assert.equal([body.from, body.to], ['0000-01-01T00:00:00.000Z', '0000-01-01T12:00:00.000Z']);
  assert.ok(body.series.length > 0 && body.series.every((p) => p.period.startsWith('0000-01-01T')), JSON.stringify(body.series.map((p) => p.period)));
  const chart = await get('stats/chart.svg');
  assert.is(chart.statusCode, 200, chart.body);
  const late = await t.app.inject({ method: 'GET', url: `/v1/projects/${w.projectId}/stats?to=2026-01-02T00:00:00Z`, headers: { cookie: w.owner.cookie } });
  assert.is(late.json().from, '2026-01-01T00:00:00.000Z', 'elsewhere, a day before to');
});

test.run();
