// The outbox transport on a real temp directory: exact bytes, private permissions, one .eml
// per email with every transaction's envelope, and the list/read helpers.
import { mkdtempSync, rmSync } from 'node:fs';
import { readdir, readFile, rm, stat, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { listOutbox, OutboxTransport, readOutbox } from '../infra/mail/outbox-transport.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';
import { endedOnItsOwn, startFixture } from './support/fixture-process.ts';

interface Context {
  root: string;
  dir: string;
  transport: OutboxTransport;
}

function message(emailId: string, overrides: Partial<OutgoingMessage> = {}): OutgoingMessage {
  return {
    emailId,
    envelope: { mailFrom: `b+${emailId}@bounce.example.test`, recipients: ['ann@example.org', 'bob@example.net'] },
    // Bytes that a text round trip would damage: CRLF, a leading dot, 8-bit, no final newline.
    raw: Buffer.concat([Buffer.from(`DKIM-Signature: v=1; d=example.test\r\nSubject: ${emailId}\r\n\r\n.dot line\r\n`), Buffer.from([0xc3, 0xa9, 0xff, 0x00])]),
    messageId: `${emailId}@example.test`,
    ...overrides,
  };
}

const outbox = suite<Context>('outbox transport');

outbox.before.each((ctx) => {
  ctx.root = mkdtempSync(join(tmpdir(), 'relay-outbox-'));
  ctx.dir = join(ctx.root, 'nested', 'outbox');
  ctx.transport = new OutboxTransport(ctx.dir);
});

outbox.after.each(async (ctx) => {
  await ctx.transport.close();
  rmSync(ctx.root, { recursive: true, force: true });
});

outbox('writes the exact bytes to <dir>/<emailId>.eml, 0600 in a 0700 directory, every recipient accepted', async (ctx) => {
  const sent = message('em_1');
  const outcome = await ctx.transport.send(sent);
  assert.equal(await readFile(join(ctx.dir, 'em_1.eml')), sent.raw);
  assert.is((await stat(ctx.dir)).mode & 0o777, 0o700);
  assert.is((await stat(join(ctx.dir, 'em_1.eml'))).mode & 0o777, 0o600);
  assert.is((await stat(join(ctx.dir, 'em_1.envelope.json'))).mode & 0o777, 0o600);
  assert.is(outcome.providerMessageId, 'em_1@example.test');
  assert.equal(outcome.recipients.map((r) => [r.address, r.result, r.smtpCode]), [
    ['ann@example.org', 'accepted', null],
    ['bob@example.net', 'accepted', null],
  ]);
  // Atomic writes leave no temp files behind.
  assert.equal((await readdir(ctx.dir)).sort(), ['em_1.eml', 'em_1.envelope.json']);
});

outbox('several transactions of one email: the bytes once, every envelope listed, a repeated one not twice', async (ctx) => {
  const first = message('em_2', { envelope: { mailFrom: 'b+ann@bounce.example.test', recipients: ['ann@example.org'] } });
  const second = message('em_2', { envelope: { mailFrom: 'b+bob@bounce.example.test', recipients: ['bob@example.net'] } });
  await Promise.all([ctx.transport.send(first), ctx.transport.send(second)]);
  await ctx.transport.send(first); // a redelivered send
  const read = await readOutbox(ctx.dir, 'em_2');
  assert.ok(read);
  assert.equal(read.raw, first.raw);
  assert.equal(read.envelopes, [
    { mailFrom: 'b+ann@bounce.example.test', recipients: ['ann@example.org'] },
    { mailFrom: 'b+bob@bounce.example.test', recipients: ['bob@example.net'] },
  ]);
});

outbox('a send after a crash between the two files completes them; different bytes replace the .eml', async (ctx) => {
  const first = message('em_3');
  await ctx.transport.send(first);
  await rm(join(ctx.dir, 'em_3.envelope.json')); // as a crash after the .eml and before its envelope
  await ctx.transport.send(first);
  assert.equal((await readOutbox(ctx.dir, 'em_3'))?.envelopes, [first.envelope]);
  const recomposed = message('em_3', { raw: Buffer.from('Subject: again\r\n\r\nother bytes\r\n') });
  await ctx.transport.send(recomposed);
  const read = await readOutbox(ctx.dir, 'em_3');
  assert.equal(read?.raw, recomposed.raw);
  assert.equal(read?.envelopes, [first.envelope]); // the same transaction, listed once
  assert.equal((await readdir(ctx.dir)).sort(), ['em_3.eml', 'em_3.envelope.json'], 'no temporary file is left');
});

outbox('lists messages newest first and reads them back; unknown or unsafe ids read as null', async (ctx) => {
  assert.equal(await listOutbox(ctx.dir), []); // no directory yet
  for (const id of ['older', 'newest', 'middle']) await ctx.transport.send(message(id));
  await utimes(join(ctx.dir, 'older.eml'), new Date('2024-01-01T00:00:00Z'), new Date('2024-01-01T00:00:00Z'));
  await utimes(join(ctx.dir, 'middle.eml'), new Date('2024-06-01T00:00:00Z'), new Date('2024-06-01T00:00:00Z'));
  const listed = await listOutbox(ctx.dir);
  assert.equal(listed.map((e) => e.emailId), ['newest', 'middle', 'older']);
  assert.is(listed[0].size, message('newest').raw.length);
  assert.ok(listed[0].modifiedAt instanceof Date);
  assert.equal((await readOutbox(ctx.dir, 'middle'))?.raw, message('middle').raw);
  assert.is(await readOutbox(ctx.dir, 'missing'), null);
  for (const unsafe of ['../outbox/older', '..', 'a/b', 'older.eml', '', 'x'.repeat(65)]) {
    assert.is(await readOutbox(ctx.dir, unsafe), null, unsafe);
  }
});

outbox('refuses an email id that is not a safe file name', async (ctx) => {
  try {
    await ctx.transport.send(message('../escape'));
    assert.unreachable();
  } catch (error) {
    assert.match((error as Error).message, /invalid email id/);
  }
  assert.equal(await listOutbox(ctx.dir), []);
});

outbox('a thread that dies defers only the sends it held (nothing of them written); the next send starts a new one', async (ctx) => {
  const transport = new OutboxTransport(ctx.dir, { workerUrl: new URL('./fixtures/crashing-outbox-worker.ts', import.meta.url) });
  try {
    await transport.send(message('em_before'));
    const crashed = await transport.send(message('em_crash'));
    assert.equal(crashed.recipients.map((r) => [r.result, r.response]), [0, 1].map(() => ['deferred', 'not written to the outbox: the outbox thread stopped while writing']));
    await transport.send(message('em_after'));
    assert.equal((await listOutbox(ctx.dir)).map((e) => e.emailId).sort(), ['em_after', 'em_before']);
  } finally {
    await transport.close();
  }
});

// The writes queued in one turn go to the thread as one message: a burst of sends, some of
// them several transactions of one email, each written once and in its email's order.
outbox('a burst of sends lands every file once, each email\'s transactions in the order sent', async (ctx) => {
  const single = Array.from({ length: 60 }, (_, i) => message(`em_burst_${i}`, { raw: Buffer.from(`Subject: burst ${i}\r\n\r\n${'x'.repeat(i * 50)}\r\n`) }));
  const multi = Array.from({ length: 5 }, (_, i) => message(`em_multi_${i}`, { envelope: { mailFrom: `b+${i}-0@bounce.example.test`, recipients: [`r${i}-0@example.org`] } }));
  const transactions = multi.flatMap((m, i) => [0, 1, 2].map((t) => ({ ...m, envelope: { mailFrom: `b+${i}-${t}@bounce.example.test`, recipients: [`r${i}-${t}@example.org`] } })));
  const outcomes = await Promise.all([...single, ...transactions].map((sent) => ctx.transport.send(sent)));
  assert.ok(outcomes.every((o) => o.recipients.every((r) => r.result === 'accepted')));
  const names = (await readdir(ctx.dir)).sort();
  const expected = [...single, ...multi].flatMap((m) => [`${m.emailId}.eml`, `${m.emailId}.envelope.json`]).sort();
  assert.equal(names, expected, 'every email\'s two files, once, and no temporary file');
  for (const sent of single) {
    const read = await readOutbox(ctx.dir, sent.emailId);
    assert.equal(read?.raw, sent.raw, sent.emailId);
    assert.equal(read?.envelopes, [sent.envelope]);
  }
  for (const [i, sent] of multi.entries()) {
    assert.equal((await readOutbox(ctx.dir, sent.emailId))?.envelopes, [0, 1, 2].map((t) => ({ mailFrom: `b+${i}-${t}@bounce.example.test`, recipients: [`r${i}-${t}@example.org`] })));
  }
});

outbox('a thread that dies mid-batch defers the sends of that batch; the sends of the next turn go to a new thread', async (ctx) => {
  const transport = new OutboxTransport(ctx.dir, { workerUrl: new URL('./fixtures/crashing-outbox-worker.ts', import.meta.url) });
  try {
    // Queued in one turn: one message, which the thread dies holding.
    const batch = await Promise.all(['em_a', 'em_crash', 'em_b'].map((id) => transport.send(message(id))));
    for (const outcome of batch) {
      assert.equal(outcome.recipients.map((r) => r.result), ['deferred', 'deferred']);
      assert.match(outcome.recipients[0].response, /outbox thread stopped/);
    }
    await Promise.all(['em_a', 'em_b', 'em_c'].map((id) => transport.send(message(id))));
    assert.equal((await listOutbox(ctx.dir)).map((e) => e.emailId).sort(), ['em_a', 'em_b', 'em_c']);
    assert.equal((await readOutbox(ctx.dir, 'em_a'))?.envelopes, [message('em_a').envelope], 'written once, after the crash');
  } finally {
    await transport.close();
  }
});

outbox('a process that sent and never closed the transport ends on its own', async (ctx) => {
  const child = startFixture(new URL('./fixtures/outbox-then-idle.ts', import.meta.url), [ctx.dir]);
  const ended = await endedOnItsOwn(child);
  assert.ok(ended !== null, `still running a minute after start; printed ${JSON.stringify(child.lines)} ${child.stderr()}`);
  assert.equal(ended, { code: 0, signal: null }, child.stderr());
  assert.equal(JSON.parse(child.lines[0] ?? 'null'), { bytes: 21, envelopes: 1 }, child.stderr());
});

outbox('the transaction\'s start is asked before the file is written; declined, nothing is written and every recipient is not_begun', async (ctx) => {
  let filesWhenAsked: string[] | null = null;
  const declined = await ctx.transport.send(message('em_4'), {
    beginTransaction: async () => {
      filesWhenAsked = await readdir(ctx.dir).catch(() => []);
      return false;
    },
  });
  assert.equal(filesWhenAsked, [], 'asked before anything was written');
  assert.equal(declined.recipients.map((r) => [r.address, r.result, r.stage]), [['ann@example.org', 'deferred', 'not_begun'], ['bob@example.net', 'deferred', 'not_begun']]);
  assert.equal(await readdir(ctx.dir).catch(() => []), [], 'nothing written');
  const sent = await ctx.transport.send(message('em_4'), { beginTransaction: async () => true });
  assert.ok(sent.recipients.every((r) => r.result === 'accepted'));
  assert.equal(await readFile(join(ctx.dir, 'em_4.eml')), message('em_4').raw);
});

outbox.run();
