// Defect: in distributed mode on FerretDB (PostgreSQL), an email to many recipients with long
// addresses is never listed. The email list's `project_recipient` index
// (apps/services/email-reads.ts) declares toAddresses its arrayField: MongoDB keeps one index
// entry per address (multikey), but FerretDB v1 indexes the expression `_jsonb -> 'toAddresses'`,
// the whole array in one PostgreSQL btree entry, which may hold at most 2,704 bytes. Fifty To
// addresses of about 60 characters (what the API accepts: 50 recipients, addresses up to 254)
// pass that, the projector's insert fails ("index row size … exceeds btree version 4 maximum
// 2704"), the event is parked, and the email, answered 202, is missing from GET /v1/emails
// and from its `recipient` filter. The embedded store indexes each address apart and lists it.
// FerretDB never reads through a secondary index (infra/engines/README.md, "Query plans"), so
// the index costs it writes and buys nothing.
// Correct: an email the API admitted is listed, in either mode (IndexSpec.arrayField "changes
// no query's answer", infra/ports/document-store.ts).
import { randomBytes } from 'node:crypto';
import * as assert from 'uvu/assert';
import { skippableSuite } from './support/skippable-suite.ts';
import { distributedSkipReason, listedIds, parkedOf, startListApp, type ListApp, type Mode } from './support/list-modes.ts';
import { sendEmail } from './support/templates.ts';
import { waitUntil } from './support/eventually.ts';

/** A local part of `length` letters and digits, as unique per recipient as generated addresses are. */
const localPart = (length: number) => randomBytes(length).toString('base64url').replace(/[-_]/g, 'x').slice(0, length).toLowerCase();

for (const mode of ['embedded', 'distributed'] as Mode[]) {
  const test = skippableSuite<{ app: ListApp; id: string; to: string[] }>(`email list (${mode}): an email to fifty long addresses`, mode === 'distributed' ? distributedSkipReason() : undefined);

  test.before(async (ctx) => {
    ctx.app = await startListApp(mode);
    const { t, w } = ctx.app;
    ctx.to = Array.from({ length: 50 }, (_, i) => `reply.${localPart(44)}.${i}@${w.domain}`);
    const sent = await sendEmail(t, w.apiKey, { from: `app@${w.domain}`, to: ctx.to, subject: 'Many', text: 'x' });
    assert.is(sent.statusCode, 202, sent.body);
    ctx.id = sent.json().id;
  });

  test.after(async (ctx) => {
    await ctx.app?.close();
  });

  test('is listed, and found by each recipient', async (ctx) => {
    await waitUntil(async () => (await listedIds(ctx.app)).includes(ctx.id) || (await parkedOf(ctx.app, ctx.id)) !== null, 'the email is listed or parked', 60_000);
    const parked = await parkedOf(ctx.app, ctx.id);
    assert.ok((await listedIds(ctx.app)).includes(ctx.id), `${ctx.id} is not listed; the projector parked it: ${parked?.error}`);
    for (const address of [ctx.to[0], ctx.to[49]]) {
      assert.equal(await listedIds(ctx.app, `&recipient=${encodeURIComponent(address)}`), [ctx.id], address);
    }
  });

  test.run();
}
