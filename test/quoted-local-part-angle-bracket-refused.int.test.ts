// A quoted local part holding "<" or ">" (`"a<b"@example.org`) is refused at admission, 400
// validation_error naming the field and why, wherever a send names a mailbox. RFC 5321 4.1.2
// allows it, but Relay could not send it: nodemailer refuses such a recipient before RCPT TO
// (which Relay would record as a hard bounce no receiver gave, and suppress the address across
// the workspace) and writes it as `"a b"@example.org` in a header (a reply-all to a stranger).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { errorCode } from './support/management.ts';

interface Context { t: TestApp; tenant: DeliveryTenant }
const test = suite<Context>('a quoted local part holding an angle bracket');

test.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.tenant = await deliveryTenant(ctx.t);
});
test.after(async (ctx) => ctx.t.close());

const REASON = 'has "<" or ">" in its quoted local part, which Relay does not send';

test('refused in every field that names a mailbox, with the reason', async (ctx) => {
  const from = `app@${ctx.tenant.domain}`;
  const cases: Array<[Record<string, unknown>, string]> = [
    [{ to: ['"a<b"@example.org', 'ann@example.org'] }, 'body.to[0]'],
    [{ to: 'ann@example.org', cc: '"x>y"@example.org' }, 'body.cc'],
    [{ to: 'ann@example.org', bcc: ['"a\\<b"@example.org'] }, 'body.bcc[0]'],
    [{ to: 'ann@example.org', reply_to: '"a<b"@example.org' }, 'body.reply_to'],
    [{ to: 'ann@example.org', from: `"a<b"@${ctx.tenant.domain}` }, 'body.from'],
  ];
  for (const [fields, field] of cases) {
    const response = await ctx.t.app.inject({
      method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.tenant.key}` },
      payload: { from, subject: 'Hello', text: 'Hi', ...fields },
    });
    assert.is(response.statusCode, 400, `${JSON.stringify(fields)}: ${response.body}`);
    assert.is(errorCode(response), 'validation_error');
    const message: string = response.json().error.message;
    assert.ok(message.startsWith(`${field}`), `${JSON.stringify(fields)}: ${message}`);
    assert.ok(message.includes(REASON), `${JSON.stringify(fields)}: ${message}`);
  }
});

test('spaces and every other printable character in quotes are still accepted', async (ctx) => {
  const response = await ctx.t.app.inject({
    method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.tenant.key}` },
    payload: { from: `app@${ctx.tenant.domain}`, to: ['"john doe"@example.org', '"a(b)c,d;e:f[g]h@i"@example.org'], subject: 'Hello', text: 'Hi' },
  });
  assert.is(response.statusCode, 202, response.body);
});

test.run();
