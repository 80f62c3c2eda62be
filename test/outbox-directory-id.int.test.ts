// The outbox directory's id (infra/mail/outbox-transport.ts outboxInstance, the transport's
// `instance`), which a claim records so that recovery asks only the outbox it wrote to
// (test/outbox-recover-asks-only-its-own-outbox.int.test.ts): made once, atomically, in the
// directory by the first transport that warms there, read by every later one (another process,
// a restart); another directory has another. It is no message (listings, retention skip it),
// and an outbox that cannot hold one leaves the transport without an instance: sends go on as
// before, and recovery asks it nothing.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { observedBySites, SiteRegistry } from '../apps/services/delivery/sites.ts';
import { listOutbox, OUTBOX_ID_FILE, outboxEmailIds, OutboxTransport } from '../infra/mail/outbox-transport.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';

interface Context {
  root: string;
  opened: OutboxTransport[];
}

const test = suite<Context>('outbox: the directory\'s id');

test.before.each((ctx) => {
  ctx.root = mkdtempSync(join(tmpdir(), 'relay-outbox-id-'));
  ctx.opened = [];
});

test.after.each(async (ctx) => {
  await Promise.all(ctx.opened.map((t) => t.close()));
  rmSync(ctx.root, { recursive: true, force: true });
});

const open = (ctx: Context, dir: string): OutboxTransport => {
  const transport = new OutboxTransport(dir);
  ctx.opened.push(transport);
  return transport;
};

const message = (emailId: string): OutgoingMessage => ({
  emailId, envelope: { mailFrom: 'b@bounce.example.test', recipients: ['ann@example.org'] }, raw: Buffer.from('Subject: hi\r\n\r\nhi\r\n'), messageId: `${emailId}@example.test`,
});

test('transports warming at once on a new directory agree on one id, made in it once; a restart reads it; another directory has another', async (ctx) => {
  const dir = join(ctx.root, 'data', 'outbox');
  const together = [open(ctx, dir), open(ctx, dir), open(ctx, dir)];
  assert.is(together[0].instance, undefined, 'unknown before warm');
  await Promise.all(together.map((t) => t.warm()));
  const [id] = together.map((t) => t.instance);
  assert.type(id, 'string');
  assert.equal(together.map((t) => t.instance), [id, id, id]);
  assert.equal(readdirSync(dir), [OUTBOX_ID_FILE], 'the id file alone: no temporary copy left');
  assert.is(readFileSync(join(dir, OUTBOX_ID_FILE), 'utf8').trim(), id);
  assert.is(statSync(dir).mode & 0o777, 0o700, 'the directory made as a write makes it');
  assert.is(statSync(join(dir, OUTBOX_ID_FILE)).mode & 0o777, 0o600);

  const restarted = open(ctx, dir);
  await restarted.warm();
  assert.is(restarted.instance, id);

  const other = open(ctx, join(ctx.root, 'other', 'outbox'));
  await other.warm();
  assert.type(other.instance, 'string');
  assert.is.not(other.instance, id);
});

test('the id file is no message: listings leave it out, and sends write beside it', async (ctx) => {
  const dir = join(ctx.root, 'outbox');
  const transport = open(ctx, dir);
  await transport.warm();
  const sent = await transport.send(message('em_one'));
  assert.is(sent.recipients[0].result, 'accepted');
  assert.equal((await listOutbox(dir)).map((e) => e.emailId), ['em_one']);
  assert.equal(await outboxEmailIds(dir), ['em_one']);
});

test('an outbox path that is not a directory: warm settles without an id, and a send is deferred as before', async (ctx) => {
  const dir = join(ctx.root, 'outbox');
  writeFileSync(dir, 'not a directory');
  const transport = open(ctx, dir);
  await transport.warm();
  assert.is(transport.instance, undefined);
  const sent = await transport.send(message('em_one'));
  assert.is(sent.recipients[0].result, 'deferred');
});

test('an id file that holds no id: no id, and the file is left as it is', async (ctx) => {
  const dir = join(ctx.root, 'outbox');
  const first = open(ctx, dir);
  await first.warm();
  writeFileSync(join(dir, OUTBOX_ID_FILE), 'not/an id\n');
  const transport = open(ctx, dir);
  await transport.warm();
  assert.is(transport.instance, undefined);
  assert.is(readFileSync(join(dir, OUTBOX_ID_FILE), 'utf8'), 'not/an id\n');
});

test('an id file that cannot be read (a directory in its place): no id, none made over it; a later warm, once it reads, takes it', async (ctx) => {
  const dir = join(ctx.root, 'outbox');
  const first = open(ctx, dir);
  await first.warm();
  const id = readFileSync(join(dir, OUTBOX_ID_FILE), 'utf8');
  rmSync(join(dir, OUTBOX_ID_FILE));
  mkdirSync(join(dir, OUTBOX_ID_FILE));
  const transport = open(ctx, dir);
  await transport.warm();
  assert.is(transport.instance, undefined);
  assert.ok(statSync(join(dir, OUTBOX_ID_FILE)).isDirectory(), 'left as it was');
  rmSync(join(dir, OUTBOX_ID_FILE), { recursive: true });
  writeFileSync(join(dir, OUTBOX_ID_FILE), id, { mode: 0o600 });
  await transport.warm();
  assert.is(transport.instance, first.instance);
});

test('the sender\'s site-observing wrapper, made before the warm, gives the transport\'s id', async (ctx) => {
  const transport = open(ctx, join(ctx.root, 'outbox'));
  const observed = observedBySites(transport, new SiteRegistry({ dns: {} as never, rules: [] }));
  assert.is(observed.instance, undefined);
  await observed.warm?.();
  assert.type(transport.instance, 'string');
  assert.is(observed.instance, transport.instance);
});

test.run();
