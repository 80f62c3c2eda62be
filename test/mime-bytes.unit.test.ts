// messageBytes against nodemailer's own build of the same compiled message: byte for byte, over
// bodies that take each transfer encoding and each line-end and wrapping rule.
import { Readable } from 'node:stream';
import MailComposer from 'nodemailer/lib/mail-composer';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { bareLineBreakAt, messageBytes } from '../infra/mail/mime-bytes.ts';

type Mail = ConstructorParameters<typeof MailComposer>[0];

function compiled(mail: Mail) {
  const root = new MailComposer({
    from: { name: 'Zoë Ünicode, Ltd', address: 'hello@acme.example' },
    to: [{ name: '', address: 'alice@receiver.test' }],
    subject: 'Your order has shipped',
    messageId: '<em_Q2xhdWRlLXdhcy1oZXJl@acme.example>',
    date: new Date('2025-03-01T12:34:56Z'),
    newline: 'win',
    disableFileAccess: true,
    disableUrlAccess: true,
    ...mail,
  }).compile();
  root.addHeader('X-Unicode', 'naïve');
  return root;
}

const LONG = `start-${'0123456789'.repeat(30)}-end`;

const bodies: Record<string, Mail> = {
  'short ASCII text and HTML (7bit)': { text: 'Hello, your order 1234 is on its way.', html: '<p>Hello, your order <b>1234</b> is on its way.</p>' },
  'text only': { text: 'only text' },
  'HTML only': { html: '<p>only html</p>' },
  'non-ASCII text with trailing spaces and tabs (quoted-printable)': { text: 'ünïcödé ✓ trailing space \nline two\t\n\n', html: `<p>${LONG}</p>` },
  'ASCII lines longer than 76 characters': { text: `${LONG}\n${LONG}`, subject: `Grüße aus Köln — ${'a long subject that needs folding '.repeat(4)}` },
  'CRLF, a lone CR and a lone LF, and control characters': { text: 'a\r\nb\rc\nd  ', html: '\u0000\u0001 binary-ish \u00ff' },
  'bodies past the encoders\' 64 KiB slices, ending in whitespace': { text: `${'x'.repeat(70_000)} tail  `, html: `${'ü'.repeat(100)}\n`.repeat(800) },
  'empty bodies': { text: '', html: '' },
  'a text ending in CR': { text: 'ends with a carriage return\r' },
  'dot-stuffing and From lines are left to the transport': { text: '.\n..\nFrom me\n' },
  // Bodies as compose.ts hands them over: every line break CRLF.
  'CJK and Arabic text with CRLF line breaks (base64)': { text: '日本語のテキスト\r\n二行目\r\n\r\n', html: '<p>مرحبا يا آن</p>\r\n<p>شكرا</p>\r\n' },
  'Latin text with CRLF line breaks, trailing spaces and long lines (quoted-printable)': { text: `Grüße \r\n${LONG} ü\r\n\t\r\n`, html: `<p>Grüße aus Köln</p>\r\n<p>${LONG}</p>\r\n` },
  'CJK (base64), Cc and Reply-To with display names': {
    text: '日本語のテキスト', html: '<p>日本語</p>',
    cc: [{ name: 'Dö, Jane', address: 'jane@other.test' }], replyTo: { name: 'Support', address: 'support@acme.example' },
  },
};

for (const [name, mail] of Object.entries(bodies)) {
  test(`given ${name}, when joined, then the bytes are nodemailer's own build`, async () => {
    // Joined first, on the tree as compose.ts holds it (no header built yet), then built.
    const root = compiled(mail);
    const joined = messageBytes(root);
    const built = await root.build();
    assert.ok(joined, 'joined');
    assert.is(joined!.toString('latin1'), built.toString('latin1'));
  });
}

test('given a part whose content is a stream, when joined, then it is left to nodemailer (null)', () => {
  assert.is(messageBytes(compiled({ text: Readable.from(['streamed']) })), null);
});

test('given LF line ends asked for, or a raw message, when joined, then it is left to nodemailer (null)', () => {
  assert.is(messageBytes(compiled({ text: 'hello', newline: 'unix' })), null);
  assert.is(messageBytes(compiled({ raw: 'Subject: raw\r\n\r\nbody\r\n' })), null);
});

test('bareLineBreakAt: the offset of a LF, else a CR, outside a CRLF; -1 when every line break is CRLF', () => {
  const at = (text: string) => bareLineBreakAt(Buffer.from(text, 'latin1'));
  assert.is(at(''), -1);
  assert.is(at('a\r\nb\r\n\r\n'), -1);
  assert.is(at('a\rb\r\n'), 1);
  assert.is(at('a\r\nb\n'), 4);
  assert.is(at('a\r\r\n'), 1);
  assert.is(at('a\n\r\n'), 1);
  assert.is(at('ends in CR\r'), 10);
  assert.is(at('\nstarts with LF'), 0);
  assert.is(at('a\rb\nc'), 3, 'the bare LF first');
});

test.run();
