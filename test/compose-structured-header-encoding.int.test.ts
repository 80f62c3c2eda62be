// A custom List-Id (RFC 2919, `[phrase] <list-id>`) or address-bearing header (Resent-From,
// Disposition-Notification-To, Errors-To and kin: send-request.ts MAILBOX_LIST_HEADERS) is
// structured: RFC 2047 5 allows encoded words in its phrase or display names and nowhere else.
// Shown: with a quoted or non-ASCII phrase or display name, the <list-id> and each <address> go
// out as written and only the phrase or names are encoded (they read back as the text given);
// no line is longer than 998 characters; values that cannot be sent so (a non-ASCII list-id or
// address, a List-Id without its <list-id>) are 400 validation_error naming the header; and a
// value admitted before these rules goes as it went then. Through POST /v1/emails to the outbox
// .eml (DKIM verified by mailauth, headers read by postal-mime), or composeMessage itself.
import { generateKeyPairSync } from 'node:crypto';
import PostalMime, { decodeWords } from 'postal-mime';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { composeMessage } from '../infra/mail/compose.ts';
import { startOutboxSends, type OutboxSends } from './support/outbox-sends.ts';

interface Context { sends: OutboxSends }
const test = suite<Context>('structured custom headers on the wire');

test.before(async (ctx) => {
  ctx.sends = await startOutboxSends({ fromName: 'App', local: 'app', subject: 'Hello' });
});
test.after(async (ctx) => {
  await ctx.sends.close();
});

const post = (ctx: Context, headers: Record<string, string>) => ctx.sends.post(headers);
const sent = async (ctx: Context, headers: Record<string, string>): Promise<Buffer> => (await ctx.sends.sent(headers)).raw;

/** The raw (unfolded, undecoded) value of a header field, as a structured-field parser sees it. */
async function rawValue(raw: Buffer, name: string): Promise<string> {
  const parsed = await PostalMime.parse(raw);
  const field = parsed.headers.find((h) => h.key === name.toLowerCase());
  assert.ok(field, `${name} is in the message`);
  return field!.value;
}

const longestLine = (raw: Buffer) => Math.max(...raw.toString('latin1').split('\r\n').map((l) => l.length));

test('List-Id with a quoted phrase (RFC 2919\'s own form) or a non-ASCII phrase: the <list-id> goes out as written', async (ctx) => {
  for (const [value, phrase] of [['"Acme News" <news.acme.example>', 'Acme News'], ['Nachrichten für Kunden <news.acme.example>', 'Nachrichten für Kunden']]) {
    const raw = await sent(ctx, { 'List-Id': value });
    const listId = await rawValue(raw, 'List-Id');
    assert.match(listId, /<news\.acme\.example>\s*$/, `List-Id as sent: ${JSON.stringify(listId)}`);
    assert.is(decodeWords(listId.replace(/\s*<news\.acme\.example>\s*$/, '')).replace(/^"(.*)"$/, '$1'), phrase, 'the phrase reads as given');
  }
});

test('an address-bearing custom header with a quoted or non-ASCII display name: the <address> goes out as written', async (ctx) => {
  const cases = {
    'Resent-From': '"Acme, Inc" <billing@acme.example>',
    'Disposition-Notification-To': 'Zoë <zoe@acme.example>',
  };
  for (const [name, value] of Object.entries(cases)) {
    const raw = await sent(ctx, { [name]: value });
    const field = await rawValue(raw, name);
    assert.match(field, /<[a-z]+@acme\.example>\s*$/, `${name} as sent: ${JSON.stringify(field)}`);
  }
});

test('a list of mailboxes keeps every address and reads back as the names given', async (ctx) => {
  const value = '"Acme, Inc" <billing@acme.example>, Zoë Ünïcode <zoe@acme.example>, plain@acme.example, "=?utf-8?q?x?=" <q@acme.example>';
  const raw = await sent(ctx, { 'Errors-To': value });
  const parsed = await PostalMime.parse(raw);
  const field = parsed.headers.find((h) => h.key === 'errors-to')!.value;
  for (const address of ['<billing@acme.example>', '<zoe@acme.example>', 'plain@acme.example', '<q@acme.example>']) assert.ok(field.includes(address), `${address} in ${field}`);
  // An encoded-word look-alike in a name is encoded, so it reads as written (not as "x").
  assert.is(decodeWords(field), '"Acme, Inc" <billing@acme.example>, Zoë Ünïcode <zoe@acme.example>, plain@acme.example, =?utf-8?q?x?= <q@acme.example>');
});

test('a List-Id phrase that quoting would make too long for a line goes as encoded words: no line over 998 characters', async (ctx) => {
  const phrase = 'a.'.repeat(494); // 988 characters, which need quotes: "List-Id: " and 990 more
  const raw = await sent(ctx, { 'List-Id': `${phrase} <a.b>` });
  assert.ok(longestLine(raw) <= 998, `a line of ${longestLine(raw)} characters`);
  const listId = await rawValue(raw, 'List-Id');
  assert.match(listId, /\s<a\.b>$/);
  assert.is(decodeWords(listId.replace(/\s<a\.b>$/, '')), phrase);
});

test('values that cannot be sent as structured fields: 400 validation_error naming the header', async (ctx) => {
  const refused: Array<[string, string, RegExp]> = [
    ['List-Id', 'Nachrichten <nachrichten.bäckerei.example>', /list-id at most 255 ASCII characters/],
    ['List-Id', 'Acme News', /must be "<list-id>" or "phrase <list-id>"/],
    ['List-Id', '<localhost>', /a label, a dot and a domain/],
    ['Disposition-Notification-To', 'Zoë <zoë@acme.example>', /whose addresses are ASCII/],
    ['Errors-To', 'Doe, Jane <jane@acme.example>', /entry 1 is not an email address; a display name holding a comma must be quoted/],
    ['Resent-Sender', 'a@acme.example, b@acme.example', /must be one mailbox/],
  ];
  for (const [name, value, reason] of refused) {
    const response = await post(ctx, { [name]: value });
    assert.is(response.statusCode, 400, `${name}: ${value}`);
    const { error } = response.json();
    assert.is(error.code, 'validation_error');
    assert.ok(error.message.startsWith(`body.headers.${name}: `), error.message);
    assert.match(error.message, reason);
  }
});

test('a List-Id admitted before these rules (its list-id not ASCII) still goes 7-bit, encoded as it was', async () => {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const value = 'Nachrichten <nachrichten.bäckerei.example>';
  const { raw } = await composeMessage({
    from: 'Shop <news@example.com>', to: ['ann@example.org'], cc: [], replyTo: null, subject: 'Weekly', html: null, text: 'hi',
    headers: { 'List-Id': value }, messageId: 'em_1@example.com', date: new Date('2025-01-01T00:00:00Z'),
    dkim: { domainName: 'example.com', keySelector: 's1', privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() },
  });
  assert.not.match(raw.toString('latin1').split('\r\n\r\n')[0], /[^\x00-\x7f]/, 'the header is 7-bit');
  assert.is(decodeWords(await rawValue(raw, 'List-Id')), value);
});

test.run();
