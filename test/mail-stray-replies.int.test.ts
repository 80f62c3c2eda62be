// Broken remote servers after the end of DATA: one that answers twice ("250 …\r\n250 …\r\n"),
// whose stray reply must not answer the next transaction's first command (a pooled connection
// handed over at once gave every later reply to the wrong command, and a message the server had
// queued was reported 354, deferred, and sent again); one out of step (354), which is `unknown`,
// never `deferred`; one that drips its reply a byte at a time, which commandTimeoutMs cuts off.
// Real sockets: a raw SMTP server, the test's DNS server.
import net from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import { SmtpTransport } from '../infra/mail/smtp-transport.ts';
import type { MailTransport, OutgoingMessage } from '../infra/ports/mail-transport.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';

const test = suite('stray SMTP replies');

interface RawServer { port: number; queued: string[]; close(): void }

/** An ESMTP server with PIPELINING that answers each end of data with `dotReply(n)` (n: messages queued so far, this one included). */
async function rawServer(dotReply: (n: number, socket: net.Socket) => string): Promise<RawServer> {
  const queued: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.write('220 raw.test ESMTP\r\n');
    let buffer = '';
    let inData = false;
    let rcpt = '';
    socket.on('data', (chunk) => {
      buffer += chunk.toString('latin1');
      for (;;) {
        if (inData) {
          const end = buffer.indexOf('\r\n.\r\n');
          if (end < 0) return;
          buffer = buffer.slice(end + 5);
          inData = false;
          queued.push(rcpt);
          socket.write(dotReply(queued.length, socket));
          continue;
        }
        const nl = buffer.indexOf('\r\n');
        if (nl < 0) return;
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 2);
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === 'EHLO') socket.write('250-raw.test\r\n250 PIPELINING\r\n');
        else if (verb === 'RCPT') {
          rcpt = /<([^>]*)>/.exec(line)?.[1] ?? '';
          socket.write('250 ok\r\n');
        } else if (verb === 'DATA') {
          socket.write('354 go\r\n');
          inData = true;
        } else if (verb === 'QUIT') socket.end('221 bye\r\n');
        else socket.write('250 ok\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    queued,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

const message = (to: string): OutgoingMessage => ({
  emailId: 'em_stray', envelope: { mailFrom: 'b@bounce.example.test', recipients: [to] }, raw: Buffer.from('Subject: x\r\n\r\nhi\r\n'), messageId: 'stray@example.test',
});

async function withMx(server: RawServer, run: (transport: MailTransport) => Promise<void>, commandTimeoutMs = 2000): Promise<void> {
  const dns: TestDnsServer = await startDnsServer([
    { name: 'raw.test', type: 'MX', data: { preference: 10, exchange: 'mx.raw.test' } },
    { name: 'mx.raw.test', type: 'A', data: '127.0.0.1' },
  ]);
  const transport = new MxTransport({
    dnsServers: [dns.address], heloName: 'relay.example.test', port: server.port, maxConnectionsPerHost: 1,
    connectTimeoutMs: 2000, commandTimeoutMs, dnsTimeoutMs: 1000, allowAddresses: new Set(['127.0.0.1']),
  });
  try {
    await run(transport);
  } finally {
    await transport.close().catch(() => {});
    await dns.close();
  }
}

const outcomesOf = async (transport: MailTransport, recipients: string[]) =>
  (await Promise.all(recipients.map((to) => transport.send(message(to))))).map((o) => [o.recipients[0].address, o.recipients[0].result]);

const twice = (n: number) => (n === 1 ? '250 queued as Q1\r\n250 queued as Q1\r\n' : `250 queued as Q${n}\r\n`);

test('MX: a second reply to the dot does not answer the waiting transaction on the same connection', async () => {
  const server = await rawServer(twice);
  try {
    await withMx(server, async (transport) => {
      assert.equal(await outcomesOf(transport, ['ann@raw.test', 'bob@raw.test']), [['ann@raw.test', 'delivered'], ['bob@raw.test', 'delivered']]);
    });
    assert.equal(server.queued, ['ann@raw.test', 'bob@raw.test'], 'each message queued once');
  } finally {
    server.close();
  }
});

test('smarthost: a second reply to the dot does not answer the waiting transaction on the same connection', async () => {
  const server = await rawServer(twice);
  const transport = new SmtpTransport({ url: `smtp://127.0.0.1:${server.port}?tls=none`, maxConnections: 1, connectTimeoutMs: 2000, commandTimeoutMs: 2000 });
  try {
    // A smarthost's 250 says it took the message on (accepted), not that it was delivered.
    assert.equal(await outcomesOf(transport, ['ann@raw.test', 'bob@raw.test']), [['ann@raw.test', 'accepted'], ['bob@raw.test', 'accepted']]);
    assert.equal(server.queued, ['ann@raw.test', 'bob@raw.test'], 'each message queued once');
  } finally {
    await transport.close().catch(() => {});
    server.close();
  }
});

test('a reply to the dot out of step with it (354) is unknown, not deferred: a retry could send the message twice', async () => {
  const server = await rawServer(() => '354 go\r\n');
  try {
    await withMx(server, async (transport) => {
      const [outcome] = (await transport.send(message('ann@raw.test'))).recipients;
      assert.is(outcome.result, 'unknown');
      assert.match(outcome.response, 'out of step');
    });
    assert.equal(server.queued, ['ann@raw.test']);
  } finally {
    server.close();
  }
});

test('MX: a reply to the dot dripped a byte at a time is cut off at commandTimeoutMs; the message\'s fate is unknown', async () => {
  const drips = new Set<NodeJS.Timeout>();
  const server = await rawServer((_n, socket) => {
    const drip = setInterval(() => socket.writable && socket.write('x'), 50);
    drips.add(drip);
    socket.once('close', () => clearInterval(drip));
    return '250 ';
  });
  try {
    await withMx(server, async (transport) => {
      // Each byte comes well inside the 300 ms of silence nodemailer allows: only a deadline ends it.
      const sent = await Promise.race([transport.send(message('ann@raw.test')), new Promise<null>((resolve) => setTimeout(() => resolve(null), 5_000))]);
      if (!sent) server.close(); // ends the dripping connection: the transport can then close
      assert.ok(sent, 'no outcome 5 s into a reply dripped with a 300 ms commandTimeoutMs');
      assert.is(sent.recipients[0].result, 'unknown');
      assert.match(sent.recipients[0].response, 'no complete reply to the end of data within 300 ms');
    }, 300);
  } finally {
    for (const drip of drips) clearInterval(drip);
    server.close();
  }
});

test.run();
