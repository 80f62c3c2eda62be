// Interoperability with a real Postfix (Debian's package), through Relay's real delivery path:
// POST /v1/emails → sender → the mx transport (MX lookups answered by a DNS server this test
// starts, every MX host on 127.0.0.1, RELAY_MX_PORT at Postfix's smtpd) or the smtp transport
// (RELAY_SMTP_URL at Postfix's submission listener, STARTTLS required), and back through Relay's
// feedback server for the bounces Postfix itself writes. Postfix runs as a private instance
// (test/support/postfix.ts) playing, on one configuration:
//   - the recipients' MX (listener `mx`): virtual(8) maildirs for pf.test, secure.test (MTA-STS
//     enforce) and dane.test (DANE-EE), a local(8) domain local.pf.test whose recipient table
//     knows a user the system does not (local delivery bounces it), an access map that defers one
//     recipient and refuses another, smtpd_recipient_limit = 2, message_size_limit below one
//     email's size, bare newlines forbidden (Postfix 3.9's default), and no header rewriting (as
//     a remote MX would not, for a client that is not local to it);
//   - Relay's smarthost (listener `submission`), relaying sink.test to a smtp-server sink and the
//     bounces it writes to Relay's feedback server (bounce.<domain>, the VERP return path).
// Without /usr/sbin/postfix it reports itself skipped (.ci/run installs Debian's package).
import { createHash, X509Certificate } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import PostalMime from 'postal-mime';
import type { InboundServer } from '../apps/inbound/inbound-server.ts';
import { parseVerpAddress, VERP_MAC_PURPOSE } from '../domain/delivery/verp.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, dkimResults, send, waitForDetail, type DeliveryTenant } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort } from './support/free-port.ts';
import { makeTestCa, trustTestCa, type TestCa } from './support/https-receiver.ts';
import { startTestInbound } from './support/inbound.ts';
import { call, workspaceOwner, type Caller } from './support/management.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';
import { postfixMissing, startPostfix, type PostfixInstance } from './support/postfix.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Side {
  t: TestApp;
  tenant: DeliveryTenant;
  inbound: InboundServer;
  owner: Caller;
}

interface Context {
  ca: TestCa;
  dns: TestDnsServer;
  policies: PolicyServer;
  sink: SmtpSink;
  postfix: PostfixInstance;
  /** Relay delivering as the MTA, to Postfix as every recipient domain's MX. */
  mx: Side;
  /** Relay delivering through Postfix as its smarthost. */
  smarthost: Side;
  /** The SPKI digest of the certificate Postfix presents (DANE-EE). */
  spki: Buffer;
}

const MX_HOST = 'mx.pf.test';
const SIZE_LIMIT = 200_000;
const MAILBOXES = [
  'ann@pf.test', 'r1@pf.test', 'r2@pf.test', 'r3@pf.test', 'r4@pf.test', 'r5@pf.test', 'kept@pf.test', 'big@pf.test',
  'deferred@pf.test', 'refused@pf.test', 'tls@pf.test', 'ann@secure.test', 'ann@dane.test', 'smart@pf.test', 'ann@verify.test',
];

const test = skippableSuite<Context>('Relay and a real Postfix', postfixMissing());

const mx = (domain: string, exchange: string): ZoneRecord => ({ name: domain, type: 'MX', data: { preference: 10, exchange } });
const loopback = (name: string): ZoneRecord => ({ name, type: 'A', data: '127.0.0.1' });

