// A text or html body goes out in canonical form, every line break CRLF (RFC 2046 4.1.1), in
// whichever transfer encoding nodemailer picks: base64 for mostly non-Latin text encodes the
// line breaks as they are (RFC 2045 6.8 asks for the canonical form before encoding), so a
// body's CRLF, LF or lone CR line breaks are made CRLF before composing, as for quoted-printable
// and 7bit parts. POST /v1/emails → outbox .eml (DKIM verified by mailauth), each part decoded by
// python3's email package.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { dkimResults, waitForDetail } from './support/delivery.ts';
import { startOutboxSends, type OutboxSends } from './support/outbox-sends.ts';

interface Context { sends: OutboxSends }
const test = suite<Context>('line breaks of text parts in every transfer encoding');

test.before(async (ctx) => {
  ctx.sends = await startOutboxSends({ fromName: 'App', local: 'app', subject: 'Hello' });
});
test.after(async (ctx) => {
  await ctx.sends.close();
});

/** Each leaf part: its content type, transfer encoding, and decoded bytes. */
function pythonParts(raw: Buffer): Array<{ type: string; cte: string; bytes: Buffer }> {
  const parts: Array<{ type: string; cte: string; hex: string }> = JSON.parse(execFileSync('python3', ['-c', [
    'import email, json, sys',
    'from email import policy',
    'm = email.message_from_bytes(sys.stdin.buffer.read(), policy=policy.default)',
    'print(json.dumps([{"type": p.get_content_type(), "cte": str(p["content-transfer-encoding"]), "hex": p.get_payload(decode=True).hex()} for p in m.walk() if not p.is_multipart()]))',
  ].join('\n')], { input: raw }).toString());
  return parts.map((p) => ({ type: p.type, cte: p.cte, bytes: Buffer.from(p.hex, 'hex') }));
}

/** POST /v1/emails with these bodies; the outbox .eml once sent, its DKIM signature verified. */
async function sendBodies(ctx: Context, text: string, html: string): Promise<Buffer> {
  const response = await ctx.sends.t.app.inject({
    method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.sends.tenant.key}` },
    payload: { from: `app@${ctx.sends.tenant.domain}`, to: 'ann@example.org', subject: 'Hello', text, html },
  });
  assert.is(response.statusCode, 202, response.body);
  const id = response.json().id as string;
  await waitForDetail(ctx.sends.t, ctx.sends.tenant.key, id, (d) => d.status === 'sent', 'is sent', 10_000);
  const raw = readFileSync(join(ctx.sends.t.config.dataDir, 'outbox', `${id}.eml`));
  const [verdict] = await dkimResults(ctx.sends.dns, raw);
  assert.is(verdict.status.result, 'pass', verdict.info);
  return raw;
}

const crlf = (text: string) => text.replace(/\r\n|\r|\n/g, '\r\n');

for (const [what, body, encoding] of [
  ['Arabic given with CRLF line breaks', 'مرحبا يا آن\r\nطلبك في الطريق\r\nشكرا\r\n', 'base64'],
  ['Chinese given with LF and lone CR line breaks', '你好，安\n您的订单已发货\r谢谢\n\n', 'base64'],
  ['Latin given with LF line breaks', 'Hallo Ann, Grüße\nDein Paket ist unterwegs\n', 'quoted-printable'],
  ['ASCII given with lone CR and CRLF line breaks', 'Hello Ann\rYour parcel\r\nis on its way', '7bit'],
] as const) {
  test(`a body in ${what}: its ${encoding} text and html parts decode to the body with every line break CRLF`, async (ctx) => {
    const html = `<p>${body}</p>`;
    const parts = pythonParts(await sendBodies(ctx, body, html));
    assert.equal(parts.map((p) => [p.type, p.cte]), [['text/plain', encoding], ['text/html', encoding]]);
    const [text, markup] = parts.map((p) => p.bytes.toString('utf8'));
    assert.is(text, crlf(body), 'text/plain');
    assert.is(markup, crlf(html), 'text/html');
  });
}

test.run();
