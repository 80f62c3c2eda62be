// RFC 5321 5.1: the client tries each MX host in preference order until a delivery attempt
// succeeds. A preferred host that sets a session up and then fails the transaction before any
// of the body went out (drops the connection or says 421 at MAIL FROM, a 4xx to MAIL FROM, to
// every RCPT TO or to DATA) took nothing of the message: the next host gets it in the same call, under
// the one transaction start the caller marked. Once the body began to go out the outcome
// stands (deferred, or unknown after the dot), as a second host could make a duplicate; a
// deadline run out stands too, and no host is moved on to once what is left of the caller's
// grace after the mark would not cover a whole transaction there. When no later host runs a
// transaction, the last one's recipients keep their own replies, each saying what every host
// answered; the site judges the answering host's reply alone.
//
// Real sockets: the test's DNS server; the preferred MX host (127.0.0.2) a raw SMTP server
// scripted per test, the backup (127.0.0.1) the real smtp-server sink on the same port, and
// 127.0.0.3 on that port refusing connections.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { observedBySites, SiteRegistry } from '../apps/services/delivery/sites.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MxTransport, type MxTransportOptions } from '../infra/mail/mx-transport.ts';
import type { MailTransport, OutgoingMessage, SendOptions } from '../infra/ports/mail-transport.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { startScriptedSmtp, type ScriptedSmtp, type SmtpScript } from './support/scripted-smtp.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

const SLOW_ADDRESSES = ['127.0.0.11', '127.0.0.12', '127.0.0.13', '127.0.0.14', '127.0.0.15'];

const ZONE: ZoneRecord[] = [
  { name: 'backup.test', type: 'MX', data: { preference: 10, exchange: 'mx1.backup.test' } },
  { name: 'backup.test', type: 'MX', data: { preference: 20, exchange: 'mx2.backup.test' } },
  { name: 'mx1.backup.test', type: 'A', data: '127.0.0.2' },
  { name: 'mx2.backup.test', type: 'A', data: '127.0.0.1' },
  // The backup refuses connections.
  { name: 'gone.test', type: 'MX', data: { preference: 10, exchange: 'mx1.backup.test' } },
  { name: 'gone.test', type: 'MX', data: { preference: 20, exchange: 'mx2.gone.test' } },
  { name: 'mx2.gone.test', type: 'A', data: '127.0.0.3' },
  // No backup at all.
  { name: 'single.test', type: 'MX', data: { preference: 10, exchange: 'mx1.backup.test' } },
  // The sink first, then a host refusing connections.
  { name: 'mixed.test', type: 'MX', data: { preference: 10, exchange: 'mx2.backup.test' } },
  { name: 'mixed.test', type: 'MX', data: { preference: 20, exchange: 'mx2.gone.test' } },
  // Five slow hosts (the grace test's own servers).
  ...SLOW_ADDRESSES.flatMap((address, i): ZoneRecord[] => [
    { name: 'slow.test', type: 'MX', data: { preference: 10 * (i + 1), exchange: `mx${i + 1}.slow.test` } },
    { name: `mx${i + 1}.slow.test`, type: 'A', data: address },
  ]),
];

const SHUTTING_DOWN = '421 4.3.2 mx1.backup.test Service shutting down, closing transmission channel';

interface Context {
  dnsServer: TestDnsServer;
  sink: SmtpSink;
  primary: ScriptedSmtp;
  dns: DnsCache;
  transport: MxTransport;
}

const test = suite<Context>('mx: a transaction the preferred host failed before the body goes to the next MX host');

test.before(async (ctx) => {
  // The backup defers `later-` recipients (greylisting), `full-` ones (a full mailbox) and `busy-`
  // ones (the sender's rate).
  const deferrals: Record<string, [number, string]> = {
    later: [451, '4.7.1 Greylisted, try again'],
    full: [452, '4.2.2 Mailbox full'],
    busy: [450, '4.7.1 Too many messages from your IP, slow down'],
  };
  ctx.sink = await startSmtpSink({
    onRcptTo: (address) => {
      const deferral = deferrals[address.address.split('-')[0]];
      return deferral ? smtpError(...deferral) : undefined;
    },
  });
  ctx.primary = await startScriptedSmtp({}, { host: '127.0.0.2', port: ctx.sink.port, name: 'mx1.backup.test' });
  ctx.dnsServer = await startDnsServer(ZONE);
});

