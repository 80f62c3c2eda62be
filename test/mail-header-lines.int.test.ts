// Header fields as they go on the wire (POST /v1/emails to the outbox .eml, DKIM checked by
// mailauth, read back by postal-mime):
//  - custom header names are unique case-insensitively: `Sender` and `sender` (or In-Reply-To
//    and in-reply-to) are a 400 validation_error naming the second, never two fields that
//    RFC 5322 3.6 allows once;
//  - no line is longer than RFC 5322 2.1.1's 998 characters: a subject or custom header value
//    with a word too long to fold at whitespace (up to the spec's 998 characters) goes out as
//    RFC 2047 encoded words, which fold and read back exactly as sent; text that fits is
//    written as it is.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import PostalMime, { decodeWords } from 'postal-mime';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, dkimResults, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';

interface Context { t: TestApp; tenant: DeliveryTenant; dns: TestDnsServer }
const test = suite<Context>('header fields on the wire');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.dns = await startDnsServer(ctx.tenant.zone);
});
test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.dns.close();
});

function post(ctx: Context, extra: Record<string, unknown>) {
  return ctx.t.app.inject({
    method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.tenant.key}` },
    payload: { from: `App <app@${ctx.tenant.domain}>`, to: 'ann@example.org', subject: 'Hello', text: 'Hi Ann', ...extra },
  });
}

/** POST /v1/emails, accepted; the .eml written to the outbox, once its DKIM signature verified. */
async function sent(ctx: Context, extra: Record<string, unknown>): Promise<Buffer> {
  const { t, tenant } = ctx;
  const response = await post(ctx, extra);
  assert.is(response.statusCode, 202, response.body);
  const id = response.json().id as string;
  await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'is sent', 10_000);
  const raw = readFileSync(join(t.config.dataDir, 'outbox', `${id}.eml`));
  const [verdict] = await dkimResults(ctx.dns, raw);
  assert.is(verdict.status.result, 'pass', verdict.info);
  return raw;
}

const head = (raw: Buffer) => raw.toString('latin1').slice(0, raw.indexOf('\r\n\r\n'));
const longest = (raw: Buffer) => Math.max(...raw.toString('latin1').split('\r\n').map((l) => l.length));

test('custom headers differing only in case: 400 validation_error naming the second', async (ctx) => {
  for (const [first, second, one, other] of [['Sender', 'sender', `ops@${ctx.tenant.domain}`, 'someone@elsewhere.example'], ['In-Reply-To', 'in-reply-to', '<a@x.example>', '<b@x.example>']]) {
    const response = await post(ctx, { headers: { [first]: one, [second]: other } });
    assert.is(response.statusCode, 400, response.body);
    assert.is(response.json().error.code, 'validation_error');
    assert.is(response.json().error.message, `body.headers.${second}: repeats the header ${first}: header names are compared case-insensitively, so each may be given once`);
  }
});

test('case variants of a signed header name (50 of List-Unsubscribe-Post): refused, naming the second', async (ctx) => {
  const name = 'list-unsubscribe-post';
  const headers: Record<string, string> = {};
  for (let m = 0; Object.keys(headers).length < 50; m++) headers[[...name].map((c, i) => ((m >> i) & 1 ? c.toUpperCase() : c)).join('')] = 'List-Unsubscribe=One-Click';
  const response = await post(ctx, { headers });
  assert.is(response.statusCode, 400, response.body);
  assert.match(response.json().error.message, /^body\.headers\.List-unsubscribe-post: repeats the header list-unsubscribe-post: /);
});

test('a 998-character subject without spaces: no line is longer than 998 characters, and it reads back exactly', async (ctx) => {
  const subject = 'x'.repeat(998);
  const raw = await sent(ctx, { subject });
  assert.ok(longest(raw) <= 998, `a line of ${longest(raw)} characters`);
  assert.is((await PostalMime.parse(raw)).subject, subject);
});

test('a 998-character custom header value without spaces: no line is longer than 998 characters, and it reads back exactly', async (ctx) => {
  for (const value of ['t'.repeat(998), `ref ${'t'.repeat(985)} end`]) {
    const raw = await sent(ctx, { headers: { 'X-Order-Token': value } });
    assert.ok(longest(raw) <= 998, `a line of ${longest(raw)} characters`);
    assert.equal((await PostalMime.parse(raw)).headers.filter((h) => h.key === 'x-order-token').map((h) => decodeWords(h.value)), [value]);
  }
});

test('a subject and a custom header value whose words fit on a line are written as they are', async (ctx) => {
  const word = 'w'.repeat(980);
  const raw = await sent(ctx, { subject: `Order ${word}`, headers: { 'X-Order-Token': word } });
  assert.ok(head(raw).includes(`\r\nSubject: Order\r\n ${word}\r\n`), head(raw));
  assert.ok(head(raw).includes(`\r\nX-Order-Token:\r\n ${word}\r\n`), head(raw));
  assert.ok(longest(raw) <= 998, `a line of ${longest(raw)} characters`);
});

test.run();
