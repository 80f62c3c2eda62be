// A server that drips a reply a byte at a time, each byte well inside the silence the socket
// timeout allows: only a deadline ends it, for the MX transport and the smarthost alike. The
// session's setup (to EHLO done) has one as a whole, the envelope (MAIL FROM to DATA) another;
// either way the message was not sent and is deferred. (The reply to the dot's deadline, where
// the message's fate is unknown: mail-stray-replies.int.) Real sockets: a raw SMTP server, the
// test's DNS server.
import net from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import { SmtpTransport } from '../infra/mail/smtp-transport.ts';
import type { MailTransport, OutgoingMessage, TransportOutcome } from '../infra/ports/mail-transport.ts';
import { startDnsServer } from './support/dns-server.ts';

const test = suite('SMTP reply deadlines');

const CONNECT_MS = 200;
const COMMAND_MS = 300;

interface DrippingServer { port: number; firstClosed: Promise<number>; close(): void }

/** Greets at once, answers every command at once until `dripped`, whose reply comes one byte every 30 ms for as long as the client listens. */
async function drippingServer(dripped: 'EHLO' | 'MAIL'): Promise<DrippingServer> {
  let closed!: (drips: number) => void;
  const firstClosed = new Promise<number>((resolve) => (closed = resolve));
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.write('220 drip.test ESMTP\r\n');
    let drips = 0;
    let drip: NodeJS.Timeout | undefined;
    socket.on('data', (chunk) => {
      if (drip) return;
      const verb = chunk.toString('latin1').slice(0, 4).toUpperCase();
      if (verb !== dripped) {
        socket.write(verb === 'EHLO' ? '250-drip.test\r\n250 PIPELINING\r\n' : '250 ok\r\n');
        return;
      }
      socket.write('250');
      drip = setInterval(() => {
        drips++;
        if (socket.writable) socket.write('x');
      }, 30);
    });
    socket.once('close', () => {
      clearInterval(drip);
      closed(drips);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    firstClosed,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

const message: OutgoingMessage = {
  emailId: 'em_drip', envelope: { mailFrom: 'b@bounce.example.test', recipients: ['ann@drip.test'] }, raw: Buffer.from('Subject: x\r\n\r\nhi\r\n'), messageId: 'drip@example.test',
};

/** The outcome, or null when there is none 5 s in (the dripping would go on for ever). */
async function outcomeWithin5s(transport: MailTransport, server: DrippingServer): Promise<TransportOutcome | null> {
  const sent = await Promise.race([transport.send(message), new Promise<null>((resolve) => setTimeout(() => resolve(null), 5_000))]);
  if (!sent) server.close(); // ends the dripping connection: the transport can then close
  return sent;
}

async function assertCutOff(sent: TransportOutcome | null, server: DrippingServer, expected: string): Promise<void> {
  assert.ok(sent, `no outcome 5 s into a reply dripped with ${COMMAND_MS} ms of silence allowed`);
  const [outcome] = sent.recipients;
  assert.is(outcome.result, 'deferred', 'nothing was sent: a temporary failure');
  assert.match(outcome.response, expected);
  // The client left while the server was still dripping: many drips, every one inside the silence allowed.
  const drips = await server.firstClosed;
  assert.ok(drips >= 3, `${drips} drips before the client closed`);
}

async function withMx(server: DrippingServer, run: (transport: MailTransport) => Promise<void>): Promise<void> {
  const dns = await startDnsServer([
    { name: 'drip.test', type: 'MX', data: { preference: 10, exchange: 'mx.drip.test' } },
    { name: 'mx.drip.test', type: 'A', data: '127.0.0.1' },
  ]);
  const transport = new MxTransport({
    dnsServers: [dns.address], heloName: 'relay.example.test', port: server.port, maxConnectionsPerHost: 1,
    connectTimeoutMs: CONNECT_MS, commandTimeoutMs: COMMAND_MS, dnsTimeoutMs: 1000, allowAddresses: new Set(['127.0.0.1']),
  });
  try {
    await run(transport);
  } finally {
    server.close();
    await transport.close().catch(() => {});
    await dns.close();
  }
}

async function withSmarthost(server: DrippingServer, run: (transport: MailTransport) => Promise<void>): Promise<void> {
  const transport = new SmtpTransport({ url: `smtp://127.0.0.1:${server.port}?tls=none`, maxConnections: 1, connectTimeoutMs: CONNECT_MS, commandTimeoutMs: COMMAND_MS });
  try {
    await run(transport);
  } finally {
    server.close();
    await transport.close().catch(() => {});
  }
}

test('MX: an EHLO reply dripped a byte at a time is cut off at the setup deadline (the connect timeout), and the message deferred', async () => {
  const server = await drippingServer('EHLO');
  await withMx(server, async (transport) => assertCutOff(await outcomeWithin5s(transport, server), server, `setup (greeting, EHLO, STARTTLS, AUTH) not complete within ${CONNECT_MS} ms`));
});

test('smarthost: an EHLO reply dripped a byte at a time is cut off at the setup deadline (connect and command timeouts), and the message deferred', async () => {
  const server = await drippingServer('EHLO');
  await withSmarthost(server, async (transport) => assertCutOff(await outcomeWithin5s(transport, server), server, `not complete within ${CONNECT_MS + COMMAND_MS} ms`));
});

for (const [name, withTransport] of [['MX', withMx], ['smarthost', withSmarthost]] as const) {
  test(`${name}: a MAIL FROM reply dripped a byte at a time is cut off at the command timeout, and the message deferred`, async () => {
    const server = await drippingServer('MAIL');
    await withTransport(server, async (transport) => assertCutOff(await outcomeWithin5s(transport, server), server, `no complete reply to the envelope (MAIL FROM, RCPT TO, DATA) within ${COMMAND_MS} ms`));
  });
}

test.run();
