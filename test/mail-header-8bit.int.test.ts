// A message's header is 7-bit (Relay does not ask for SMTPUTF8, RFC 6531 3.4): the custom
// headers nodemailer writes as given, not RFC 2047 encoded (In-Reply-To, References, OTP-Token;
// send-request.ts UNENCODED_HEADERS), must be ASCII, and a custom Sender must be one mailbox
// with an ASCII address (a domain written in Unicode goes in its ASCII form); otherwise 400
// validation_error naming the header. A non-ASCII display name in a Sender is fine: it goes out
// encoded. POST /v1/emails → sender → real SMTP to a real smtp-server (which offers SMTPUTF8),
// read back by postal-mime.
import PostalMime from 'postal-mime';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context { sink: SmtpSink; t: TestApp; tenant: DeliveryTenant }
const test = suite<Context>('8-bit header bytes');

test.before(async (ctx) => {
  ctx.sink = await startSmtpSink();
  ctx.t = await startTestApp({ RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none` }, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
});
test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.sink.close();
});

const base = (tenant: DeliveryTenant) => ({ from: `app@${tenant.domain}`, to: 'ann@example.org', subject: 'Re: order', text: 'Hi' });

for (const [name, value, reason] of [
  ['In-Reply-To', '<bestellung-ü@shop.example>', 'must hold only ASCII characters: this header is sent as written, not RFC 2047 encoded'],
  ['References', '<a@x.example> <bestellung-ü@shop.example>', 'must hold only ASCII characters: this header is sent as written, not RFC 2047 encoded'],
  ['OTP-Token', 'café', 'must hold only ASCII characters: this header is sent as written, not RFC 2047 encoded'],
  ['Sender', 'zoë@acme.example', 'must be one mailbox, "address" or "Name <address>", whose address is ASCII (has non-ASCII characters before the @, which are not supported (Relay does not send SMTPUTF8))'],
  ['sender', 'Ops <ops@xn--zz.example>', 'must be one mailbox, "address" or "Name <address>", whose address is ASCII (has an invalid domain: label "xn--zz" is not valid punycode)'],
  ['Sender', 'a@acme.example, b@acme.example', 'must be one mailbox, "address" or "Name <address>", whose address is ASCII (must be an address or "Name <address>")'],
]) {
  test(`a custom ${name} of ${JSON.stringify(value)}: 400 validation_error naming the header`, async (ctx) => {
    const response = await ctx.t.app.inject({ method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.tenant.key}` }, payload: { ...base(ctx.tenant), headers: { [name]: value } } });
    assert.is(response.statusCode, 400, response.body);
    assert.equal(response.json().error, { code: 'validation_error', message: `body.headers.${name}: ${reason}` });
  });
}

test('ASCII In-Reply-To, References and OTP-Token, and a Sender with a non-ASCII display name: sent, the header 7-bit, read back as given', async (ctx) => {
  const { t, tenant, sink } = ctx;
  const headers = { 'In-Reply-To': '<order-1@shop.example>', References: '<a@x.example> <order-1@shop.example>', 'OTP-Token': '123456', Sender: `"Zoë, Ops" <ops@${tenant.domain}>` };
  const id = await send(t, tenant.key, { ...base(tenant), headers });
  await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'is sent', 10_000);
  const arrived = sink.messages.find((m) => m.raw.includes(`Message-ID: <${id}@`));
  assert.ok(arrived, 'the message arrived');
  const head = arrived.raw.subarray(0, arrived.raw.indexOf('\r\n\r\n'));
  assert.not.ok(head.some((b) => b > 0x7f), head.toString('utf8'));
  const parsed = await PostalMime.parse(arrived.raw);
  assert.equal(parsed.sender, { name: 'Zoë, Ops', address: `ops@${tenant.domain}` });
  assert.is(parsed.inReplyTo, headers['In-Reply-To']);
  assert.is(parsed.references, headers.References);
  assert.equal(parsed.headers.filter((h) => h.key === 'otp-token').map((h) => h.value), ['123456']);
});

test.run();