/** A leaf for these names (and 127.0.0.1, the smarthost's address), signed by the test CA. */
function issueWithAddress(ca: TestCa, names: string[]): { key: string; cert: string } {
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: ca.dir, stdio: 'ignore' });
  writeFileSync(join(ca.dir, 'postfix.cnf'), `subjectAltName=${[...names.map((n) => `DNS:${n}`), 'IP:127.0.0.1'].join(',')}\n`);
  run(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${names[0]}`, '-keyout', 'postfix.key', '-out', 'postfix.csr']);
  run(['x509', '-req', '-in', 'postfix.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-out', 'postfix.pem', '-extfile', 'postfix.cnf']);
  return { key: readFileSync(join(ca.dir, 'postfix.key'), 'utf8'), cert: readFileSync(join(ca.dir, 'postfix.pem'), 'utf8') };
}

async function side(env: Record<string, string>, domain: string, ownerEmail: string): Promise<Side> {
  const t = await startTestApp({ RELAY_DELIVERY_RETRY_SCALE: '0.001', ...env }, { processors: true });
  const tenant = await deliveryTenant(t, domain);
  const inbound = await startTestInbound(t);
  const owner = await workspaceOwner(t, tenant.workspaceId, ownerEmail);
  return { t, tenant, inbound, owner };
}

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  // The smarthost's certificate is checked against this process's trusted CAs (RELAY_SMTP_URL
  // requires STARTTLS), and so are MX hosts under MTA-STS and the policy host.
  trustTestCa(ctx.ca);
  const leaf = issueWithAddress(ctx.ca, [MX_HOST, 'mx.secure.test', 'mx.dane.test']);
  ctx.spki = createHash('sha256').update(new X509Certificate(leaf.cert).publicKey.export({ type: 'spki', format: 'der' })).digest();
  ctx.policies = await startPolicyServer(ctx.ca.issue(['mta-sts.secure.test']));
  ctx.policies.policies.set('secure.test', policyText('enforce', ['mx.secure.test']));
  ctx.dns = await startDnsServer([]);
  ctx.sink = await startSmtpSink({
    onRcptTo: (address) => (address.address === 'gone@sink.test' ? smtpError(550, '5.1.1 <gone@sink.test>: Recipient address rejected: User unknown') : undefined),
  });
  // Relay must know Postfix's ports before Postfix starts, and Postfix the feedback servers'.
  const ports = { mx: await freePort(), submission: await freePort() };
  ctx.mx = await side({
    RELAY_DELIVERY: 'mx',
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_DNSSEC_RESOLVER: ctx.dns.address,
    RELAY_MX_PORT: String(ports.mx),
    RELAY_MX_ALLOW: '127.0.0.1',
    RELAY_MTA_STS_PORT: String(ctx.policies.port),
  }, 'viamx.example.test', 'owner@viamx.example.test');
  ctx.smarthost = await side({
    RELAY_DELIVERY: 'smtp',
    RELAY_SMTP_URL: `smtp://127.0.0.1:${ports.submission}`,
  }, 'viasmarthost.example.test', 'owner@viasmarthost.example.test');
  ctx.dns.authenticated = (name) => name.toLowerCase().replace(/\.$/, '').endsWith('dane.test');
  ctx.dns.setZone([
    ...ctx.mx.tenant.zone, ...ctx.smarthost.tenant.zone,
    mx('pf.test', MX_HOST), mx('local.pf.test', MX_HOST), mx('verify.test', MX_HOST), loopback(MX_HOST),
    mx('secure.test', 'mx.secure.test'), loopback('mx.secure.test'),
    { name: '_mta-sts.secure.test', type: 'TXT', data: 'v=STSv1; id=20261129' }, loopback('mta-sts.secure.test'),
    mx('dane.test', 'mx.dane.test'), loopback('mx.dane.test'),
    { name: `_${ports.mx}._tcp.mx.dane.test`, type: 'TLSA', data: { usage: 3, selector: 1, matchingType: 1, certificate: ctx.spki } },
  ]);
  ctx.postfix = await startPostfix({
    hostname: MX_HOST,
    mailboxes: MAILBOXES,
    tls: leaf,
    ports,
    files: {
      access: 'deferred@pf.test DEFER\nrefused@pf.test REJECT\nverify.test verify_sender\n',
      // A forwarded address: its next hop refuses the target.
      'virtual-aliases': 'fwd@pf.test gone@sink.test\n',
      // local(8)'s domain: its recipient table knows ghost, the system has no such user.
      'local-recipients': 'ghost@local.pf.test ok\n',
      transport: [
        `sink.test smtp:[127.0.0.1]:${ctx.sink.port}`,
        `bounce.${ctx.mx.tenant.domain} smtp:[127.0.0.1]:${ctx.mx.inbound.port}`,
        `bounce.${ctx.smarthost.tenant.domain} smtp:[127.0.0.1]:${ctx.smarthost.inbound.port}`,
      ].join('\n') + '\n',
    },
    main: {
      mydestination: 'local.pf.test',
      local_recipient_maps: 'texthash:{dir}/local-recipients',
      transport_maps: 'texthash:{dir}/transport',
      relay_domains: 'sink.test',
      smtpd_recipient_limit: '2',
      message_size_limit: String(SIZE_LIMIT),
      smtpd_recipient_restrictions: 'check_recipient_access texthash:{dir}/access',
      // Mail to verify.test is taken only once Postfix has probed the sender (Relay's return path).
      smtpd_restriction_classes: 'verify_sender',
      verify_sender: 'reject_unverified_sender',
      virtual_alias_maps: 'texthash:{dir}/virtual-aliases',
    },
    listeners: {
      // Postfix 3.9's defaults against SMTP smuggling and unauthorized pipelining.
      mx: { local_header_rewrite_clients: '', smtpd_forbid_bare_newline: 'yes', smtpd_forbid_unauth_pipelining: 'yes' },
      submission: {},
    },
  });
});

