// The compose pool keeps composeMessage's contract on worker threads: the same bytes for the
// same input (checked against composing on this thread, and by mailauth through a real DNS
// server), the same errors, a dead thread costing only the message it held, and an idle pool
// that lets its process end.
import { Resolver } from 'node:dns/promises';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { requiredRecords, splitTxtValue } from '../domain/sending-domain.ts';
import { generateDkimKeyPair, type DkimKeyPair } from '../infra/dns/dkim-keys.ts';
import { composeMessage, newMessageId, type ComposeInput } from '../infra/mail/compose.ts';
import { ComposePool, ComposeThreadLostError } from '../infra/mail/compose-pool.ts';
import { awkwardComposeInput, COMPOSE_DOMAIN as DOMAIN } from './support/compose-input.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { endedOnItsOwn, startFixture } from './support/fixture-process.ts';

const CRASHING_WORKER = new URL('./fixtures/crashing-compose-worker.ts', import.meta.url);

interface Context {
  key: DkimKeyPair;
  server: TestDnsServer;
  resolver: Resolver;
  pools: ComposePool[];
}

const test = suite<Context>('compose pool');

test.before(async (ctx) => {
  ctx.key = await generateDkimKeyPair();
  const [dkimRecord] = requiredRecords({
    domain: DOMAIN, dkimSelector: ctx.key.selector, dkimPublicKeyBase64: ctx.key.publicKeyBase64, mailFromSubdomain: 'bounce', mxHost: 'feedback.relay.test',
  }).filter((r) => r.purpose === 'dkim');
  ctx.server = await startDnsServer([{ name: dkimRecord.name, type: 'TXT', data: splitTxtValue(dkimRecord.value) }]);
  ctx.resolver = new Resolver({ timeout: 2000, tries: 2 });
  ctx.resolver.setServers([ctx.server.address]);
  ctx.pools = [];
});

test.after(async (ctx) => {
  for (const pool of ctx.pools) await pool.close();
  await ctx.server?.close();
});

function pool(ctx: Context, threads: number, workerUrl?: URL): ComposePool {
  const created = new ComposePool({ threads, workerUrl });
  ctx.pools.push(created);
  return created;
}

function input(ctx: Context, overrides: Partial<ComposeInput> = {}): ComposeInput {
  return awkwardComposeInput(ctx.key, { text: `Hallo Welt — ünïcødé\n${'0123456789'.repeat(300)}\nlast line`, ...overrides });
}

async function verifyDkim(ctx: Context, raw: Buffer) {
  const { results } = await dkimVerify(raw, {
    strict: true,
    resolver: (name: string, rrtype: string) => {
      if (rrtype !== 'TXT') throw new Error(`unexpected ${rrtype} lookup for ${name}`);
      return ctx.resolver.resolveTxt(name);
    },
  });
  return results;
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  const outcome = await promise.then(() => null, (error: unknown) => ({ error }));
  assert.ok(outcome, 'expected a rejection, got a message');
  assert.instance(outcome.error, Error);
  return outcome.error as Error;
}

// A single-part message has no random MIME boundary, so the same input gives the same bytes.
test('given the same input, the pooled composer returns the very bytes composeMessage returns on this thread, as a Buffer', async (ctx) => {
  const threads = pool(ctx, 1);
  for (const sent of [input(ctx), input(ctx, { text: null, html: '<p>Hallo <b>Welt</b></p>', cc: [], replyTo: null, headers: {} })]) {
    const pooled = await threads.compose(sent);
    const local = await composeMessage(sent);
    assert.ok(Buffer.isBuffer(pooled.raw), 'raw is a Buffer');
    assert.is(pooled.messageId, local.messageId);
    assert.ok(pooled.raw.equals(local.raw), `pooled bytes differ:\n${pooled.raw.toString('latin1').slice(0, 400)}\n---\n${local.raw.toString('latin1').slice(0, 400)}`);
  }
  assert.is(threads.liveThreads, 1, 'composed on a thread of the pool');
});

test('given many messages at once on two threads, each caller gets its own message back', async (ctx) => {
  const threads = pool(ctx, 2);
  const inputs = Array.from({ length: 12 }, (_, i) => input(ctx, { subject: `Message ${i}`, messageId: newMessageId(`em_${i}`, DOMAIN) }));
  const pooled = await Promise.all(inputs.map((sent) => threads.compose(sent)));
  for (const [i, sent] of inputs.entries()) {
    assert.is(pooled[i].messageId, `em_${i}@${DOMAIN}`);
    assert.ok(pooled[i].raw.equals((await composeMessage(sent)).raw), `message ${i} is its own`);
  }
  assert.is(threads.liveThreads, 2);
});

