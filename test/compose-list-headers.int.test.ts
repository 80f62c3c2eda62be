// Headers whose value is a list of <URI> (RFC 2369 List-Unsubscribe, List-Subscribe, List-Help,
// List-Post, List-Owner, List-Archive; RFC 5064 Archived-At) are structured fields, where RFC
// 2047 5 allows no encoded word: they go out as written, never as encoded words, even holding
// "=?", a '"' or a long URI, so a receiver finds the URIs and one-click unsubscribe (RFC 8058,
// List-Unsubscribe-Post, signed) works. A long list is folded only at the whitespace between its
// entries and unfolds to the value given. Admission holds them to what that needs (send-request.ts
// URI_LIST_HEADERS): ASCII (Relay does not use SMTPUTF8), no word longer than 997 characters;
// otherwise 400 validation_error naming the header (one admitted before that goes 7-bit, encoded
// as it was). Read back by postal-mime, an independent parser; through POST /v1/emails to the
// outbox .eml, the DKIM signature checked by mailauth.
import { generateKeyPairSync } from 'node:crypto';
import PostalMime, { decodeWords } from 'postal-mime';
import { suite, test } from 'uvu';
import * as assert from 'uvu/assert';
import { composeMessage } from '../infra/mail/compose.ts';
import { startOutboxSends, type OutboxSends } from './support/outbox-sends.ts';

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