const transportOptions = (ctx: Context): MxTransportOptions => ({
  dnsServers: [], dns: ctx.dns, heloName: 'relay.example.test', port: ctx.sink.port, connectTimeoutMs: 3000, commandTimeoutMs: 3000,
  allowAddresses: new Set(['127.0.0.1', '127.0.0.2', '127.0.0.3']),
});

test.before.each((ctx) => {
  ctx.primary.script = {};
  ctx.primary.connections = 0;
  ctx.primary.bodyBytes = 0;
  ctx.primary.queued = 0;
  ctx.dns = new DnsCache(new StubResolver({ servers: [ctx.dnsServer.address], timeoutMs: 1000, tries: 1 }));
  ctx.transport = new MxTransport(transportOptions(ctx));
});

test.after.each(async (ctx) => {
  await ctx.transport.close();
});

test.after(async (ctx) => {
  ctx.primary.close();
  await ctx.sink.close();
  await ctx.dnsServer.close();
});

const message = (recipients: string[], raw: Buffer = Buffer.from('Subject: x\r\n\r\nhi\r\n')): OutgoingMessage => ({
  emailId: 'em_backup', envelope: { mailFrom: 'b@bounce.example.test', recipients }, raw, messageId: 'backup@example.test',
});

/**
 * Sends as the sender does, counting the caller's transaction starts and timing the call from
 * the first. The grace covers a few transactions at this file's deadlines.
 */
async function send(transport: MailTransport, recipients: string[], raw?: Buffer, transactionGraceMs = 60_000) {
  let begins = 0;
  let begunAt = 0;
  const options: SendOptions = {
    beginTransaction: async () => {
      begins++;
      begunAt = performance.now();
      return true;
    },
    transactionGraceMs,
  };
  const outcome = await transport.send(message(recipients, raw), options);
  return { outcome, begins, sinceBegunMs: performance.now() - begunAt };
}

const moves: Array<[string, SmtpScript]> = [
  ['drops the connection at MAIL FROM', { mail: 'drop' }],
  ['answers 421 to MAIL FROM and closes', { mail: SHUTTING_DOWN }],
  ['answers 451 to MAIL FROM', { mail: '451 4.3.0 Temporary local problem' }],
  ['answers 4xx to every RCPT TO', { rcpt: '450 4.2.1 Mailbox busy' }],
  ['answers 4xx to DATA', { data: '451 4.3.0 Try again later' }],
];

for (const [what, script] of moves) {
  test(`the preferred host ${what}: the backup gets the message in the same call, under one transaction start`, async (ctx) => {
    ctx.primary.script = script;
    const before = ctx.sink.messages.length;
    const { outcome, begins } = await send(ctx.transport, ['ann@backup.test', 'bob@backup.test']);
    assert.equal(outcome.recipients.map((r) => [r.address, r.result]), [['ann@backup.test', 'delivered'], ['bob@backup.test', 'delivered']], outcome.recipients[0].response);
    assert.is(ctx.sink.messages.length - before, 1, 'one transaction at the backup');
    assert.equal(ctx.sink.messages.at(-1)!.rcptTo.map((r) => r.address), ['ann@backup.test', 'bob@backup.test']);
    assert.is(ctx.primary.connections, 1, 'the preferred host was tried first');
    assert.is(ctx.primary.bodyBytes, 0);
    assert.is(begins, 1);
  });
}

test('a pooled connection to the preferred host that dies before the reply to MAIL FROM: the backup gets the message', async (ctx) => {
  const first = await send(ctx.transport, ['ann@backup.test']);
  assert.is(first.outcome.recipients[0].result, 'delivered');
  assert.is(ctx.primary.queued, 1, 'the preferred host took the first message');
  ctx.primary.script = { mail: 'drop' };
  const before = ctx.sink.messages.length;
  const { outcome, begins } = await send(ctx.transport, ['bob@backup.test']);
  assert.is(outcome.recipients[0].result, 'delivered', outcome.recipients[0].response);
  assert.is(ctx.sink.messages.length - before, 1);
  assert.is(ctx.primary.connections, 1, 'the second transaction went out on the pooled connection');
  assert.is(begins, 1);
});

// Larger than the loopback's socket buffers can hold, so the connection is closed before the
// dot can have gone out.
const LARGE_BODY = Buffer.concat([Buffer.from('Subject: big\r\n\r\n'), Buffer.alloc(48 * 1024 * 1024, 'abcdefghijklmnopqrstuvwxyz0123456789\r\n')]);

