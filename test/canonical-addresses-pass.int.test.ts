// The one-off pass at start (apps/services/management/canonical-addresses.ts) that puts what
// versions before 2026-11-28 stored under an older form of an address (`"ann"@example.org`) under
// its canonical form (ann@example.org): suppression entries re-keyed, merged with an entry there
// already (the earlier block stays whole; the other's source is marked handled), email read models
// rewritten as the projection makes them of the upcast events; an address that needs its quotes
// left alone. Once: the second pass reads its mark and nothing else. Two passes at once end as one.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { CANONICAL_ADDRESSES_MARK, canonicalizeStoredAddresses } from '../apps/services/management/canonical-addresses.ts';
import { ensureManagementIndexes } from '../apps/services/management/indexes.ts';
import { wasHandled } from '../apps/services/management/suppression-sources.ts';
import type { SuppressionEntry, Workspace } from '../domain/management.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import type { EmailView } from '../projections/email-view.ts';

const test = suite('the canonical addresses pass');

const WS = 'ws_pass';
const T = (minute: number) => `2026-11-27T10:${String(minute).padStart(2, '0')}:00.000Z`;

function entry(address: string, fields: Partial<SuppressionEntry> = {}): SuppressionEntry {
  return { _id: `${WS}:${address}`, workspaceId: WS, address, reason: 'hard_bounce', emailId: null, createdAt: T(0), lastEventId: null, ...fields };
}

/** An email read model document as a version before 2026-11-28 projected it: a bounce of `to`. */
function view(id: string, to: string): EmailView {
  return {
    _id: id, projectId: 'prj_pass', workspaceId: WS, apiKeyId: 'key_pass', fromAddress: 'hello@example.com', fromDomain: 'example.com',
    toAddresses: [to], to: ['"Ann"@example.org'], cc: [], replyTo: null, subject: 'hi', status: 'hard_bounced', testMode: false, failureCode: null,
    createdAt: T(1), sentAt: T(2), deliveredAt: null, providerMessageId: null,
    recipients: [{ address: to, status: 'hard_bounced', occurredAt: T(3) }], webhookDeliveries: [], metadata: {}, tags: {},
    events: [
      { id: 'e0', type: 'email.queued', occurredAt: T(1), payload: { recipients: 1 } },
      { id: 'e3:hard_bounced', type: 'email.bounced', occurredAt: T(3), payload: { source: 'dsn', reason: '5.1.1 "ann"@example.org unknown', recipients: [{ address: to, status: '5.1.1', diagnosticCode: null }] } },
    ],
    streamRevision: 4,
    doneRecipients: [0],
  };
}

interface Ctx { dir: string; documents: SqliteDocumentStore }

async function fresh(ctx: Ctx): Promise<void> {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-canonical-pass-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'relay.db'));
  // A start on an empty store: nothing to do, and the mark says so.
  await ensureManagementIndexes(ctx.documents);
  await ctx.documents.collection(COLLECTIONS.checkpoints).delete(CANONICAL_ADDRESSES_MARK);
  const workspace = { _id: WS, name: 'pass', createdAt: T(0) } as unknown as Workspace;
  await ctx.documents.collection<Workspace>(COLLECTIONS.workspaces).insert(workspace);
  const entries = ctx.documents.collection<SuppressionEntry>(COLLECTIONS.suppressions);
  // ann: blocked as written with quotes first (a bounce), then without (a manual block).
  await entries.insert(entry('"ann"@example.org', { emailId: 'em_ann', createdAt: T(1), lastEventId: 'ev-ann' }));
  await entries.insert(entry('ann@example.org', { reason: 'manual', createdAt: T(5) }));
  // bob: the other way round: the entry without quotes is the earlier one.
  await entries.insert(entry('bob@example.org', { emailId: 'em_bob1', createdAt: T(1), lastEventId: 'ev-bob1' }));
  await entries.insert(entry('"bob"@example.org', { reason: 'complaint', emailId: 'em_bob2', createdAt: T(6), lastEventId: 'ev-bob2' }));
  // cid: only the quoted form; dan needs his quotes; eve was never quoted.
  await entries.insert(entry('"c\\id"@example.org', { emailId: 'em_cid', createdAt: T(2), lastEventId: 'ev-cid' }));
  await entries.insert(entry('"dan x"@example.org', { createdAt: T(3) }));
  await entries.insert(entry('eve@example.org', { createdAt: T(4) }));
  const emails = ctx.documents.collection<EmailView>(COLLECTIONS.emails);
  await emails.insert(view('em_old', '"ann"@example.org'));
  await emails.insert(view('em_new', 'ann@example.org'));
}

