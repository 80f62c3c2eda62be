// A custom header the composer writes as a structured field (List-Id, the mailbox lists such as
// Resent-From and Disposition-Notification-To, Sender, the URI lists, In-Reply-To, References,
// OTP-Token) is accepted with a value of only whitespace, and then left out of the message
// (INTERFACE-DECISIONS: "An empty value leaves the header out"): a structured field has nothing
// to say without a value, and RFC 2047 5 allows an encoded word (the form a text field of only
// whitespace takes) in none of them outside a phrase. POST /v1/emails → outbox .eml (DKIM
// verified by mailauth), read by python3's email package.
import { execFileSync } from 'node:child_process';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startOutboxSends, type OutboxSends } from './support/outbox-sends.ts';

interface Context { sends: OutboxSends }
const test = suite<Context>('structured custom headers of only whitespace');

test.before(async (ctx) => {
  ctx.sends = await startOutboxSends({ fromName: 'App', local: 'app', subject: 'Hello' });
});
test.after(async (ctx) => {
  await ctx.sends.close();
});

/** Each header field of the message as python3's email package reads it: name, value, defects. */
function pythonFields(raw: Buffer): Array<{ name: string; value: string; defects: string[] }> {
  return JSON.parse(execFileSync('python3', ['-c', [
    'import email, json, sys',
    'from email import policy',
    'm = email.message_from_bytes(sys.stdin.buffer.read(), policy=policy.default)',
    'print(json.dumps([{"name": k, "value": str(v), "defects": [type(d).__name__ for d in v.defects]} for k, v in m.items()]))',
  ].join('\n')], { input: raw }).toString());
}

/** The header's raw line, unfolded, or null when the message has none. */
function rawField(raw: Buffer, name: string): string | null {
  const head = raw.subarray(0, raw.indexOf('\r\n\r\n')).toString('latin1').replace(/\r\n[ \t]/g, ' ');
  return head.split('\r\n').find((line) => line.toLowerCase().startsWith(`${name.toLowerCase()}:`)) ?? null;
}

async function assertLeftOut(ctx: Context, headers: Record<string, string>) {
  const { raw } = await ctx.sends.sent({ ...headers, 'X-Marker': 'kept' });
  const fields = pythonFields(raw);
  assert.equal(fields.filter((f) => f.defects.length > 0), [], 'python3 reads every field without a defect');
  assert.ok(fields.some((f) => f.name === 'X-Marker' && f.value === 'kept'), 'the other custom headers are there');
  for (const name of Object.keys(headers)) {
    assert.is(rawField(raw, name), null, `${name} is left out`);
    assert.not.ok(fields.some((f) => f.name.toLowerCase() === name.toLowerCase()), `python3 finds no ${name}`);
  }
}

for (const [name, value] of [
  ['Resent-From', '   '],
  ['Resent-Sender', ' '],
  ['Disposition-Notification-To', '\t'],
  ['Errors-To', ' \t '],
  ['List-Id', '  '],
] as const) {
  test(`${name} of only whitespace (${JSON.stringify(value)}): accepted, and left out of the message`, async (ctx) => {
    await assertLeftOut(ctx, { [name]: value });
  });
}

test('Sender, List-Unsubscribe, In-Reply-To, References and OTP-Token of only whitespace: accepted, and left out of the message', async (ctx) => {
  await assertLeftOut(ctx, { Sender: '   ', 'List-Unsubscribe': '   ', 'In-Reply-To': '   ', References: '\t', 'OTP-Token': '  ' });
});

test.run();
