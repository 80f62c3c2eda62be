// A subject of only spaces (1 to 998 characters, no CR or LF: interface.md) and a custom header
// value of only spaces are accepted and reported by GET /v1/emails/:id, so the message carries
// them: nodemailer leaves out a field whose value trims to nothing, so the composer writes such
// text as an RFC 2047 encoded word, which reads back as the spaces given. POST /v1/emails →
// outbox .eml, DKIM checked by mailauth, read by python3's email package.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, dkimResults, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';

interface Context { t: TestApp; tenant: DeliveryTenant; dns: TestDnsServer }
const test = suite<Context>('header text of only spaces');

test.before(async (ctx) => {
  ctx.t = await startTestApp({}, { processors: true });
  ctx.tenant = await deliveryTenant(ctx.t);
  ctx.dns = await startDnsServer(ctx.tenant.zone);
});
test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.dns.close();
});

test('subject "   " and X-Flag "  ": accepted, and the message carries both fields', async (ctx) => {
  const id = await send(ctx.t, ctx.tenant.key, { from: `a@${ctx.tenant.domain}`, to: 'ann@example.org', subject: '   ', text: 'Hi', headers: { 'X-Flag': '  ' } });
  const detail = await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent', 'is sent', 10_000);
  assert.is(detail.subject, '   ', 'the API reports the subject as given');
  const raw = readFileSync(join(ctx.t.config.dataDir, 'outbox', `${id}.eml`));
  const [verdict] = await dkimResults(ctx.dns, raw);
  assert.is(verdict.status.result, 'pass', verdict.info);
  const fields = JSON.parse(execFileSync('python3', ['-c', [
    'import email, json, sys',
    'from email import policy',
    'm = email.message_from_bytes(sys.stdin.buffer.read(), policy=policy.default)',
    'print(json.dumps({k.lower(): str(v) for k, v in m.items()}))',
  ].join('\n')], { input: raw }).toString()) as Record<string, string>;
  const names = Object.keys(fields).join(', ');
  assert.ok('subject' in fields, `no Subject field in the message: ${names}`);
  assert.ok('x-flag' in fields, `no X-Flag field in the message: ${names}`);
  assert.is(fields.subject, '   ', 'the Subject reads as the spaces given');
  assert.is(fields['x-flag'], '  ', 'X-Flag reads as the spaces given');
});

test('In-Reply-To and References of only spaces are left out: a message id list cannot be empty, and nodemailer would write "<>"', async (ctx) => {
  const id = await send(ctx.t, ctx.tenant.key, { from: `a@${ctx.tenant.domain}`, to: 'ann@example.org', subject: 'Re', text: 'Hi', headers: { 'In-Reply-To': '  ', References: ' ' } });
  await waitForDetail(ctx.t, ctx.tenant.key, id, (d) => d.status === 'sent', 'is sent', 10_000);
  const raw = readFileSync(join(ctx.t.config.dataDir, 'outbox', `${id}.eml`)).toString('latin1');
  const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
  assert.not.match(head, /^(In-Reply-To|References):/im, head);
  assert.match(head, /^Subject: Re$/m, 'the rest of the header is there');
});

test.run();
