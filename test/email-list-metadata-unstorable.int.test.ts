// Defect: POST /v1/emails accepts any JSON object as `metadata` (free-form: interface.md
// "metadata | object | Optional. Free-form application data, retained by the service";
// INTERFACE-DECISIONS "Limits of headers and metadata" bounds only its size, depth and
// string lengths), and the email read model stores it as a nested document
// (projections/email-view.ts). The embedded store keeps any JSON; the MongoDB adapter hands it
// to the server as it is, and the distributed store refuses some of what the API accepted:
// keys holding "." or beginning with "$" and arrays inside arrays (FerretDB), NUL in a string
// (FerretDB on PostgreSQL: jsonb has no \u0000). The projector's insert fails every time, the
// event is parked, and the email, answered 202, never appears in GET /v1/emails (nor the
// dashboard's list, nor a recipient or status filter) in distributed mode, while the same
// request is listed in embedded mode. Ordinary metadata shows it: {"order.id": 42} is a
// common key, [[lat, lng], …] a common value.
// Correct: an email the API admitted is listed in either mode, with its metadata as sent.
import * as assert from 'uvu/assert';
import { skippableSuite } from './support/skippable-suite.ts';
import { distributedSkipReason, listedIds, parkedOf, startListApp, type ListApp, type Mode } from './support/list-modes.ts';
import { sendEmail } from './support/templates.ts';
import { waitUntil } from './support/eventually.ts';

const METADATA: Record<string, Record<string, unknown>> = {
  'a key with a dot': { 'order.id': 42 },
  'a key beginning with $': { $amount: '9.99' },
  'an array of arrays': { route: [[52.52, 13.4], [48.14, 11.58]] },
  'a NUL character in a string': { note: 'before\u0000after' },
};

for (const mode of ['embedded', 'distributed'] as Mode[]) {
  const test = skippableSuite<{ app: ListApp; ids: Record<string, string> }>(`email list (${mode}): emails whose metadata the API accepted`, mode === 'distributed' ? distributedSkipReason() : undefined);

  test.before(async (ctx) => {
    ctx.app = await startListApp(mode);
    ctx.ids = {};
    const { t, w } = ctx.app;
    for (const [label, metadata] of Object.entries(METADATA)) {
      const sent = await sendEmail(t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, subject: label, text: 'x', metadata });
      assert.is(sent.statusCode, 202, `${label}: ${sent.body}`);
      ctx.ids[label] = sent.json().id;
    }
  });

  test.after(async (ctx) => {
    await ctx.app?.close();
  });

  test('each is listed, or else the projector has parked its event', async (ctx) => {
    // The positive marker either way: the email listed, or its event given up on.
    await waitUntil(async () => {
      const listed = new Set(await listedIds(ctx.app));
      for (const id of Object.values(ctx.ids)) if (!listed.has(id) && (await parkedOf(ctx.app, id)) === null) return false;
      return true;
    }, 'every email is listed or parked', 60_000);
    const listed = new Set(await listedIds(ctx.app));
    const problems: string[] = [];
    for (const [label, id] of Object.entries(ctx.ids)) {
      if (listed.has(id)) continue;
      problems.push(`${label}: ${id} is not listed; the projector parked it: ${(await parkedOf(ctx.app, id))?.error}`);
    }
    assert.equal(problems, [], `emails admitted with 202 are missing from GET /v1/emails:\n${problems.join('\n')}`);
  });

  test('the detail shows the metadata as sent', async (ctx) => {
    const { t, w } = ctx.app;
    for (const [label, metadata] of Object.entries(METADATA)) {
      const r = await t.app.inject({ method: 'GET', url: `/v1/emails/${ctx.ids[label]}`, headers: { authorization: `Bearer ${w.apiKey}` } });
      assert.is(r.statusCode, 200, `${label}: ${r.body}`);
      assert.equal(r.json().metadata, metadata, label);
    }
  });

  test.run();
}
