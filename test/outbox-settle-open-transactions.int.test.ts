// What the outbox says, after a crash, became of transactions a dead sender began
// (OutboxTransport.settle), on a real directory holding what a write leaves at each of its
// steps: nothing, temporary copies only, the .eml without its envelope entry, both. A recipient
// counts as accepted only once the envelope file (placed after the .eml) names it; any other was
// not written, and writing it again completes what the dead write left, once.
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { listOutbox, OutboxTransport } from '../infra/mail/outbox-transport.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';

interface Context {
  root: string;
  dir: string;
  transport: OutboxTransport;
}

const ANN = 'ann@example.org';
const BOB = 'bob@example.net';

function message(emailId: string, recipient: string): OutgoingMessage {
  return {
    emailId,
    envelope: { mailFrom: `b+${emailId}-${recipient}@bounce.example.test`, recipients: [recipient] },
    raw: Buffer.from(`DKIM-Signature: v=1; d=example.test\r\nSubject: ${emailId}\r\n\r\nhello\r\n`),
    messageId: `${emailId}@example.test`,
  };
}

const settle = (ctx: Context, emailId: string, recipients: string[]) =>
  ctx.transport.settle({ emailId, messageId: `${emailId}@example.test`, recipients });

const summary = (answers: Awaited<ReturnType<typeof settle>>) => answers.map((a) => [a.address, a.result, a.providerMessageId]);

const outbox = suite<Context>('outbox: settling transactions a dead sender began');

outbox.before.each(async (ctx) => {
  ctx.root = mkdtempSync(join(tmpdir(), 'relay-outbox-settle-'));
  ctx.dir = join(ctx.root, 'outbox');
  await mkdir(ctx.dir, { mode: 0o700 });
  ctx.transport = new OutboxTransport(ctx.dir);
});

outbox.after.each(async (ctx) => {
  await ctx.transport.close();
  rmSync(ctx.root, { recursive: true, force: true });
});

outbox('nothing of the email in the outbox (its write was still queued): not sent', async (ctx) => {
  assert.equal(summary(await settle(ctx, 'em_none', [ANN])), [[ANN, 'not_sent', null]]);
});

outbox('an outbox directory never made: not sent', async (ctx) => {
  const transport = new OutboxTransport(join(ctx.root, 'missing', 'outbox'));
  try {
    assert.equal((await transport.settle({ emailId: 'em_none', messageId: 'em_none@example.test', recipients: [ANN] })).map((a) => a.result), ['not_sent']);
  } finally {
    await transport.close();
  }
});

outbox('only the temporary copies of a write that died: not sent, and they are no message', async (ctx) => {
  await writeFile(join(ctx.dir, '.em_tmp.eml.0123456789ab.tmp'), message('em_tmp', ANN).raw);
  await writeFile(join(ctx.dir, '.em_tmp.envelope.json.0123456789ab.tmp'), JSON.stringify([{ mailFrom: 'x', recipients: [ANN] }]));
  assert.equal(summary(await settle(ctx, 'em_tmp', [ANN])), [[ANN, 'not_sent', null]]);
  assert.equal(await listOutbox(ctx.dir), []);
});

outbox('the .eml placed but not its envelope entry: not sent; the retry adds the entry once and leaves the same bytes', async (ctx) => {
  const sent = message('em_half', ANN);
  await writeFile(join(ctx.dir, 'em_half.eml'), sent.raw, { mode: 0o600 });
  assert.equal(summary(await settle(ctx, 'em_half', [ANN])), [[ANN, 'not_sent', null]]);
  const retry = await ctx.transport.send(sent);
  assert.equal(retry.recipients.map((r) => r.result), ['accepted']);
  assert.equal(JSON.parse(await readFile(join(ctx.dir, 'em_half.envelope.json'), 'utf8')), [sent.envelope]);
  assert.equal(await readFile(join(ctx.dir, 'em_half.eml')), sent.raw);
  assert.equal((await readdir(ctx.dir)).sort(), ['em_half.eml', 'em_half.envelope.json']);
  assert.equal(summary(await settle(ctx, 'em_half', [ANN])), [[ANN, 'accepted', 'em_half@example.test']]);
});

outbox('a write that completed: accepted, with what send answered (the Message-ID, the file named)', async (ctx) => {
  const sent = await ctx.transport.send(message('em_done', ANN));
  const [answer] = await settle(ctx, 'em_done', [ANN]);
  assert.equal(answer, { address: ANN, result: 'accepted', providerMessageId: sent.providerMessageId, response: sent.recipients[0].response });
});

outbox('two transactions of one email, the second cut off before its entry: the first accepted, the second not sent', async (ctx) => {
  await ctx.transport.send(message('em_two', ANN));
  assert.equal(summary(await settle(ctx, 'em_two', [ANN, BOB])), [[ANN, 'accepted', 'em_two@example.test'], [BOB, 'not_sent', null]]);
});

outbox('a write of the email still under way in this process: the answer waits for it', async (ctx) => {
  let began!: () => void;
  const beginning = new Promise<void>((resolve) => (began = resolve));
  let proceed!: (go: boolean) => void;
  const gate = new Promise<boolean>((resolve) => (proceed = resolve));
  const sending = ctx.transport.send(message('em_busy', ANN), { beginTransaction: () => (began(), gate) });
  await beginning;
  const answer = settle(ctx, 'em_busy', [ANN]);
  proceed(true);
  assert.equal((await sending).recipients.map((r) => r.result), ['accepted']);
  assert.equal(summary(await answer), [[ANN, 'accepted', 'em_busy@example.test']]);
});

outbox('an envelope file that is not one: no answer (the recipients stay unknown)', async (ctx) => {
  await writeFile(join(ctx.dir, 'em_bad.eml'), message('em_bad', ANN).raw);
  await writeFile(join(ctx.dir, 'em_bad.envelope.json'), '{"not": "a list"');
  assert.equal(await settle(ctx, 'em_bad', [ANN]), []);
  await writeFile(join(ctx.dir, 'em_bad.envelope.json'), '{"recipients": 1}');
  assert.equal(await settle(ctx, 'em_bad', [ANN]), []);
});

outbox('an id outside the id alphabet: no answer, and no file looked at outside the outbox', async (ctx) => {
  assert.equal(await ctx.transport.settle({ emailId: '../em_x', messageId: 'x@example.test', recipients: [ANN] }), []);
});

outbox.run();