async function listUnsubscribeOf(value: string): Promise<string | undefined> {
  const { raw } = await composeMessage({
    from: 'Shop <news@example.com>', to: ['ann@example.org'], cc: [], replyTo: null, subject: 'Weekly', html: null, text: 'hi',
    headers: { 'List-Unsubscribe': value, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
    messageId: 'em_1@example.com', date: new Date('2025-01-01T00:00:00Z'),
    dkim: { domainName: 'example.com', keySelector: 's1', privateKey: pem },
  });
  const head = raw.toString('latin1').split('\r\n\r\n')[0];
  const line = head.split(/\r\n(?![ \t])/).find((l) => /^list-unsubscribe:/i.test(l));
  const parsed = await PostalMime.parse(raw);
  const header = parsed.headers.find((h) => h.key === 'list-unsubscribe');
  assert.ok(line, 'the message carries List-Unsubscribe');
  return header?.value ?? line;
}

test('a List-Unsubscribe URI holding "=?" reaches the receiver as the URI', async () => {
  const value = '<https://news.example.com/unsubscribe?list=weekly&u=?4f2a>, <mailto:unsubscribe@example.com?subject=unsubscribe>';
  const seen = await listUnsubscribeOf(value);
  assert.is(seen, value, 'List-Unsubscribe as a receiver reads it (raw header, not decoded)');
});

test('a List-Unsubscribe admitted before these rules (not ASCII) still goes 7-bit, encoded as it was', async () => {
  const value = '<https://news.example.com/désabonner?u=1>';
  const { raw } = await composeMessage({
    from: 'Shop <news@example.com>', to: ['ann@example.org'], cc: [], replyTo: null, subject: 'Weekly', html: null, text: 'hi',
    headers: { 'List-Unsubscribe': value }, messageId: 'em_2@example.com', date: new Date('2025-01-01T00:00:00Z'),
    dkim: { domainName: 'example.com', keySelector: 's1', privateKey: pem },
  });
  const head = raw.toString('latin1').split('\r\n\r\n')[0];
  assert.not.match(head, /[^\x00-\x7f]/, 'the header is 7-bit');
  assert.equal((await PostalMime.parse(raw)).headers.filter((h) => h.key === 'list-unsubscribe').map((h) => decodeWords(h.value)), [value]);
});

test.run();

const api = suite<{ sends: OutboxSends }>('URI-list headers through POST /v1/emails');

api.before(async (ctx) => {
  ctx.sends = await startOutboxSends({ fromName: 'News', local: 'news', subject: 'Weekly' });
});
api.after(async (ctx) => {
  await ctx.sends.close();
});

const post = (ctx: { sends: OutboxSends }, headers: Record<string, string>) => ctx.sends.post(headers);

/** Sent to the outbox, its DKIM signature verified and covering the List- fields (RFC 8058 3.1 needs List-Unsubscribe-Post signed) and Archived-At. */
async function sent(ctx: { sends: OutboxSends }, headers: Record<string, string>): Promise<Buffer> {
  const { raw, signed } = await ctx.sends.sent(headers);
  for (const name of Object.keys(headers).filter((n) => /^(list-|archived-at$)/i.test(n))) assert.ok(signed.includes(name.toLowerCase()), `the signature covers ${name}`);
  return raw;
}

/** `<https://…>` of `length` characters. */
const https = (length: number) => `<https://news.example.com/u?t=${'a'.repeat(length - 31)}>`;
const head = (raw: Buffer) => raw.toString('latin1').slice(0, raw.indexOf('\r\n\r\n'));
const longest = (raw: Buffer) => Math.max(...raw.toString('latin1').split('\r\n').map((l) => l.length));
/** The field as it is on the wire, its folds undone (RFC 5322 2.2.3: CRLF removed, the whitespace kept). */
const unfolded = (raw: Buffer, name: string) => head(raw).split(/\r\n(?![ \t])/).filter((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`)).map((l) => l.replace(/\r\n/g, ''));
const readBack = async (raw: Buffer, name: string) => (await PostalMime.parse(raw)).headers.filter((h) => h.key === name.toLowerCase()).map((h) => h.value);

api('every URI-list header holding "=?" or a quote arrives byte-exact, and the signature verifies', async (ctx) => {
  const headers = {
    'List-Unsubscribe': '<https://news.example.com/unsubscribe?list=weekly&u=?4f2a>, <mailto:unsubscribe@example.com?subject=unsubscribe>',
    'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
    'List-Subscribe': '<https://news.example.com/s?q==?UTF-8?Q?x?=>',
    'List-Help': '<https://news.example.com/help?x=?y> (see "Help")',
    'List-Post': 'NO (posting is not allowed, "replies" go to support)',
    'List-Owner': '<mailto:owner@example.com?subject==?owner>',
    'List-Archive': '<https://news.example.com/archive?from=?2025>',
    'Archived-At': '<https://news.example.com/archive/2025/01?id==?1>',
  };
  const raw = await sent(ctx, headers);
  for (const [name, value] of Object.entries(headers)) {
    assert.equal(unfolded(raw, name), [`${name}: ${value}`], `${name} on the wire`);
    assert.equal(await readBack(raw, name), [value], `${name} as postal-mime reads it`);
  }
});

api('a long list is folded between its entries only, a URI of up to 997 characters not at all; each unfolds to the value given', async (ctx) => {
  const mailto = '<mailto:unsubscribe@example.com?subject=unsubscribe>';
  const lists = [
    `${https(500)}, ${https(998 - 500 - 2 - mailto.length - 2)}, ${mailto}`,
    `${mailto}, ${https(998 - mailto.length - 2)}`,
    https(997),
    https(981),
  ];
  assert.equal(lists.map((l) => l.length), [998, 998, 997, 981]);
  for (const value of lists) {
    const raw = await sent(ctx, { 'List-Unsubscribe': value, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' });
    assert.ok(longest(raw) <= 998, `a line of ${longest(raw)} characters`);
    assert.not.match(head(raw), /=\?UTF-8\?/i, 'no encoded word');
    for (const uri of value.match(/<[^>]*>/g)!) assert.ok(head(raw).includes(uri), `${uri.slice(0, 40)}… is on one line, unbroken`);
    assert.equal(unfolded(raw, 'List-Unsubscribe'), [`List-Unsubscribe: ${value}`]);
    assert.equal(await readBack(raw, 'List-Unsubscribe'), [value]);
  }
});

for (const [name, value, reason] of [
  ['List-Unsubscribe', '<https://news.example.com/désabonner?u=1>', 'must hold only ASCII characters: this header is sent as written, not RFC 2047 encoded'],
  ['list-owner', '<mailto:zoë@example.com>', 'must hold only ASCII characters: this header is sent as written, not RFC 2047 encoded'],
  ['Archived-At', `<https://news.example.com/a/${'b'.repeat(998 - 28 - 1)}>`, 'must not hold a word longer than 997 characters: this header is a list of <URI> sent as written, folded only at the whitespace between its entries'],
  ['List-Unsubscribe', `<mailto:u@example.com>,${https(998 - 23)}`, 'must not hold a word longer than 997 characters: this header is a list of <URI> sent as written, folded only at the whitespace between its entries'],
]) {
  api(`${name} of ${value.length} characters, ${value.slice(0, 40)}…: 400 validation_error naming the header`, async (ctx) => {
    assert.is(value.length, /[^\x00-\x7f]/.test(value) ? value.length : 998);
    const response = await post(ctx, { [name]: value });
    assert.is(response.statusCode, 400, response.body);
    assert.equal(response.json().error, { code: 'validation_error', message: `body.headers.${name}: ${reason}` });
  });
}

api.run();
