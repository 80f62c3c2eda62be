// RFC 5321 5.1: the client tries each MX host in preference order until a delivery attempt
// succeeds. A preferred host that sets a session up and then fails the transaction before any
// of the body went out (drops the connection or says 421 at MAIL FROM, a 4xx to MAIL FROM, to
// every RCPT TO or to DATA) took nothing of the message: the next host gets it in the same call, under
// the one transaction start the caller marked. Once the body began to go out the outcome
// stands (deferred, or unknown after the dot), as a second host could make a duplicate; a
// deadline run out stands too (the begun transaction's grace is sized for one). When every host
// fails, the deferral says what each answered and carries the reply's codes to the site's
// backoff, as a 421 at MAIL FROM of a domain's only host does.
//
// Real sockets: the test's DNS server; the preferred MX host (127.0.0.2) a raw SMTP server
// scripted per test, the backup (127.0.0.1) the real smtp-server sink on the same port, and
// 127.0.0.3 on that port refusing connections.
import net from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { observedBySites, SiteRegistry } from '../apps/services/delivery/sites.ts';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MxTransport, type MxTransportOptions } from '../infra/mail/mx-transport.ts';
import type { MailTransport, OutgoingMessage, SendOptions } from '../infra/ports/mail-transport.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { smtpError, startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

/** How the preferred host answers a command: a reply (a 421 closes the connection after it), `drop` (closes without one) or `silent` (never answers). */
type Answer = string | 'drop' | 'silent';

interface Script {
  mail?: Answer;
  rcpt?: Answer;
  /** Default 354: the body follows. */
  data?: Answer;
  /** `drop`: the connection is closed as the first bytes of the body arrive. */
  body?: 'drop';
  /** The reply to the end of data. */
  dot?: Answer;
}

interface Primary {
  script: Script;
  connections: number;
  /** Body bytes received, over every connection. */
  bodyBytes: number;
  /** Messages it answered 250 to the end of data. */
  queued: number;
  close(): void;
}

/** The preferred MX host: a plain ESMTP server on 127.0.0.2 that answers as `primary.script` says. */
async function startPrimary(port: number): Promise<Primary> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    primary.connections++;
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    socket.write('220 mx1.backup.test ESMTP\r\n');
    const answer = (reply: Answer) => {
      if (reply === 'drop') socket.destroy();
      else if (reply.startsWith('421')) socket.end(`${reply}\r\n`);
      else if (reply !== 'silent') socket.write(`${reply}\r\n`);
    };
    let buffer = '';
    let inData = false;
    socket.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('latin1');
      while (!socket.destroyed && !socket.writableEnded) {
        if (inData) {
          if (buffer === '') return;
          const end = buffer.indexOf('\r\n.\r\n');
          primary.bodyBytes += end < 0 ? buffer.length : end + 2;
          if (primary.script.body === 'drop') {
            socket.destroy();
            return;
          }
          if (end < 0) {
            // Kept: the end of data may straddle two chunks.
            buffer = buffer.slice(-4);
            primary.bodyBytes -= buffer.length;
            return;
          }
          buffer = buffer.slice(end + 5);
          inData = false;
          const reply = primary.script.dot ?? '250 2.0.0 Ok: queued as P1';
          if (reply.startsWith('250')) primary.queued++;
          answer(reply);
          continue;
        }
        const end = buffer.indexOf('\r\n');
        if (end < 0) return;
        const verb = buffer.slice(0, 4).toUpperCase();
        buffer = buffer.slice(end + 2);
        if (verb === 'EHLO') socket.write('250-mx1.backup.test\r\n250 8BITMIME\r\n');
        else if (verb === 'MAIL') answer(primary.script.mail ?? '250 2.1.0 Ok');
        else if (verb === 'RCPT') answer(primary.script.rcpt ?? '250 2.1.5 Ok');
        else if (verb === 'DATA') {
          const reply = primary.script.data ?? '354 End data with <CR><LF>.<CR><LF>';
          inData = reply.startsWith('354');
          answer(reply);
        } else if (verb === 'QUIT') socket.end('221 2.0.0 Bye\r\n');
        else socket.write('250 2.0.0 Ok\r\n');
      }
    });
  });
  const primary: Primary = {
    script: {}, connections: 0, bodyBytes: 0, queued: 0,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.2', resolve);
  });
  return primary;
}

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
];

const SHUTTING_DOWN = '421 4.3.2 mx1.backup.test Service shutting down, closing transmission channel';

interface Context {
  dnsServer: TestDnsServer;
  sink: SmtpSink;
  primary: Primary;
  dns: DnsCache;
  transport: MxTransport;
}

const test = suite<Context>('mx: a transaction the preferred host failed before the body goes to the next MX host');

test.before(async (ctx) => {
  // `later-` recipients are greylisted by the backup.
  ctx.sink = await startSmtpSink({ onRcptTo: (address) => (address.address.startsWith('later-') ? smtpError(451, '4.7.1 Greylisted, try again') : undefined) });
  ctx.primary = await startPrimary(ctx.sink.port);
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

/** Sends, counting the caller's transaction starts. */
async function send(transport: MailTransport, recipients: string[], raw?: Buffer) {
  let begins = 0;
  const options: SendOptions = {
    beginTransaction: async () => {
      begins++;
      return true;
    },
  };
  const outcome = await transport.send(message(recipients, raw), options);
  return { outcome, begins };
}

const moves: Array<[string, Script]> = [
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

const stays: Array<[string, Script, Buffer | undefined, string]> = [
  ['the connection is closed as the body arrives', { body: 'drop' }, LARGE_BODY, 'deferred'],
  ['the connection is closed after the end of data, without a reply', { dot: 'drop' }, undefined, 'unknown'],
  ['the end of data is answered 451', { dot: '451 4.3.0 Try again later' }, undefined, 'deferred'],
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
  assert.equal([r.result, r.smtpCode, r.enhancedCode, r.stage], ['deferred', 421, '4.3.2', 'connection'], r.response);
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

test('control: a domain\'s only MX host says 421 at MAIL FROM: deferred with its reply as before, the site backs off', async (ctx) => {
  ctx.primary.script = { mail: SHUTTING_DOWN };
  const sites = new SiteRegistry({ dns: ctx.dns, rules: [] });
  const { outcome } = await send(observedBySites(ctx.transport, sites), ['ann@single.test']);
  const [r] = outcome.recipients;
  assert.equal([r.result, r.smtpCode, r.enhancedCode, r.stage, r.response], ['deferred', 421, '4.3.2', 'mail_from', SHUTTING_DOWN]);
  assert.is(sites.snapshot().find((s) => s.site === sites.keyOf('single.test'))?.throttles, 1);
});

test.run();
