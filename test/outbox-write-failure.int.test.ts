// An outbox write that fails is an outcome, not a throw: `deferred` while nothing of it can
// have appeared in the outbox (retried on the delivery schedule, the error code in the reply),
// `unknown` once the .eml may have (a reader may have taken the message as sent). A throw left
// the transaction begun and the email failed/delivery_unknown at the claim's grace, never sent,
// although nothing had been written.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { OutboxTransport, readOutbox } from '../infra/mail/outbox-transport.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';
import { startTestApp } from './support/app.ts';
import { deliveryTenant, send, waitForDetail } from './support/delivery.ts';

interface Context {
  root: string;
}

const message = (emailId: string): OutgoingMessage => ({
  emailId,
  envelope: { mailFrom: `b+${emailId}@bounce.example.test`, recipients: ['ann@example.org', 'bob@example.net'] },
  raw: Buffer.from(`Subject: ${emailId}\r\n\r\nthe body\r\n`),
  messageId: `${emailId}@example.test`,
});

const test = suite<Context>('outbox writes that fail');

test.before.each((ctx) => {
  ctx.root = mkdtempSync(join(tmpdir(), 'relay-outbox-fail-'));
});

test.after.each((ctx) => {
  rmSync(ctx.root, { recursive: true, force: true });
});

test('nothing written (the outbox path is not a directory): every recipient deferred with the error code, and a later send writes it', async (ctx) => {
  const dir = join(ctx.root, 'outbox');
  writeFileSync(dir, 'not a directory');
  const transport = new OutboxTransport(dir);
  try {
    let begun = 0;
    const failed = await transport.send(message('em_1'), { beginTransaction: async () => { begun++; return true; } });
    assert.is(begun, 1, 'the transaction began before the write');
    assert.is(failed.providerMessageId, null);
    assert.equal(failed.recipients.map((r) => [r.address, r.result]), [['ann@example.org', 'deferred'], ['bob@example.net', 'deferred']]);
    assert.match(failed.recipients[0].response, /^not written to the outbox: E[A-Z]+$/);
    assert.not.match(failed.recipients[0].response, ctx.root, 'no server path in a reply that reaches timelines');
    rmSync(dir);
    const sent = await transport.send(message('em_1'));
    assert.ok(sent.recipients.every((r) => r.result === 'accepted'));
    assert.equal((await readOutbox(dir, 'em_1'))?.envelopes, [message('em_1').envelope]);
  } finally {
    await transport.close();
  }
});

test('the .eml written, then the envelope could not be: every recipient unknown, naming the file and the error code', async (ctx) => {
  const dir = join(ctx.root, 'outbox');
  // The envelope's name is taken by a directory: the .eml is linked, the envelope then fails.
  mkdirSync(join(dir, 'em_2.envelope.json'), { recursive: true });
  const transport = new OutboxTransport(dir);
  try {
    const outcome = await transport.send(message('em_2'));
    assert.equal(await readFile(join(dir, 'em_2.eml')), message('em_2').raw, 'the message appeared');
    assert.equal(outcome.recipients.map((r) => [r.address, r.result]), [['ann@example.org', 'unknown'], ['bob@example.net', 'unknown']]);
    assert.is(outcome.recipients[0].response, 'em_2.eml was written to the outbox, then the write failed: EISDIR');
    assert.equal((await readdir(dir)).sort(), ['em_2.eml', 'em_2.envelope.json'], 'no temporary file is left');
  } finally {
    await transport.close();
  }
});

test('a thread lost mid-write: unknown when the outbox holds the message\'s bytes, deferred when it does not', async (ctx) => {
  const dir = join(ctx.root, 'outbox');
  const writer = new OutboxTransport(dir);
  await writer.send(message('em_crash')); // as a thread that died after the link
  await writer.close();
  const transport = new OutboxTransport(dir, { workerUrl: new URL('./fixtures/crashing-outbox-worker.ts', import.meta.url) });
  try {
    const placed = await transport.send(message('em_crash'));
    assert.equal(placed.recipients.map((r) => r.result), ['unknown', 'unknown']);
    assert.match(placed.recipients[0].response, /the outbox thread stopped while writing/);
    rmSync(join(dir, 'em_crash.eml'));
    const nothing = await transport.send(message('em_crash'));
    assert.equal(nothing.recipients.map((r) => r.result), ['deferred', 'deferred']);
    assert.is(nothing.recipients[0].response, 'not written to the outbox: the outbox thread stopped while writing');
  } finally {
    await transport.close();
  }
});

test('end to end: an email the outbox could not write is delayed, then sent once the outbox can be written, never delivery_unknown', async (ctx) => {
  const dataDir = ctx.root;
  const outbox = join(dataDir, 'outbox');
  writeFileSync(outbox, 'not a directory'); // as a full disk: nothing can be written
  // A begun transaction left open would be delivery_unknown after 10 min x 0.001 = 600 ms; a
  // deferred attempt's first retry comes 30 s x 0.001 = 30 ms after it.
  const t = await startTestApp({ RELAY_DELIVERY: 'outbox', RELAY_DELIVERY_RETRY_SCALE: '0.001' }, { dataDir, processors: true });
  try {
    const tenant = await deliveryTenant(t);
    const id = await send(t, tenant.key, { from: `hello@${tenant.domain}`, to: 'ann@example.org', subject: 'outbox full', text: 'the body' });
    const delayed = await waitForDetail(t, tenant.key, id, (d) => d.status === 'delayed', 'is delayed', 10_000);
    const reply = delayed.events.find((e: { type: string }) => e.type === 'email.delayed')?.payload.recipients[0].response;
    assert.match(reply, /^not written to the outbox: E[A-Z]+$/);
    rmSync(outbox); // the operator frees the disk
    const final = await waitForDetail(t, tenant.key, id, (d) => !['queued', 'processing', 'delayed'].includes(d.status), 'has its outcome', 10_000);
    assert.is(final.status, 'sent', `ended ${final.status}/${final.failureCode}`);
    assert.ok(existsSync(join(outbox, `${id}.eml`)), 'the message reached the outbox');
  } finally {
    await t.close();
  }
});

test.run();
