// Spec, Mailbox: "A bare address (max 254 characters) or the form Name <address>". A quoted
// local part may hold spaces ("john doe"@example.org, RFC 5321 4.1.2), and Relay keeps such a
// local part quoted (INTERFACE-DECISIONS: "one that needs them keeps them"). Pins: that address
// is accepted bare as in either angle form, and kept as written; spaces or angle brackets outside
// the quotes are still refused, naming the mailbox forms; angle brackets inside them are refused
// for what they are (./quoted-local-part-angle-bracket-refused.int.test.ts).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, detail, type DeliveryTenant } from './support/delivery.ts';
import { errorCode } from './support/management.ts';

interface Context { t: TestApp; tenant: DeliveryTenant }
const test = suite<Context>('a quoted local part with spaces, written bare');

test.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.tenant = await deliveryTenant(ctx.t);
});
test.after(async (ctx) => ctx.t.close());

const post = (ctx: Context, to: string) => ctx.t.app.inject({
  method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.tenant.key}` },
  payload: { from: `app@${ctx.tenant.domain}`, to, subject: 'Hello', text: 'Hi' },
});

test('"john doe"@example.org is accepted bare as in the angle forms, and kept as written', async (ctx) => {
  for (const to of ['"john doe"@example.org', '<"john doe"@example.org>', 'John <"john doe"@example.org>']) {
    const response = await post(ctx, to);
    assert.is(response.statusCode, 202, `${to}: ${response.body}`);
    const email = await detail(ctx.t, ctx.tenant.key, response.json().id);
    assert.equal(email.to, [to], to);
  }
});

test('spaces or angle brackets outside the quotes are refused, naming the mailbox forms', async (ctx) => {
  for (const to of ['john doe@example.org', '"john" doe@example.org', '"john doe"@example.org>']) {
    const response = await post(ctx, to);
    assert.is(response.statusCode, 400, `${to}: ${response.body}`);
    assert.is(errorCode(response), 'validation_error');
    assert.match(response.json().error.message, /^body\.to: must be an address or "Name <address>"$/, to);
  }
});

test.run();
