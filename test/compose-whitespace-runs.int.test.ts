// A header field is never written with a line of only whitespace: consecutive folds with only
// WSP between them are obs-FWS (RFC 5322 4.2), which "MUST NOT be generated" (RFC 5322 4).
// nodemailer folds at whitespace into lines of 76 characters, so inside a longer run, and
// before a run that ends a long field, which is then left alone on the last line:
//  - header text (a subject, a custom header value, a display name) holding such a run goes as
//    RFC 2047 encoded words, which hold the spaces, fold between words and read back as sent;
//  - headers sent as written (URI lists, In-Reply-To, OTP-Token) cannot be encoded: a run of
//    76 whitespace characters or more is a 400 validation_error naming the header (References
//    is written with one space between its ids, so it keeps any run), and whitespace around
//    their value, no part of a structured field, is left out.
// POST /v1/emails → outbox .eml; DKIM checked by mailauth, header text read by python3's email
// package (display names by postal-mime: python collapses whitespace in an address's phrase).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import PostalMime from 'postal-mime';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, dkimResults, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';

interface Context { t: TestApp; tenant: DeliveryTenant; dns: TestDnsServer }
const test = suite<Context>('whitespace runs in header fields');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.dns = await startDnsServer(ctx.tenant.zone);
});
test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.dns.close();
});

/** POST /v1/emails, sent; the outbox .eml, once its DKIM signature verified. */
async function sent(ctx: Context, body: Record<string, unknown>): Promise<Buffer> {
  const id = await send(ctx.t, ctx.tenant.key, { from: `a@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'Hello', text: 'Hi', ...body });
  await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent', 'is sent', 10_000);
  const raw = readFileSync(join(ctx.t.config.dataDir, 'outbox', `${id}.eml`));
  const [verdict] = await dkimResults(ctx.dns, raw);
  assert.is(verdict.status.result, 'pass', verdict.info);
  return raw;
}

/** The header lines of only whitespace, and the fields named shown in full for the message. */
function blankLines(raw: Buffer, fields: RegExp): [number, string] {
  const head = raw.subarray(0, raw.indexOf('\r\n\r\n')).toString('latin1').split('\r\n');
  const shown: string[] = [];
  let inField = false;
  for (const line of head) {
    inField = fields.test(line) || (inField && /^[ \t]/.test(line));
    if (inField) shown.push(JSON.stringify(line));
  }
  return [head.filter((line) => /^[ \t]*$/.test(line)).length, `header lines of only whitespace (obs-FWS, RFC 5322 4.2):\n${shown.join('\n')}`];
}

/** Fields as python3's email package reads them (policy.default), by lower-cased name. */
function pythonReads(raw: Buffer, names: string[]): string[] {
  return JSON.parse(execFileSync('python3', ['-c', [
    'import email, json, sys',
    'from email import policy',
    'm = email.message_from_bytes(sys.stdin.buffer.read(), policy=policy.default)',
    `print(json.dumps([str(m[n]) for n in ${JSON.stringify(names)}]))`,
  ].join('\n')], { input: raw }).toString());
}

test('a subject and a custom header with a 200-space run: signed, read back as sent, and no header line is only whitespace', async (ctx) => {
  const subject = `Order${' '.repeat(200)}shipped`;
  const note = `a${' '.repeat(200)}b`;
  const raw = await sent(ctx, { subject, headers: { 'X-Note': note } });
  assert.equal(pythonReads(raw, ['subject', 'x-note']), [subject, note], 'python reads what was sent');
  const [blank, shown] = blankLines(raw, /^(Subject|X-Note):/);
  assert.is(blank, 0, shown);
});

test('a subject whose trailing spaces a fold would leave on a line of their own: read back as sent, no line of only whitespace', async (ctx) => {
  // "Subject: a " and 62 letters are 73 characters: the 76-character fold goes before the spaces.
  const subject = `a ${'x'.repeat(62)}     `;
  const raw = await sent(ctx, { subject });
  assert.equal(pythonReads(raw, ['subject']), [subject]);
  const [blank, shown] = blankLines(raw, /^Subject:/);
  assert.is(blank, 0, shown);
});

test('a display name with a 100-space run: read back as sent, no line of only whitespace', async (ctx) => {
  const name = `Ann${' '.repeat(100)}Lee`;
  const raw = await sent(ctx, { from: `"${name}" <a@${ctx.tenant.domain}>` });
  assert.is((await PostalMime.parse(raw)).from?.name, name);
  const [blank, shown] = blankLines(raw, /^From:/);
  assert.is(blank, 0, shown);
});

test('headers sent as written with a run of 76 whitespace characters: 400 validation_error naming the header; 75, and References, accepted', async (ctx) => {
  const post = (headers: Record<string, string>) => ctx.t.app.inject({
    method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.tenant.key}` },
    payload: { from: `a@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'Hello', text: 'Hi', headers },
  });
  for (const [name, value] of [
    ['List-Unsubscribe', `<https://example.org/u/1>,${' '.repeat(76)}<mailto:u@example.org>`],
    ['In-Reply-To', `<a@example.org>${'\t'.repeat(76)}<b@example.org>`],
    ['OTP-Token', `"a${' '.repeat(76)}b"`],
  ]) {
    const response = await post({ [name]: value });
    assert.is(response.statusCode, 400, `${name}: ${response.body}`);
    assert.is(response.json().error.code, 'validation_error');
    assert.match(response.json().error.message, `body.headers.${name}: must not hold a run of more than 75 whitespace characters`);
  }
  const unsubscribe = `<https://example.org/u/1>,${' '.repeat(75)}<mailto:u@example.org>`;
  const references = `<a@example.org>${' '.repeat(200)}<b@example.org>`;
  const raw = await sent(ctx, { headers: { 'List-Unsubscribe': unsubscribe, References: references } });
  const [blank, shown] = blankLines(raw, /^(List-Unsubscribe|References):/);
  assert.is(blank, 0, shown);
  const [readUnsubscribe, readReferences] = pythonReads(raw, ['list-unsubscribe', 'references']);
  assert.is(readUnsubscribe.replace(/\s+/g, ' '), '<https://example.org/u/1>, <mailto:u@example.org>');
  assert.is(readReferences, '<a@example.org> <b@example.org>');
});

test('values sent as written ending in spaces after a long word: the spaces are left out, not folded onto a line of their own', async (ctx) => {
  // "List-Unsubscribe: " and the URI, "OTP-Token: " and the token are 72 characters each: the
  // 76-character fold would go before the spaces. nodemailer closes an In-Reply-To not ending
  // in ">" with one of its own.
  const uri = `<https://example.org/${'u'.repeat(32)}>`;
  const token = `"${'t'.repeat(59)}"`;
  const raw = await sent(ctx, { headers: { 'List-Unsubscribe': `${uri}     `, 'OTP-Token': `${token}     `, 'In-Reply-To': '<id@example.org>  ' } });
  const [blank, shown] = blankLines(raw, /^(List-Unsubscribe|OTP-Token|In-Reply-To):/);
  assert.is(blank, 0, shown);
  assert.equal(pythonReads(raw, ['list-unsubscribe', 'otp-token', 'in-reply-to']), [uri, token, '<id@example.org>']);
});

test.run();