const stays: Array<[string, SmtpScript, Buffer | undefined, string]> = [
  ['the connection is closed as the body arrives', { body: 'drop' }, LARGE_BODY, 'deferred'],
  ['the connection is closed after the end of data, without a reply', { endOfData: 'drop' }, undefined, 'unknown'],
  ['the end of data is answered 451', { endOfData: '451 4.3.0 Try again later' }, undefined, 'deferred'],
];

for (const [what, script, raw, result] of stays) {
  test(`once the body began to go out the outcome stands: ${what} (${result}), the backup is not tried`, async (ctx) => {
    ctx.primary.script = script;
    const before = ctx.sink.connections;
    const { outcome } = await send(ctx.transport, ['ann@backup.test'], raw);
    assert.is(outcome.recipients[0].result, result, outcome.recipients[0].response);
    assert.ok(ctx.primary.bodyBytes > 0, 'the preferred host received body bytes');
    assert.is(ctx.sink.connections - before, 0, 'no connection to the backup');
  });
}

test('a deadline run out before the reply to MAIL FROM: deferred, the backup is not tried', async (ctx) => {
  await ctx.transport.close();
  ctx.transport = new MxTransport({ ...transportOptions(ctx), commandTimeoutMs: 300 });
  ctx.primary.script = { mail: 'silent' };
  const before = ctx.sink.connections;
  const { outcome } = await send(ctx.transport, ['ann@backup.test']);
  assert.is(outcome.recipients[0].result, 'deferred');
  assert.match(outcome.recipients[0].response, /within 300 ms|timeout/i);
  assert.is(ctx.sink.connections - before, 0, 'no connection to the backup');
});

test('the preferred host says 421 at MAIL FROM and the backup refuses connections: deferred with the 421\'s codes, naming both, the site backs off', async (ctx) => {
  ctx.primary.script = { mail: SHUTTING_DOWN };
  const sites = new SiteRegistry({ dns: ctx.dns, rules: [] });
  const { outcome, begins } = await send(observedBySites(ctx.transport, sites), ['ann@gone.test']);
  const [r] = outcome.recipients;
  assert.equal([r.result, r.smtpCode, r.enhancedCode, r.stage], ['deferred', 421, '4.3.2', 'mail_from'], r.response);
  assert.match(r.response, /^mx1\.backup\.test \[127\.0\.0\.2\]: 421 4\.3\.2 .*Service shutting down.*; mx2\.gone\.test \[127\.0\.0\.3\]: .*ECONNREFUSED/);
  assert.is(begins, 1);
  const site = sites.snapshot().find((s) => s.site === sites.keyOf('gone.test'));
  assert.is(site?.throttles, 1);
  assert.ok(site!.pausedUntil !== null, 'the site is paused');
});

test('both hosts defer in their transactions: the last host\'s codes, each host\'s reply in the response', async (ctx) => {
  ctx.primary.script = { mail: SHUTTING_DOWN };
  const { outcome } = await send(ctx.transport, ['later-ann@backup.test']);
  const [r] = outcome.recipients;
  assert.equal([r.result, r.smtpCode, r.enhancedCode, r.stage], ['deferred', 451, '4.7.1', 'rcpt_to'], r.response);
  assert.match(r.response, /^mx1\.backup\.test \[127\.0\.0\.2\]: 421 4\.3\.2 .*; mx2\.backup\.test \[127\.0\.0\.1\]: 451 4\.7\.1 Greylisted/);
});

test('the first host defers each recipient at RCPT TO and the next refuses connections: each keeps its own reply, codes and stage', async (ctx) => {
  const { outcome } = await send(ctx.transport, ['full-ann@mixed.test', 'later-bob@mixed.test']);
  assert.equal(outcome.recipients.map((r) => [r.address, r.result, r.smtpCode, r.enhancedCode, r.stage]), [
    ['full-ann@mixed.test', 'deferred', 452, '4.2.2', 'rcpt_to'],
    ['later-bob@mixed.test', 'deferred', 451, '4.7.1', 'rcpt_to'],
  ]);
  const [ann, bob] = outcome.recipients;
  assert.match(ann.response, /^mx2\.backup\.test \[127\.0\.0\.1\]: 452 4\.2\.2 Mailbox full.*; mx2\.gone\.test \[127\.0\.0\.3\]: .*ECONNREFUSED/s);
  assert.match(bob.response, /^mx2\.backup\.test \[127\.0\.0\.1\]: 451 4\.7\.1 Greylisted.*; mx2\.gone\.test \[127\.0\.0\.3\]: .*ECONNREFUSED/s);
  assert.not.match(ann.response, /bob/);
});