test('given a multipart message composed on a thread, mailauth verifies its DKIM signature through DNS as pass', async (ctx) => {
  const { raw } = await pool(ctx, 1).compose(input(ctx, { html: '<p>Hallo <b>Welt</b> — ünïcødé</p>' }));
  assert.match(raw.toString('latin1'), /^Content-Type: multipart\/alternative;/m);
  const results = await verifyDkim(ctx, raw);
  assert.is(results.length, 1);
  assert.is(results[0].status.result, 'pass', results[0].info);
  assert.is(results[0].signingDomain, DOMAIN);
  assert.is(results[0].selector, ctx.key.selector);
});

test('given a private key that cannot sign, the caller gets composeMessage\'s error, and the thread goes on composing', async (ctx) => {
  const threads = pool(ctx, 1);
  const unusable = input(ctx, { dkim: { domainName: DOMAIN, keySelector: ctx.key.selector, privateKey: '-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n' } });
  const local = await rejection(composeMessage(unusable));
  const pooled = await rejection(threads.compose(unusable));
  assert.match(pooled.message, /^DKIM signing failed for d=acme\.example s=\S+: the private key is unusable$/);
  assert.is(pooled.message, local.message);
  const badAddress = input(ctx, { to: ['not a mailbox'] });
  assert.is((await rejection(threads.compose(badAddress))).message, (await rejection(composeMessage(badAddress))).message);
  const { raw } = await threads.compose(input(ctx));
  assert.ok(raw.equals((await composeMessage(input(ctx))).raw));
  assert.is(threads.liveThreads, 1, 'an error is not a crash');
});

// The jobs queued in one task go to a free thread as one batch (one message each way), up to
// its share of them.
test('given a burst on one thread, every caller gets its own message, and a bad input fails only itself', async (ctx) => {
  const threads = pool(ctx, 1);
  const unusableKey = { domainName: DOMAIN, keySelector: ctx.key.selector, privateKey: '-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n' };
  const inputs = Array.from({ length: 40 }, (_, i) => input(ctx, {
    subject: `Burst ${i}`, messageId: newMessageId(`em_${i}`, DOMAIN), ...(i === 7 ? { dkim: unusableKey } : i === 23 ? { to: ['not a mailbox'] } : {}),
  }));
  const outcomes = await Promise.allSettled(inputs.map((sent) => threads.compose(sent)));
  for (const [i, outcome] of outcomes.entries()) {
    const local = await composeMessage(inputs[i]).then((message) => ({ message }), (error: Error) => ({ error }));
    if ('error' in local) {
      assert.is(outcome.status, 'rejected', `message ${i} fails as it fails here`);
      assert.is(((outcome as PromiseRejectedResult).reason as Error).message, local.error.message);
      continue;
    }
    assert.is(outcome.status, 'fulfilled', `message ${i}: ${(outcome as PromiseRejectedResult).reason}`);
    const { raw, messageId } = (outcome as PromiseFulfilledResult<{ raw: Buffer; messageId: string }>).value;
    assert.is(messageId, `em_${i}@${DOMAIN}`);
    assert.ok(raw.equals(local.message.raw), `message ${i} is its own`);
  }
  assert.equal(outcomes.flatMap((o, i) => (o.status === 'rejected' ? [i] : [])), [7, 23]);
  assert.is(threads.liveThreads, 1, 'an error is not a crash');
});

test('given a burst with an input that cannot be sent to a thread, only that caller fails, and its batch goes on without it', async (ctx) => {
  const threads = pool(ctx, 1);
  // A function cannot cross to another thread (this would not be a ComposeInput).
  const unsendable = { ...input(ctx, { subject: 'unsendable' }), headers: { 'X-Odd': (() => 'x') as unknown as string } };
  const outcomes = await Promise.allSettled([input(ctx, { subject: 'one' }), unsendable, input(ctx, { subject: 'two' })].map((sent) => threads.compose(sent)));
  assert.equal(outcomes.map((o) => o.status), ['fulfilled', 'rejected', 'fulfilled']);
  assert.match(((outcomes[1] as PromiseRejectedResult).reason as Error).name, /DataCloneError/);
  for (const [i, subject] of [[0, 'one'], [2, 'two']] as const) {
    assert.ok((outcomes[i] as PromiseFulfilledResult<{ raw: Buffer }>).value.raw.equals((await composeMessage(input(ctx, { subject }))).raw), subject);
  }
});