const cleanup = async (ctx: Ctx) => {
  await ctx.documents?.close();
  rmSync(ctx.dir, { recursive: true, force: true });
};

const listed = async ({ documents }: Ctx) =>
  (await documents.collection<SuppressionEntry>(COLLECTIONS.suppressions).find({ where: { workspaceId: WS }, orderBy: [['_id', 'asc']] }))
    .map(({ _v, ...stored }) => stored);

async function expectCanonical(ctx: Ctx): Promise<void> {
  assert.equal(await listed(ctx), [
    entry('"dan x"@example.org', { createdAt: T(3) }),
    // The earlier block stays whole: ann's bounce, under the canonical id.
    entry('ann@example.org', { emailId: 'em_ann', createdAt: T(1), lastEventId: 'ev-ann' }),
    entry('bob@example.org', { emailId: 'em_bob1', createdAt: T(1), lastEventId: 'ev-bob1' }),
    entry('cid@example.org', { emailId: 'em_cid', createdAt: T(2), lastEventId: 'ev-cid' }),
    entry('eve@example.org', { createdAt: T(4) }),
  ]);
  // The later block of bob, merged away: its complaint handled again cannot block bob after a removal.
  assert.ok(await wasHandled(ctx.documents, { workspaceId: WS, eventId: 'ev-bob2', address: 'bob@example.org' }));
  const emails = ctx.documents.collection<EmailView>(COLLECTIONS.emails);
  const { _v: oldVersion, ...old } = (await emails.get('em_old'))!;
  const { _v: newVersion, ...untouched } = (await emails.get('em_new'))!;
  assert.equal(old, view('em_old', 'ann@example.org'), 'as the projection makes it of the upcast events: `to` and the report\'s words as written');
  assert.equal(untouched, view('em_new', 'ann@example.org'));
  assert.is(oldVersion, 2);
  assert.is(newVersion, 1, 'a document in canonical form is not written');
}

test('re-keys, merges and rewrites what is in an older form; leaves the rest', async () => {
  const ctx = {} as Ctx;
  try {
    await fresh(ctx);
    assert.equal(await canonicalizeStoredAddresses(ctx.documents), { rekeyed: 3, merged: 2, emails: 1 });
    await expectCanonical(ctx);
    assert.is((await ctx.documents.collection<{ _id: string; done: boolean }>(COLLECTIONS.checkpoints).get(CANONICAL_ADDRESSES_MARK))?.done, true);
  } finally {
    await cleanup(ctx);
  }
});

test('once: the next pass finds its mark and changes nothing, even an entry in an older form made since', async () => {
  const ctx = {} as Ctx;
  try {
    await fresh(ctx);
    await canonicalizeStoredAddresses(ctx.documents);
    await ctx.documents.collection<SuppressionEntry>(COLLECTIONS.suppressions).insert(entry('"fay"@example.org'));
    assert.is(await canonicalizeStoredAddresses(ctx.documents), null);
    assert.ok(await ctx.documents.collection(COLLECTIONS.suppressions).get(`${WS}:"fay"@example.org`));
  } finally {
    await cleanup(ctx);
  }
});

test('two passes at once (two processes starting) end as one does', async () => {
  const ctx = {} as Ctx;
  try {
    await fresh(ctx);
    const other = new SqliteDocumentStore(join(ctx.dir, 'relay.db'));
    try {
      await Promise.all([canonicalizeStoredAddresses(ctx.documents), canonicalizeStoredAddresses(other)]);
    } finally {
      await other.close();
    }
    await expectCanonical(ctx);
  } finally {
    await cleanup(ctx);
  }
});

test.run();