test('the preferred host greylists, the backup says "slow down": the site is throttled by the backup\'s own reply', async (ctx) => {
  ctx.primary.script = { rcpt: '451 4.7.1 Greylisting in action, please come back in 00:05:00' };
  const sites = new SiteRegistry({ dns: ctx.dns, rules: [] });
  const { outcome } = await send(observedBySites(ctx.transport, sites), ['busy-ann@backup.test']);
  const [r] = outcome.recipients;
  assert.equal([r.result, r.smtpCode, r.enhancedCode, r.stage], ['deferred', 450, '4.7.1', 'rcpt_to'], r.response);
  assert.match(r.response, /^mx1\.backup\.test \[127\.0\.0\.2\]: 451 4\.7\.1 Greylisting.*; mx2\.backup\.test \[127\.0\.0\.1\]: 450 4\.7\.1 Too many messages/);
  const site = sites.snapshot().find((s) => s.site === sites.keyOf('backup.test'));
  assert.is(site?.throttles, 1);
  assert.match(site!.recent[0], /^450 4\.7\.1 Too many messages/);
});

test('hosts that answer slowly, each inside its deadlines: no transaction starts at another host past what the grace after the one start covers', async (ctx) => {
  // A transaction at these deadlines takes up to 1.5 + 1.5 + 1.5 s; the grace covers one and a
  // little. The first host fails at once, so the second fits; the second takes 1.2 s, after
  // which none would. Without that bound the fifth host, the one that takes the message, had it
  // about 6 s after the start: past the grace, when the recipient is taken for unknown.
  const graceMs = 5000;
  const slowly = { delays: { data: 1200, endOfData: 1200 } };
  const scripts: SmtpScript[] = [
    { data: '451 4.3.0 Try again later' },
    ...Array.from({ length: 3 }, () => ({ ...slowly, data: '451 4.3.0 Try again later' })),
    slowly,
  ];
  const hosts = await Promise.all(SLOW_ADDRESSES.map((host, i) => startScriptedSmtp(scripts[i], { host, port: ctx.sink.port, name: `mx${i + 1}.slow.test` })));
  await ctx.transport.close();
  ctx.transport = new MxTransport({ ...transportOptions(ctx), commandTimeoutMs: 1500, allowAddresses: new Set(SLOW_ADDRESSES) });
  try {
    const { outcome, begins, sinceBegunMs } = await send(ctx.transport, ['ann@slow.test'], undefined, graceMs);
    const [r] = outcome.recipients;
    assert.equal([r.result, r.smtpCode, r.stage], ['deferred', 451, 'data'], r.response);
    assert.match(r.response, /^mx1\.slow\.test \[127\.0\.0\.11\]: 451 .*; mx2\.slow\.test \[127\.0\.0\.12\]: 451 .*; 3 more MX hosts of slow\.test not tried: /);
    assert.equal(hosts.map((h) => h.connections), [1, 1, 0, 0, 0]);
    assert.is(hosts[4].queued, 0);
    assert.is(begins, 1);
    assert.ok(sinceBegunMs < graceMs, `the call ended ${Math.round(sinceBegunMs)} ms after the start`);
  } finally {
    for (const host of hosts) host.close();
  }
});

test('control: a domain\'s only MX host says 421 at MAIL FROM: deferred with its reply as before, the site backs off', async (ctx) => {
  ctx.primary.script = { mail: SHUTTING_DOWN };
  const sites = new SiteRegistry({ dns: ctx.dns, rules: [] });
  const { outcome } = await send(observedBySites(ctx.transport, sites), ['ann@single.test']);
  const [r] = outcome.recipients;
  assert.equal([r.result, r.smtpCode, r.enhancedCode, r.stage, r.response], ['deferred', 421, '4.3.2', 'mail_from', SHUTTING_DOWN]);
  assert.is(sites.snapshot().find((s) => s.site === sites.keyOf('single.test'))?.throttles, 1);
});

test.run();
