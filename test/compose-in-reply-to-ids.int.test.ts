// In-Reply-To, like References, is a list of msg-ids (RFC 5322 3.6.4), and admission takes the
// ids of either with or without their angle brackets: both go out as the same list, each id in
// its own <…>, one space between them, so a reply threads in the recipient's mail program. POST
// /v1/emails → outbox .eml (DKIM verified by mailauth), read by python3's email package.
import { execFileSync } from 'node:child_process';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startOutboxSends, type OutboxSends } from './support/outbox-sends.ts';

interface Context { sends: OutboxSends }
const test = suite<Context>('In-Reply-To ids on the wire');

test.before(async (ctx) => {
  ctx.sends = await startOutboxSends({ fromName: 'App', local: 'app', subject: 'Re: your order' });
});
test.after(async (ctx) => {
  await ctx.sends.close();
});

/** Header values as python3's email package reads them (policy.default), and the defects it finds in them. */
function pythonReads(raw: Buffer, names: string[]): Array<{ value: string; defects: string[] }> {
  return JSON.parse(execFileSync('python3', ['-c', [
    'import email, json, sys',
    'from email import policy',
    'm = email.message_from_bytes(sys.stdin.buffer.read(), policy=policy.default)',
    `print(json.dumps([{"value": str(m[n]), "defects": [type(d).__name__ for d in m[n].defects]} for n in ${JSON.stringify(names)}]))`,
  ].join('\n')], { input: raw }).toString());
}

for (const [value, ids] of [
  ['a1@mail.example.org b2@mail.example.org', '<a1@mail.example.org> <b2@mail.example.org>'],
  ['<a1@mail.example.org> b2@mail.example.org', '<a1@mail.example.org> <b2@mail.example.org>'],
  ['<a1@mail.example.org>\t\t<b2@mail.example.org>   c3@mail.example.org', '<a1@mail.example.org> <b2@mail.example.org> <c3@mail.example.org>'],
  ['a1@mail.example.org', '<a1@mail.example.org>'],
  ['  <a1@mail.example.org>  ', '<a1@mail.example.org>'],
] as const) {
  test(`In-Reply-To and References given ${JSON.stringify(value)}: both go out as ${ids}`, async (ctx) => {
    const { raw, signed } = await ctx.sends.sent({ 'In-Reply-To': value, References: value });
    const [inReplyTo, references] = pythonReads(raw, ['in-reply-to', 'references']);
    assert.equal(references, { value: ids, defects: [] }, 'References');
    assert.equal(inReplyTo, { value: ids, defects: [] }, 'In-Reply-To');
    assert.ok(signed.includes('in-reply-to'), 'In-Reply-To is signed');
  });
}

test.run();
