// The temporary copies an outbox write makes (`.<emailId>.eml.<hex>.tmp`,
// `.<emailId>.envelope.json.<hex>.tmp`: the whole message, body and BCC in clear) do not outlive
// a write that died: the retention sweep deletes those of emails whose content can no longer be
// read, and any older than a write lasts (ABANDONED_TEMP_AFTER_MS); a starting outbox thread
// deletes the latter too. A young copy of a live email stays: its write may still be running.
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startRetention } from '../apps/pipeline/retention.ts';
import { takeContentKey } from '../apps/services/content-vault.ts';
import { DELIVERY_POLICY } from '../domain/email/delivery.ts';
import { ABANDONED_TEMP_AFTER_MS, OutboxTransport } from '../infra/mail/outbox-transport.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { startFixture } from './support/fixture-process.ts';
import { waitUntil } from './support/eventually.ts';

interface Context {
  root: string;
  outbox: string;
  documents: SqliteDocumentStore;
  events: SqliteEventStore;
}

const test = suite<Context>('outbox temporary copies and retention');

test.before.each((ctx) => {
  ctx.root = mkdtempSync(join(tmpdir(), 'relay-outbox-temps-'));
  ctx.outbox = join(ctx.root, 'outbox');
  ctx.documents = new SqliteDocumentStore(join(ctx.root, 'relay.db'));
  ctx.events = new SqliteEventStore(join(ctx.root, 'relay.db'));
});

test.after.each(async (ctx) => {
  await ctx.documents.close();
  await ctx.events.close();
  rmSync(ctx.root, { recursive: true, force: true });
});

async function sweep(ctx: Context, now: Date): Promise<void> {
  const retention = await startRetention({ documents: ctx.documents, events: ctx.events, deliveryPolicy: DELIVERY_POLICY, outboxDir: ctx.outbox, now: () => now });
  await retention.stop();
}

/** A temporary copy as a write makes it, last written `ageMs` ago. */
function temp(outbox: string, name: string, ageMs: number): string {
  mkdirSync(outbox, { recursive: true, mode: 0o700 });
  writeFileSync(join(outbox, name), 'SECRET-BODY', { mode: 0o600 });
  const at = new Date(Date.now() - ageMs);
  utimesSync(join(outbox, name), at, at);
  return name;
}

test('after a SIGKILL mid-write, a sweep right away deletes every copy of an email whose content is gone', async (ctx) => {
  // Crash the writer until a crash lands mid-write (usually the first).
  let leftovers: string[] = [];
  for (let tries = 0; tries < 10 && leftovers.length === 0; tries++) {
    const writer = startFixture(new URL('./fixtures/outbox-writer.ts', import.meta.url), [ctx.outbox]);
    await writer.waitForLine((line) => line === 'writing', 'the writer runs');
    const before = (() => { try { return readdirSync(ctx.outbox).length; } catch { return 0; } })();
    await waitUntil(() => { try { return readdirSync(ctx.outbox).length > before + 4; } catch { return false; } }, 'a few messages written', 10_000);
    writer.child.kill('SIGKILL');
    await writer.exited;
    leftovers = readdirSync(ctx.outbox).filter((name) => name.endsWith('.tmp'));
  }
  assert.ok(leftovers.length > 0, 'a crash landed mid-write');
  // No content key exists for any of these emails (as once the sweep destroyed them), and the
  // copies are seconds old: the content alone decides.
  await sweep(ctx, new Date());
  const holdingBody = readdirSync(ctx.outbox).filter((name) => readFileSync(join(ctx.outbox, name)).includes('SECRET-BODY'));
  assert.equal(holdingBody, [], 'files still holding a body');
});

test('a live email\'s copy stays while a write could still be making it, and goes once older than any write lasts', async (ctx) => {
  const now = new Date();
  await takeContentKey(ctx.documents, new SecretBox({ current: randomBytes(32), previous: [] }), 'em_live', now);
  const young = temp(ctx.outbox, '.em_live.eml.0123456789ab.tmp', 1_000);
  temp(ctx.outbox, '.em_live.envelope.json.ba9876543210.tmp', ABANDONED_TEMP_AFTER_MS + 60_000);
  const unrelated = temp(ctx.outbox, '.notes.tmp', ABANDONED_TEMP_AFTER_MS + 60_000);
  await sweep(ctx, now);
  assert.equal(readdirSync(ctx.outbox).sort(), [unrelated, young].sort(), 'the abandoned copy went; the young one and a file not of the outbox stay');
  await sweep(ctx, new Date(now.getTime() + ABANDONED_TEMP_AFTER_MS + 1_000));
  assert.equal(readdirSync(ctx.outbox), [unrelated]);
});

test('a starting outbox thread deletes the copies older than any write lasts, and only those', async (ctx) => {
  const young = temp(ctx.outbox, '.em_young.eml.0123456789ab.tmp', 1_000);
  const abandoned = temp(ctx.outbox, '.em_old.eml.ba9876543210.tmp', ABANDONED_TEMP_AFTER_MS + 60_000);
  const transport = new OutboxTransport(ctx.outbox);
  try {
    await transport.send({ emailId: 'em_new', envelope: { mailFrom: 'b@bounce.example.test', recipients: ['ann@example.org'] }, raw: Buffer.from('Subject: x\r\n\r\ny\r\n'), messageId: 'm@example.test' });
    await waitUntil(() => !readdirSync(ctx.outbox).includes(abandoned), 'the abandoned copy is deleted', 5_000);
    assert.equal(readdirSync(ctx.outbox).sort(), [young, 'em_new.eml', 'em_new.envelope.json'].sort());
  } finally {
    await transport.close();
  }
});

test.run();
