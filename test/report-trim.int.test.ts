// A report cut to what the parser reads (infra/mail/report-trim.ts) parses exactly as the whole
// report does: every sample of the Sisimai corpus, fed in tiny and in large chunks, and 4 MiB
// reports (a DSN returning a message with a 3 MiB attachment, a plain-text bounce quoting 4 MiB)
// of which a few hundred KiB are kept. Refusing to keep more ends what is kept, and the digest
// and size always cover every byte.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MAX_PART_BYTES, parseReport } from '../infra/mail/report-parser.ts';
import { MAX_KEPT_BYTES, trimReport } from '../infra/mail/report-trim.ts';
import { arf, dsn } from './support/reports.ts';

const test = suite('report trimming');
const CORPUS = fileURLToPath(new URL('./fixtures/bounces/emails/', import.meta.url));
const MiB = 1024 * 1024;

const chunked = (raw: Buffer, size: number) => Readable.from((function* () {
  for (let i = 0; i < raw.length; i += size) yield raw.subarray(i, i + size);
})());

/** A DSN whose returned message carries an attachment of `bytes` (base64, 76-character lines). */
function dsnWithAttachment(bytes: number): Buffer {
  const report = dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 <ann@example.org>: User unknown' });
  const attachment = Buffer.alloc(bytes, 7).toString('base64').replace(/.{76}/g, '$&\r\n');
  return Buffer.from(report.replace(/Content-Type: text\/rfc822-headers\r\n\r\n([\s\S]*?)\r\n--(dsn-boundary-\d+)--/, (_all, headers: string, boundary: string) => [
    'Content-Type: message/rfc822', '', headers.trim(), 'MIME-Version: 1.0', 'Content-Type: multipart/mixed; boundary="inner"', '',
    '--inner', 'Content-Type: text/plain', '', 'the original text', '--inner', 'Content-Type: application/pdf', 'Content-Transfer-Encoding: base64', '',
    attachment, '--inner--', '', `--${boundary}--`,
  ].join('\r\n')));
}

test('every corpus sample parses the same trimmed as whole, in 61-byte and in 64 KiB chunks', async () => {
  const files = readdirSync(CORPUS);
  assert.ok(files.length > 300, 'the corpus is there');
  for (const file of files) {
    const raw = readFileSync(CORPUS + file);
    const whole = await parseReport(raw);
    for (const size of [61, 64 * 1024]) {
      const trimmed = await trimReport(chunked(raw, size));
      assert.equal(await parseReport(trimmed.bytes!), whole, `${file} in ${size}-byte chunks`);
      assert.is(trimmed.size, raw.length);
    }
  }
});

test('fed one byte at a time, a DSN and a complaint parse the same', async () => {
  for (const raw of [dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1' }), arf({ recipient: 'bob@example.org' })].map((r) => Buffer.from(r))) {
    const trimmed = await trimReport(chunked(raw, 1));
    assert.equal(trimmed.bytes, raw);
  }
});

test('a 4 MiB DSN returning a message with a 3 MiB attachment: a few hundred KiB kept, the same hard bounce read', async () => {
  const raw = dsnWithAttachment(3 * MiB);
  assert.ok(raw.length > 4 * 1000 * 1000);
  const trimmed = await trimReport(chunked(raw, 64 * 1024));
  assert.ok(trimmed.bytes!.length <= MAX_PART_BYTES + 16 * 1024, `kept ${trimmed.bytes!.length} bytes`);
  const whole = await parseReport(raw);
  assert.is(whole.recipients[0]?.outcome, 'hard_bounced');
  assert.equal(await parseReport(trimmed.bytes!), whole);
  assert.is(trimmed.sha256, createHash('sha256').update(raw).digest('hex'));
  assert.is(trimmed.size, raw.length);
});

test('a plain-text bounce quoting 4 MiB: its first MAX_PART_BYTES kept, cut at a line end, the same reading', async () => {
  const raw = Buffer.from([
    'From: MAILER-DAEMON@mx.example.org', 'Subject: Undelivered Mail Returned to Sender', '', 'This is the mail system.', '',
    '<ann@example.org>: host mx.example.org said: 550 5.1.1 User unknown', '', '--- original message follows ---',
    ...Array.from({ length: 50_000 }, (_, i) => `${i} ${'q'.repeat(76)}`), '',
  ].join('\r\n'));
  assert.ok(raw.length > 4 * 1000 * 1000);
  const trimmed = await trimReport(chunked(raw, 16 * 1024));
  const kept = trimmed.bytes!;
  assert.ok(kept.length <= MAX_PART_BYTES + 4096, `kept ${kept.length} bytes`);
  assert.is(kept[kept.length - 1], 0x0a, 'cut after a line end');
  assert.equal(await parseReport(kept), await parseReport(raw));
});

test('bodies kept in all stay under MAX_KEPT_BYTES, however many large parts a report has', async () => {
  const parts = Array.from({ length: 12 }, (_, i) => ['--many', 'Content-Type: text/plain', '', `${i}`.repeat(300 * 1024 / 4).replace(/(.{76})/g, '$1\r\n')].join('\r\n'));
  const raw = Buffer.from(['From: x@example.org', 'Content-Type: multipart/mixed; boundary="many"', '', ...parts, '--many--', ''].join('\r\n'));
  const trimmed = await trimReport(chunked(raw, 64 * 1024));
  assert.ok(trimmed.bytes!.length <= MAX_KEPT_BYTES + 16 * 1024, `kept ${trimmed.bytes!.length} of ${raw.length} bytes`);
});

test('refusing to keep more: nothing is kept, every byte is still read, hashed and counted', async () => {
  const raw = dsnWithAttachment(MiB);
  let granted = 0;
  const trimmed = await trimReport(chunked(raw, 64 * 1024), { keep: (bytes) => (granted + bytes <= 2048 ? ((granted += bytes), true) : false) });
  assert.is(trimmed.bytes, null);
  assert.is(trimmed.size, raw.length);
  assert.is(trimmed.sha256, createHash('sha256').update(raw).digest('hex'));
});

test('past maxBytes the rest is only counted; a header block past the parser limit ends what is kept, and reads as the parser reads it', async () => {
  const raw = dsnWithAttachment(2 * MiB);
  const capped = await trimReport(chunked(raw, 64 * 1024), { maxBytes: MiB });
  assert.is(capped.size, raw.length);
  assert.is(capped.sha256, createHash('sha256').update(raw.subarray(0, MiB)).digest('hex'));
  const hugeHeader = Buffer.from(`X-Huge: ${'a'.repeat(900_000)}\r\nSubject: x\r\n\r\nhello`);
  const refused = await trimReport(chunked(hugeHeader, 64 * 1024));
  assert.is(refused.size, hugeHeader.length);
  assert.equal(await parseReport(refused.bytes!), await parseReport(hugeHeader));
});

test.run();
