// The mx transport (Relay as the MTA) against the real test DNS server and a real smtp-server,
// all on 127.0.0.1: every MX host name resolves to 127.0.0.1 (allowed as RELAY_MX_ALLOW would)
// and the transport's port points at the test's server, whose answers depend on the recipient's
// domain.
import { Resolver } from 'node:dns/promises';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { MxTransportOptions } from '../infra/mail/mx-transport.ts';
import type { OutgoingMessage, TransportOutcome } from '../infra/ports/mail-transport.ts';
import { startDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import type { TestDnsServer, ZoneRecord } from './support/dns-server.ts';
import { makeTestCert, smtpError, startSmtpSink } from './support/smtp-sink.ts';
import type { SmtpSink, SmtpSinkOptions, TestCert } from './support/smtp-sink.ts';

interface Context {
  cert: TestCert;
  dns: TestDnsServer;
  sink?: SmtpSink;
  transport?: MxTransport;
}

const mxOf = (domain: string, host: string, preference = 10): ZoneRecord => ({ name: domain, type: 'MX', data: { preference, exchange: host } });
const loopback = (name: string): ZoneRecord => ({ name, type: 'A', data: '127.0.0.1' });

const ZONE: ZoneRecord[] = [
  mxOf('ok.test', 'mx.ok.test'), loopback('mx.ok.test'),
  mxOf('bad.test', 'mx.bad.test'), loopback('mx.bad.test'),
  mxOf('later.test', 'mx.later.test'), loopback('mx.later.test'),
  mxOf('nullmx.test', '.', 0),
  loopback('implicit.test'),
  { name: 'broken.test', type: 'SERVFAIL' },
  // The preferred MX host has no address: the next one takes the mail.
  mxOf('backup.test', 'gone.backup.test', 5), mxOf('backup.test', 'mx.ok.test', 20),
  { name: 'gone.backup.test', type: 'TXT', data: 'no address here' },
  // A host name the test certificate does not cover.
  mxOf('tlsfail.test', 'mx.tlsfail.test'), loopback('mx.tlsfail.test'),
  // A second domain served by ok.test's MX host.
  mxOf('alias.test', 'mx.ok.test'),
  // MX hosts outside the public ranges other than the allowed test server. Only loopback
  // addresses here, so that even a transport that wrongly connected sends nothing off the machine.
  mxOf('private.test', 'mx.private.test'), { name: 'mx.private.test', type: 'A', data: '127.0.0.3' }, { name: 'mx.private.test', type: 'AAAA', data: '::ffff:127.0.0.3' },
  mxOf('loop.test', 'mx.loop.test'), { name: 'mx.loop.test', type: 'A', data: '127.0.0.2' },
  { name: 'implicitloop.test', type: 'A', data: '127.0.0.2' },
  // The preferred host is refused, the backup is the allowed test server.
  mxOf('mixed.test', 'mx.private.test', 5), mxOf('mixed.test', 'mx.ok.test', 20),
  // A host with a refused and an allowed address: only the allowed one is used.
  // (The refused one comes last: a failed attempt at it would be the error reported.)
  mxOf('half.test', 'mx.half.test'), loopback('mx.half.test'), { name: 'mx.half.test', type: 'A', data: '127.0.0.4' },
  // Records with TTLs, as real zones have.
  { ...mxOf('ttl.test', 'mx.ttl.test'), ttl: 3600 }, { ...loopback('mx.ttl.test'), ttl: 300 },
];

const RAW = Buffer.from('DKIM-Signature: v=1; d=example.test\r\nFrom: a@example.test\r\nSubject: mx\r\n\r\nHello\r\n..two dots\r\n.\r\nbye\r\n');

function message(recipients: string[], overrides: Partial<OutgoingMessage> = {}): OutgoingMessage {
  return { emailId: 'em_mx1', envelope: { mailFrom: 'b+em_mx1@bounce.example.test', recipients }, raw: RAW, messageId: 'mx1@example.test', ...overrides };
}

/** The server answers by recipient domain (every MX connects to it) and by local part. */
const byDomain: SmtpSinkOptions = {
  onRcptTo: (address) => {
    if (address.address.endsWith('@bad.test') || address.address.startsWith('nobody@')) return smtpError(550, '5.1.1 No such user');
    if (address.address.endsWith('@later.test')) return smtpError(451, '4.7.1 Greylisted, try again');
  },
};

async function setup(ctx: Context, sinkOptions: SmtpSinkOptions = byDomain, options: Partial<MxTransportOptions> = {}): Promise<MxTransport> {
  ctx.sink = await startSmtpSink({ cert: ctx.cert, ...sinkOptions });
  ctx.transport = new MxTransport({
    dnsServers: [ctx.dns.address],
    heloName: 'relay.example.test',
    port: ctx.sink.port,
    tls: { ca: ctx.cert.cert },
    connectTimeoutMs: 3000,
    commandTimeoutMs: 3000,
    dnsTimeoutMs: 1000,
    allowAddresses: new Set(['127.0.0.1']),
    ...options,
  });
  return ctx.transport;
}

const results = (outcome: TransportOutcome) => outcome.recipients.map((r) => [r.address, r.result, r.smtpCode, r.enhancedCode, r.stage]);

const mx = suite<Context>('mx transport');

mx.before(async (ctx) => {
  ctx.cert = makeTestCert(['mx.ok.test', 'mx.bad.test', 'mx.later.test', 'implicit.test']);
  ctx.dns = await startDnsServer(ZONE);
});

mx.after.each(async (ctx) => {
  await ctx.transport?.close();
  await ctx.sink?.close();
  ctx.transport = undefined;
  ctx.sink = undefined;
});

mx.after(async (ctx) => {
  await ctx.dns.close();
});

mx('the test DNS server serves AAAA and null MX records', async (ctx) => {
  ctx.dns.setZone([...ZONE, { name: 'v6.test', type: 'AAAA', data: '2001:db8::25' }]);
  try {
    const resolver = new Resolver({ timeout: 1000, tries: 1 });
    resolver.setServers([ctx.dns.address]);
    assert.equal(await resolver.resolve6('v6.test'), ['2001:db8::25']);
    assert.equal((await resolver.resolveMx('nullmx.test')).map(({ exchange, priority }) => ({ exchange, priority })), [{ exchange: '', priority: 0 }]);
  } finally {
    ctx.dns.setZone(ZONE);
  }
});

mx('one call, three domains: 250 delivered, 550 rejected, 451 deferred; one transaction per domain over STARTTLS', async (ctx) => {
  const transport = await setup(ctx);
  const outcome = await transport.send(message(['ann@ok.test', 'bob@bad.test', 'cy@later.test', 'dee@ok.test']));
  assert.equal(results(outcome), [
    ['ann@ok.test', 'delivered', 250, null, undefined],
    ['bob@bad.test', 'rejected', 550, '5.1.1', 'rcpt_to'],
    ['cy@later.test', 'deferred', 451, '4.7.1', 'rcpt_to'],
    ['dee@ok.test', 'delivered', 250, null, undefined],
  ]);
  assert.is(outcome.providerMessageId, 'mx1@example.test');
  const [received] = ctx.sink!.messages;
  assert.is(ctx.sink!.messages.length, 1);
  assert.ok(received.raw.equals(RAW), 'bytes arrive exactly');
  assert.equal(received.rcptTo.map((r) => r.address), ['ann@ok.test', 'dee@ok.test']);
  assert.is(received.mailFrom && received.mailFrom.address, 'b+em_mx1@bounce.example.test');
  assert.is(received.heloName, 'relay.example.test');
  assert.ok(received.secure, 'STARTTLS offered, so used');
  assert.is(received.servername, 'mx.ok.test');
  assert.is(ctx.sink!.connections, 3);
});

mx('null MX: rejected with 5.1.10 at stage dns, without a connection', async (ctx) => {
  const transport = await setup(ctx);
  const outcome = await transport.send(message(['ann@nullmx.test', 'bob@nullmx.test']));
  assert.equal(results(outcome), [
    ['ann@nullmx.test', 'rejected', null, '5.1.10', 'dns'],
    ['bob@nullmx.test', 'rejected', null, '5.1.10', 'dns'],
  ]);
  assert.is(outcome.providerMessageId, null);
  assert.is(ctx.sink!.connections, 0);
});

mx('no MX but an A record: delivered to the domain itself (implicit MX)', async (ctx) => {
  const transport = await setup(ctx);
  const outcome = await transport.send(message(['ann@implicit.test']));
  assert.equal(results(outcome), [['ann@implicit.test', 'delivered', 250, null, undefined]]);
  assert.is(ctx.sink!.messages[0].servername, 'implicit.test');
});

mx('NXDOMAIN rejected with 5.1.2, SERVFAIL deferred, both at stage dns without a connection', async (ctx) => {
  const transport = await setup(ctx);
  const outcome = await transport.send(message(['ann@missing.test', 'bob@broken.test']));
  assert.equal(results(outcome), [
    ['ann@missing.test', 'rejected', null, '5.1.2', 'dns'],
    ['bob@broken.test', 'deferred', null, '4.4.3', 'dns'],
  ]);
  assert.is(ctx.sink!.connections, 0);
});

mx('an MX host without an address is passed over for the next preference', async (ctx) => {
  const transport = await setup(ctx);
  const outcome = await transport.send(message(['ann@backup.test']));
  assert.equal(results(outcome), [['ann@backup.test', 'delivered', 250, null, undefined]]);
  assert.is(ctx.sink!.messages[0].servername, 'mx.ok.test');
});

mx('two calls to domains on the same MX host reuse one connection', async (ctx) => {
  const transport = await setup(ctx);
  const first = await transport.send(message(['ann@ok.test']));
  const second = await transport.send(message(['bob@alias.test'], { emailId: 'em_mx2', messageId: 'mx2@example.test' }));
  assert.equal([first, second].map((o) => o.recipients[0].result), ['delivered', 'delivered']);
  assert.is(ctx.sink!.messages.length, 2);
  assert.is(ctx.sink!.connections, 1);
  assert.is(ctx.sink!.messages[0].sessionId, ctx.sink!.messages[1].sessionId);
});

mx('an idle connection is closed after idleTimeoutMs; the next call opens a new one', async (ctx) => {
  const transport = await setup(ctx, byDomain, { idleTimeoutMs: 100 });
  await transport.send(message(['ann@ok.test']));
  await waitUntil(() => ctx.sink!.closed === 1, 'the idle connection is closed', 5_000);
  await transport.send(message(['bob@ok.test']));
  assert.is(ctx.sink!.messages.length, 2);
  assert.is(ctx.sink!.connections, 2);
});

mx('a pooled connection the server dropped is replaced, the message unharmed', async (ctx) => {
  const transport = await setup(ctx);
  await transport.send(message(['ann@ok.test']));
  ctx.sink!.dropConnections();
  const outcome = await transport.send(message(['bob@ok.test']));
  assert.equal(results(outcome), [['bob@ok.test', 'delivered', 250, null, undefined]]);
  assert.is(ctx.sink!.connections, 2);
});

mx('DNS answers are cached by TTL: ten messages to one domain cost one MX, one A and one AAAA query', async (ctx) => {
  const transport = await setup(ctx);
  ctx.dns.negativeTtl = 60; // so that the empty AAAA answer carries an SOA and is cached too
  try {
    const before = ctx.dns.queries.length;
    for (let n = 0; n < 10; n++) {
      const outcome = await transport.send(message([`r${n}@ttl.test`], { emailId: `em_t${n}` }));
      assert.is(outcome.recipients[0].result, 'delivered');
    }
    assert.equal(ctx.dns.queries.slice(before).map((q) => `${q.type} ${q.name}`).sort(), ['A mx.ttl.test', 'AAAA mx.ttl.test', 'MX ttl.test']);
  } finally {
    ctx.dns.negativeTtl = null;
  }
});

mx('concurrent calls to one MX host open at most maxConnectionsPerHost connections', async (ctx) => {
  const transport = await setup(ctx, byDomain, { maxConnectionsPerHost: 2 });
  const outcomes = await Promise.all([1, 2, 3, 4, 5].map((n) => transport.send(message([`r${n}@ok.test`], { emailId: `em_c${n}` }))));
  assert.equal(outcomes.map((o) => o.recipients[0].result), Array(5).fill('delivered'));
  assert.is(ctx.sink!.connections, 2);
});

mx('a failed STARTTLS handshake falls back to plain text on a new connection, noted in the response', async (ctx) => {
  const transport = await setup(ctx, byDomain, { tls: { ca: ctx.cert.cert, rejectUnauthorized: true } });
  const outcome = await transport.send(message(['ann@tlsfail.test']));
  assert.equal(results(outcome), [['ann@tlsfail.test', 'delivered', 250, null, undefined]]);
  assert.match(outcome.recipients[0].response, /sent without TLS: STARTTLS failed/);
  assert.is(ctx.sink!.messages[0].secure, false);
  assert.is(ctx.sink!.connections, 2);
});

mx('at DATA: 5xx rejects the recipients RCPT accepted, those RCPT refused keep their own outcome; 4xx defers', async (ctx) => {
  const transport = await setup(ctx, {
    ...byDomain,
    onData: (_raw, session) => ({ error: session.envelope.rcptTo.some((r) => r.address.startsWith('ann')) ? smtpError(554, '5.7.1 Spam') : smtpError(452, '4.3.1 Out of storage') }),
  });
  const permanent = await transport.send(message(['ann@ok.test', 'nobody@ok.test']));
  assert.equal(results(permanent), [
    ['ann@ok.test', 'rejected', 554, '5.7.1', 'data'],
    ['nobody@ok.test', 'rejected', 550, '5.1.1', 'rcpt_to'],
  ]);
  const temporary = await transport.send(message(['bob@ok.test']));
  assert.equal(results(temporary), [['bob@ok.test', 'deferred', 452, '4.3.1', 'data']]);
  assert.is(temporary.providerMessageId, null);
});

mx('connection lost after the end of data, before the reply: unknown', async (ctx) => {
  const transport = await setup(ctx, { ...byDomain, onData: () => 'drop' });
  const outcome = await transport.send(message(['ann@ok.test', 'nobody@ok.test']));
  assert.equal(results(outcome), [
    ['ann@ok.test', 'unknown', null, null, undefined],
    ['nobody@ok.test', 'rejected', 550, '5.1.1', 'rcpt_to'],
  ]);
});

mx('an MX that resolves only to loopback or private addresses: rejected with 5.4.4 naming them, without a connection', async (ctx) => {
  const transport = await setup(ctx);
  const outcome = await transport.send(message(['ann@private.test', 'bob@loop.test', 'cy@implicitloop.test']));
  assert.equal(results(outcome), [
    ['ann@private.test', 'rejected', null, '5.4.4', 'dns'],
    ['bob@loop.test', 'rejected', null, '5.4.4', 'dns'],
    ['cy@implicitloop.test', 'rejected', null, '5.4.4', 'dns'],
  ]);
  assert.match(outcome.recipients[0].response, /no MX host of private\.test has a public address: mx\.private\.test resolves only to addresses Relay does not deliver to: 127\.0\.0\.3 \(loopback\), ::ffff:(127\.0\.0\.3|7f00:3) \(ipv4-mapped\)/);
  assert.match(outcome.recipients[1].response, /127\.0\.0\.2 \(loopback\)/);
  assert.is(outcome.providerMessageId, null);
  assert.is(ctx.sink!.connections, 0);
});

mx('without an allow list the loopback test server itself is refused', async (ctx) => {
  const transport = await setup(ctx, byDomain, { allowAddresses: undefined });
  const outcome = await transport.send(message(['ann@ok.test']));
  assert.equal(results(outcome), [['ann@ok.test', 'rejected', null, '5.4.4', 'dns']]);
  assert.match(outcome.recipients[0].response, /mx\.ok\.test resolves only to addresses Relay does not deliver to: 127\.0\.0\.1 \(loopback\)/);
  assert.is(ctx.sink!.connections, 0);
});

mx('a refused MX host is passed over for the next preference; of a host\'s addresses only the permitted ones are used', async (ctx) => {
  const transport = await setup(ctx);
  const outcome = await transport.send(message(['ann@mixed.test', 'bob@half.test']));
  assert.equal(results(outcome), [
    ['ann@mixed.test', 'delivered', 250, null, undefined],
    ['bob@half.test', 'delivered', 250, null, undefined],
  ]);
  assert.is(ctx.sink!.connections, 2);
});

mx('a connection refused at every MX host: deferred at stage connection', async (ctx) => {
  const transport = await setup(ctx);
  const port = ctx.sink!.port;
  await ctx.sink!.close();
  ctx.sink = undefined;
  await transport.close();
  ctx.transport = new MxTransport({ dnsServers: [ctx.dns.address], heloName: 'relay.example.test', port, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses: new Set(['127.0.0.1']) });
  const outcome = await ctx.transport.send(message(['ann@ok.test']));
  assert.equal(outcome.recipients.map((r) => [r.result, r.stage]), [['deferred', 'connection']]);
  assert.match(outcome.recipients[0].response, /ECONNREFUSED|connect/i);
  // The last address tried is named: of mx.half.test's two, the private one (answered last) was never tried.
  const half = await ctx.transport.send(message(['bob@half.test']));
  assert.equal(half.recipients.map((r) => [r.result, r.stage]), [['deferred', 'connection']]);
  assert.match(half.recipients[0].response, /^mx\.half\.test \[127\.0\.0\.1\]: /);
  assert.not.match(half.recipients[0].response, /127\.0\.0\.4/);
});

mx.run();