test('given a thread that dies mid-batch, that batch\'s messages fail; the lone one before it and those after go out on a new thread', async (ctx) => {
  const threads = pool(ctx, 1, CRASHING_WORKER);
  // "alone" goes once its task is over; the next three, queued in a later one, go as one batch,
  // which kills the thread.
  const alone = threads.compose(input(ctx, { subject: 'alone' }));
  await new Promise((resolve) => setImmediate(resolve));
  const batch = await Promise.allSettled(['beside 1', 'crash the thread', 'beside 2'].map((subject) => threads.compose(input(ctx, { subject }))));
  assert.ok((await alone).raw.equals((await composeMessage(input(ctx, { subject: 'alone' }))).raw));
  for (const outcome of batch) {
    assert.is(outcome.status, 'rejected');
    const reason = (outcome as PromiseRejectedResult).reason as Error;
    assert.instance(reason, ComposeThreadLostError, 'a lost thread is retried by the sender, not a fault of the message');
    assert.match(reason.message, /compose thread stopped while composing this message: compose thread crashed on purpose/);
  }
  const after = await Promise.allSettled(['after 1', 'after 2', 'after 3'].map((subject) => threads.compose(input(ctx, { subject }))));
  for (const [i, outcome] of after.entries()) {
    assert.is(outcome.status, 'fulfilled', `after ${i + 1}`);
    const { raw } = (outcome as PromiseFulfilledResult<{ raw: Buffer }>).value;
    assert.ok(raw.equals((await composeMessage(input(ctx, { subject: `after ${i + 1}` }))).raw));
  }
  assert.is(threads.liveThreads, 1, 'the dead thread was replaced, not added to');
});

test('given a burst on two threads and a batch that kills one, only that batch fails', async (ctx) => {
  const threads = pool(ctx, 2, CRASHING_WORKER);
  // Queued in one task: the first thread takes its half (0-4, with the crash), the second half
  // of the rest (5-7), and the last two go one by one as threads come free.
  const subjects = Array.from({ length: 10 }, (_, i) => (i === 3 ? 'crash the thread' : `job ${i}`));
  const outcomes = await Promise.allSettled(subjects.map((subject) => threads.compose(input(ctx, { subject }))));
  assert.equal(outcomes.map((o) => o.status), subjects.map((_, i) => (i <= 4 ? 'rejected' : 'fulfilled')));
  for (const [i, outcome] of outcomes.entries()) {
    if (outcome.status === 'rejected') assert.instance(outcome.reason, ComposeThreadLostError);
    else assert.ok(outcome.value.raw.equals((await composeMessage(input(ctx, { subject: subjects[i] }))).raw), `job ${i} is its own`);
  }
  // The pool goes on, on two threads again.
  const later = await Promise.all(['later 1', 'later 2', 'later 3', 'later 4'].map((subject) => threads.compose(input(ctx, { subject }))));
  for (const [i, { raw }] of later.entries()) assert.ok(raw.equals((await composeMessage(input(ctx, { subject: `later ${i + 1}` }))).raw));
  assert.is(threads.liveThreads, 2);
});

test('given two threads and one dying, the other thread\'s message is unaffected', async (ctx) => {
  const threads = pool(ctx, 2, CRASHING_WORKER);
  const [crashed, other] = await Promise.allSettled([
    threads.compose(input(ctx, { subject: 'crash the thread' })),
    threads.compose(input(ctx, { subject: 'beside it' })),
  ]);
  assert.is(crashed.status, 'rejected');
  assert.is(other.status, 'fulfilled');
  const { raw } = await threads.compose(input(ctx, { subject: 'later' }));
  assert.ok(raw.equals((await composeMessage(input(ctx, { subject: 'later' }))).raw));
});

test('given threads: 0, messages are composed on the calling thread and no thread starts', async (ctx) => {
  const inline = pool(ctx, 0);
  const { raw } = await inline.compose(input(ctx));
  assert.ok(raw.equals((await composeMessage(input(ctx))).raw));
  assert.is(inline.liveThreads, 0);
});

test('given a closed pool, what it held fails and later messages are refused', async (ctx) => {
  const threads = pool(ctx, 1);
  const held = rejection(threads.compose(input(ctx)));
  const queued = rejection(threads.compose(input(ctx, { subject: 'queued' })));
  await threads.close();
  assert.match((await held).message, /closed/);
  assert.match((await queued).message, /closed/);
  assert.match((await rejection(threads.compose(input(ctx)))).message, /closed/);
  assert.is(threads.liveThreads, 0);
});

test('given a process that warmed its pool, composed and never closed it, it ends on its own, and not before its messages are done', async () => {
  const child = startFixture(new URL('./fixtures/compose-then-idle.ts', import.meta.url), []);
  const ended = await endedOnItsOwn(child);
  assert.ok(ended !== null, `still running a minute after start; printed ${JSON.stringify(child.lines)} ${child.stderr()}`);
  assert.equal(ended, { code: 0, signal: null }, child.stderr());
  const [line] = child.lines;
  assert.ok(line, `printed nothing: ${child.stderr()}`);
  const printed = JSON.parse(line);
  assert.ok(printed.composed > 500 && printed.signed, line);
  assert.is(printed.threads, 2, 'both threads were started by warm()');
});

test.run();