test.after(async (ctx) => {
  for (const s of [ctx.mx, ctx.smarthost]) {
    await s?.inbound.stop();
    await s?.t.close();
  }
  await ctx.postfix?.stop();
  await ctx.sink?.close();
  await ctx.policies?.close();
  await ctx.dns?.close();
  ctx.ca?.remove();
});

const from = (s: Side) => `Relay Interop <hello@${s.tenant.domain}>`;
const headerBlock = (raw: Buffer) => raw.toString('latin1').split('\r\n\r\n')[0];
const headerValues = (raw: Buffer, name: string) =>
  headerBlock(raw).replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/).filter((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`)).map((l) => l.slice(name.length + 1).trim());
const suppressed = async (s: Side) => (await call(s.t, 'GET', `/v1/workspaces/${s.tenant.workspaceId}/suppressions`, { as: s.owner })).json().suppressions as Array<{ address: string; reason: string }>;

test('(1) Relay delivers to Postfix as the MX: the stored message is intact, and DKIM-Signature verifies (mailauth)', async (ctx) => {
  const { t, tenant } = ctx.mx;
  const id = await send(t, tenant.key, {
    from: from(ctx.mx), to: ['Ann <ann@pf.test>'], subject: 'Interop: grüße über Postfix', reply_to: `support@${tenant.domain}`,
    text: 'Hello Ann,\nthis went through a real Postfix.\n\n.\nA line with a dot alone above.\n',
    html: '<p>Hello <b>Ann</b>, this went through a real Postfix.</p>',
    headers: { 'X-Entity-Ref-ID': 'interop-1' },
  });
  const final = await waitForDetail(t, tenant.key, id, (d) => d.status === 'delivered', 'is delivered');
  await ctx.postfix.waitForLog(/to=<ann@pf\.test>.*status=sent \(delivered to maildir\)/, 'the delivery to ann@pf.test');
  const [stored] = ctx.postfix.mailbox('ann@pf.test');
  assert.ok(stored, 'a message in ann@pf.test\'s maildir');
  // The queue id in Postfix's 250 is the provider message id.
  const queueId = /: ([0-9A-F]+): to=<ann@pf\.test>.*status=sent/.exec(ctx.postfix.log())?.[1];
  assert.is(final.providerMessageId, queueId, 'the queue id Postfix named');
  assert.ok(headerValues(stored, 'Return-Path')[0].includes(`@bounce.${tenant.domain}`), 'the VERP return path');
  assert.equal(headerValues(stored, 'Message-ID'), [`<${id}@${tenant.domain}>`]);
  assert.is(headerValues(stored, 'DKIM-Signature').length, 1, 'one DKIM-Signature');
  assert.equal(headerValues(stored, 'X-Entity-Ref-ID'), ['interop-1']);
  const parsed = await PostalMime.parse(stored);
  assert.is(parsed.subject, 'Interop: grüße über Postfix');
  assert.is(parsed.from?.address, `hello@${tenant.domain}`);
  assert.equal(parsed.to?.map((a) => a.address), ['ann@pf.test']);
  // A line holding a dot alone went through SMTP's dot-stuffing both ways.
  assert.is(parsed.text?.replace(/\r\n/g, '\n').trimEnd(), 'Hello Ann,\nthis went through a real Postfix.\n\n.\nA line with a dot alone above.');
  assert.match(parsed.html ?? '', /Hello <b>Ann<\/b>/);
  const [verdict] = await dkimResults(ctx.dns, stored);
  assert.is(verdict.status.result, 'pass', verdict.info);
});

test('(2a) STARTTLS with Postfix\'s TLS on, no policy: opportunistic TLS is used (Postfix records the session as TLS)', async (ctx) => {
  const { t, tenant } = ctx.mx;
  const id = await send(t, tenant.key, { from: from(ctx.mx), to: 'tls@pf.test', subject: 'TLS', text: 'over TLS' });
  await waitForDetail(t, tenant.key, id, (d) => d.status === 'delivered', 'is delivered');
  await ctx.postfix.waitForLog(/to=<tls@pf\.test>.*status=sent/, 'the delivery to tls@pf.test');
  const [stored] = ctx.postfix.mailbox('tls@pf.test');
  const received = headerValues(stored, 'Received')[0];
  assert.match(received, /\(using TLSv1\.[23] with cipher/, received);
  assert.match(received, /with ESMTPS/, received);
});

test('(2b) MTA-STS enforce: delivered to Postfix over TLS with its CA-signed certificate', async (ctx) => {
  const { t, tenant } = ctx.mx;
  const id = await send(t, tenant.key, { from: from(ctx.mx), to: 'ann@secure.test', subject: 'MTA-STS', text: 'enforced' });
  await waitForDetail(t, tenant.key, id, (d) => d.status === 'delivered', 'is delivered');
  await ctx.postfix.waitForLog(/to=<ann@secure\.test>.*status=sent/, 'the delivery to ann@secure.test');
  const received = headerValues(ctx.postfix.mailbox('ann@secure.test')[0], 'Received')[0];
  assert.match(received, /with ESMTPS/, received);
  assert.ok((ctx.policies.fetches.get('secure.test') ?? 0) >= 1, 'the policy was fetched');
});

test('(2c) DANE-EE (TLSA 3 1 1 of Postfix\'s key, authenticated answers): delivered over TLS', async (ctx) => {
  const { t, tenant } = ctx.mx;
  const id = await send(t, tenant.key, { from: from(ctx.mx), to: 'ann@dane.test', subject: 'DANE', text: 'pinned' });
  await waitForDetail(t, tenant.key, id, (d) => d.status === 'delivered', 'is delivered');
  await ctx.postfix.waitForLog(/to=<ann@dane\.test>.*status=sent/, 'the delivery to ann@dane.test');
  assert.match(headerValues(ctx.postfix.mailbox('ann@dane.test')[0], 'Received')[0], /with ESMTPS/);
});

test('(3a) smtpd_recipient_limit = 2 and an email to 5 recipients: all five end delivered (RFC 5321 4.5.3.1.8)', async (ctx) => {
  const { t, tenant } = ctx.mx;
  const id = await send(t, tenant.key, {
    from: from(ctx.mx), to: ['r1@pf.test', 'r2@pf.test', 'r3@pf.test'], cc: 'r4@pf.test', bcc: 'r5@pf.test', subject: 'Five', text: 'to five',
  });
  const final = await waitForDetail(t, tenant.key, id, (d) => d.status === 'delivered', 'is delivered to all five', 60_000);
  // The BCC recipient is not listed (never exposed); its copy is in its maildir.
  assert.equal(final.recipients.map((r: any) => [r.address, r.status]), [
    ['r1@pf.test', 'delivered'], ['r2@pf.test', 'delivered'], ['r3@pf.test', 'delivered'], ['r4@pf.test', 'delivered'],
  ]);
  for (const n of [1, 2, 3, 4, 5]) {
    await ctx.postfix.waitForLog(new RegExp(`to=<r${n}@pf\\.test>.*status=sent`), `the delivery to r${n}@pf.test`);
    assert.is(ctx.postfix.mailbox(`r${n}@pf.test`).length, 1, `one copy for r${n}@pf.test`);
  }
});

test('(3b) message_size_limit below the email\'s size: bounced at once (552 / 5.3.4), not retried', async (ctx) => {
  const { t, tenant } = ctx.mx;
  const id = await send(t, tenant.key, { from: from(ctx.mx), to: 'big@pf.test', subject: 'Big', text: 'x'.repeat(70) + '\n'.repeat(1) + 'y '.repeat(SIZE_LIMIT) });
  const final = await waitForDetail(t, tenant.key, id, (d) => ['soft_bounced', 'hard_bounced', 'delivered', 'failed'].includes(d.status), 'has an outcome');
  assert.is(final.status, 'soft_bounced');
  assert.equal(final.events.map((e: any) => e.type), ['email.queued', 'email.processing', 'email.bounced'], 'no retry');
  const [r] = final.events.find((e: any) => e.type === 'email.bounced').payload.recipients;
  assert.is(r.enhancedCode, '5.3.4', r.response);
  assert.is(ctx.postfix.mailbox('big@pf.test').length, 0);
});

test('(3b) through the smarthost: Postfix\'s 552 at the end of data is final too', async (ctx) => {
  const { t, tenant } = ctx.smarthost;
  const id = await send(t, tenant.key, { from: from(ctx.smarthost), to: 'big@sink.test', subject: 'Big', text: 'y '.repeat(SIZE_LIMIT) });
  const final = await waitForDetail(t, tenant.key, id, (d) => !['queued', 'processing', 'delayed'].includes(d.status), 'has an outcome');
  assert.is(final.status, 'rejected', JSON.stringify(final.events.at(-1)));
  assert.equal(final.events.map((e: any) => e.type).filter((type: string) => type === 'email.delayed'), [], 'no retry');
});

test('(3c) an access map answering 4xx to one recipient and 5xx to another: each its own outcome in the timeline', async (ctx) => {
  const { t, tenant } = ctx.mx;
  const id = await send(t, tenant.key, { from: from(ctx.mx), to: ['kept@pf.test', 'deferred@pf.test', 'refused@pf.test'], subject: 'Access', text: 'access map' });
  // DEFER: 450 4.7.1, retried. REJECT: 554 5.7.1 "Recipient address rejected: Access denied",
  // which Relay reads as condemning the address (domain/feedback/classify.ts, recipient_access_denied).
  const final = await waitForDetail(t, tenant.key, id, (d) => {
    const by = new Map(d.recipients.map((r: any) => [r.address, r.status]));
    return by.get('kept@pf.test') === 'delivered' && by.get('refused@pf.test') === 'hard_bounced' && d.events.some((e: any) => e.type === 'email.delayed');
  }, 'shows each recipient\'s outcome');
  const delayed = final.events.filter((e: any) => e.type === 'email.delayed').flatMap((e: any) => e.payload.recipients);
  assert.ok(delayed.length > 0 && delayed.every((r: any) => r.address === 'deferred@pf.test'), JSON.stringify(delayed));
  assert.is(delayed[0].smtpCode, 450, delayed[0].response);
  const bounced = final.events.filter((e: any) => e.type === 'email.bounced').flatMap((e: any) => e.payload.recipients);
  assert.equal(bounced.map((r: any) => [r.address, r.smtpCode, r.enhancedCode]), [['refused@pf.test', 554, '5.7.1']]);
  assert.is(ctx.postfix.mailbox('kept@pf.test').length, 1);
});

test('(4) Postfix as the smarthost (STARTTLS required, certificate verified) relays to the next hop: intact, DKIM passes, the DSN request carried on', async (ctx) => {
  const { t, tenant } = ctx.smarthost;
  const id = await send(t, tenant.key, { from: from(ctx.smarthost), to: 'Ann <ann@sink.test>', subject: 'Via the smarthost', text: 'relayed by Postfix' });
  const sent = await waitForDetail(t, tenant.key, id, (d) => d.status === 'sent', 'is sent');
  const relayedLine = await ctx.postfix.waitForLog(/: [0-9A-F]+: to=<ann@sink\.test>.*status=sent/, 'the message relayed to the sink');
  assert.is(sent.providerMessageId, /: ([0-9A-F]+): to=/.exec(relayedLine)![1], 'the queue id Postfix named');
  await waitUntil(() => ctx.sink.messages.some((m) => m.rcptTo.some((r) => r.address === 'ann@sink.test')), 'the sink has the message');
  const relayed = ctx.sink.messages.find((m) => m.rcptTo.some((r) => r.address === 'ann@sink.test'))!;
  const mailFrom = relayed.mailFrom === false ? '' : relayed.mailFrom.address;
  assert.ok(mailFrom.endsWith(`@bounce.${tenant.domain}`), `the VERP return path kept: ${mailFrom}`);
  const verp = parseVerpAddress(mailFrom, (data, mac) => t.ctx.services.secrets.macVerify(VERP_MAC_PURPOSE, data, mac));
  assert.ok('emailId' in verp && verp.emailId === id, `a return path Relay verifies: ${JSON.stringify(verp)}`);
  assert.equal(relayed.dsn, { ret: 'HDRS', envid: id }, 'RET and ENVID carried on');
  const notify = Object.entries(relayed.rcptTo[0].args || {}).find(([k]) => k.toUpperCase() === 'NOTIFY')?.[1];
  assert.is(notify, 'SUCCESS,FAILURE,DELAY', 'NOTIFY carried on');
  const [verdict] = await dkimResults(ctx.dns, relayed.raw);
  assert.is(verdict.status.result, 'pass', verdict.info);
  const parsed = await PostalMime.parse(relayed.raw);
  assert.is(parsed.subject, 'Via the smarthost');
  assert.is(parsed.text?.replace(/\r\n/g, '\n').trim(), 'relayed by Postfix');
});

test('(5) a bounce Postfix writes (local delivery: unknown user) comes back to the VERP return path: hard bounce, address suppressed', async (ctx) => {
  const { t, tenant } = ctx.mx;
  const id = await send(t, tenant.key, { from: from(ctx.mx), to: 'ghost@local.pf.test', subject: 'To a ghost', text: 'nobody home' });
  await ctx.postfix.waitForLog(/to=<ghost@local\.pf\.test>.*status=bounced/, 'local delivery bouncing ghost');
  await ctx.postfix.waitForLog(new RegExp(`to=<rr-[^>]+@bounce\\.${tenant.domain.replace(/\./g, '\\.')}>.*status=sent`), 'the bounce delivered to Relay\'s feedback server');
  const final = await waitForDetail(t, tenant.key, id, (d) => d.status === 'hard_bounced', 'is hard_bounced');
  const bounced = final.events.filter((e: any) => e.type === 'email.bounced').flatMap((e: any) => e.payload.recipients);
  assert.equal(bounced.map((r: any) => [r.address, r.status]), [['ghost@local.pf.test', '5.1.1']], JSON.stringify(bounced));
  let listed: Array<{ address: string; reason: string }> = [];
  await waitUntil(async () => (listed = await suppressed(ctx.mx)).some((s) => s.address === 'ghost@local.pf.test'), 'ghost@local.pf.test is suppressed');
  assert.equal(listed.filter((s) => s.address === 'ghost@local.pf.test').map((s) => s.reason), ['hard_bounce']);
  const again = await send(t, tenant.key, { from: from(ctx.mx), to: 'ghost@local.pf.test', subject: 'Again', text: 'still nobody' });
  assert.is((await waitForDetail(t, tenant.key, again, (d) => d.status === 'suppressed', 'is suppressed')).status, 'suppressed');
});

test('(5) through the smarthost: the next hop refuses the recipient, Postfix\'s bounce comes back: hard bounce, address suppressed', async (ctx) => {
  const { t, tenant } = ctx.smarthost;
  const id = await send(t, tenant.key, { from: from(ctx.smarthost), to: 'gone@sink.test', subject: 'Gone', text: 'gone' });
  await ctx.postfix.waitForLog(/to=<gone@sink\.test>.*status=bounced/, 'Postfix bouncing gone@sink.test');
  const final = await waitForDetail(t, tenant.key, id, (d) => d.status === 'hard_bounced', 'is hard_bounced');
  const bounced = final.events.filter((e: any) => e.type === 'email.bounced').flatMap((e: any) => e.payload.recipients);
  assert.equal(bounced.map((r: any) => [r.address, r.status]), [['gone@sink.test', '5.1.1']], JSON.stringify(bounced));
  await waitUntil(async () => (await suppressed(ctx.smarthost)).some((s) => s.address === 'gone@sink.test' && s.reason === 'hard_bounce'), 'gone@sink.test is suppressed');
});

test('(4) through the smarthost to a mailbox Postfix delivers itself: sent, then delivered by Postfix\'s success DSN (NOTIFY=SUCCESS)', async (ctx) => {
  const { t, tenant } = ctx.smarthost;
  const id = await send(t, tenant.key, { from: from(ctx.smarthost), to: 'smart@pf.test', subject: 'Delivered by the smarthost', text: 'hi' });
  await ctx.postfix.waitForLog(/to=<smart@pf\.test>.*status=sent \(delivered to maildir\)/, 'the delivery to smart@pf.test');
  const final = await waitForDetail(t, tenant.key, id, (d) => d.status === 'delivered', 'is delivered');
  assert.equal(final.events.map((e: any) => e.type), ['email.queued', 'email.processing', 'email.sent', 'email.delivered']);
  assert.is(ctx.postfix.mailbox('smart@pf.test').length, 1);
});

test('(5) a forwarded address (virtual alias) whose target\'s server refuses it: Postfix\'s bounce names the target and the original recipient; the original is hard-bounced', async (ctx) => {
  const { t, tenant } = ctx.mx;
  const id = await send(t, tenant.key, { from: from(ctx.mx), to: 'fwd@pf.test', subject: 'Forwarded', text: 'forwarded' });
  const final = await waitForDetail(t, tenant.key, id, (d) => d.status === 'hard_bounced', 'is hard_bounced');
  const bounced = final.events.filter((e: any) => e.type === 'email.bounced').flatMap((e: any) => e.payload.recipients);
  assert.equal(bounced.map((r: any) => [r.address, r.status]), [['fwd@pf.test', '5.1.1']], JSON.stringify(bounced));
  await waitUntil(async () => (await suppressed(ctx.mx)).some((s) => s.address === 'fwd@pf.test' && s.reason === 'hard_bounce'), 'fwd@pf.test is suppressed');
});

test('(6) a Postfix MX that verifies senders (reject_unverified_sender) probes Relay\'s return path at Relay\'s feedback server: the probe passes, the mail is delivered', async (ctx) => {
  const { t, tenant } = ctx.mx;
  const id = await send(t, tenant.key, { from: from(ctx.mx), to: 'ann@verify.test', subject: 'Verified sender', text: 'hi' });
  const final = await waitForDetail(t, tenant.key, id, (d) => ['delivered', 'soft_bounced', 'hard_bounced'].includes(d.status), 'has an outcome', 30_000);
  assert.is(final.status, 'delivered', JSON.stringify(final.events.at(-1)));
  await ctx.postfix.waitForLog(/to=<ann@verify\.test>.*status=sent/, 'the delivery to ann@verify.test');
  assert.match(ctx.postfix.log(), new RegExp(`to=<rr-[^>]+@bounce\\.${tenant.domain.replace(/\./g, '\\.')}>.*status=deliverable`), 'Postfix\'s probe found the return path deliverable');
});

test.run();
