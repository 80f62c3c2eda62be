// A server that drips its EHLO reply a byte at a time, each byte well inside the silence the
// socket timeout allows: only a deadline on the session's setup as a whole ends it, for the MX
// transport and the smarthost alike. Real sockets: a raw SMTP server, the test's DNS server.
import net from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import { SmtpTransport } from '../infra/mail/smtp-transport.ts';
import type { MailTransport, OutgoingMessage, TransportOutcome } from '../infra/ports/mail-transport.ts';
import { startDnsServer } from './support/dns-server.ts';

const test = suite('SMTP session setup deadline');

const CONNECT_MS = 200;
const COMMAND_MS = 300;

interface DrippingServer { port: number; firstClosed: Promise<number>; close(): void }

/** Greets at once, then answers EHLO one byte every 30 ms for as long as the client listens. */
async function drippingServer(): Promise<DrippingServer> {
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
      if (drip || !/^EHLO/i.test(chunk.toString('latin1'))) return;
      socket.write('250-');
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

async function assertCutOff(sent: TransportOutcome | null, server: DrippingServer): Promise<void> {
  assert.ok(sent, `no outcome 5 s into an EHLO reply dripped with ${COMMAND_MS} ms of silence allowed`);
  const [outcome] = sent.recipients;
  assert.is(outcome.result, 'deferred', 'a setup that timed out is a temporary failure');
  assert.match(outcome.response, `not complete within ${CONNECT_MS + COMMAND_MS} ms`);
  // The client left while the server was still dripping: many drips, every one inside the silence allowed.
  const drips = await server.firstClosed;
  assert.ok(drips >= 3, `${drips} drips before the client closed`);
}

test('MX: an EHLO reply dripped a byte at a time is cut off at the setup deadline, and the message deferred', async () => {
  const server = await drippingServer();
  const dns = await startDnsServer([
    { name: 'drip.test', type: 'MX', data: { preference: 10, exchange: 'mx.drip.test' } },
    { name: 'mx.drip.test', type: 'A', data: '127.0.0.1' },
  ]);
  const transport = new MxTransport({
    dnsServers: [dns.address], heloName: 'relay.example.test', port: server.port, maxConnectionsPerHost: 1,
    connectTimeoutMs: CONNECT_MS, commandTimeoutMs: COMMAND_MS, dnsTimeoutMs: 1000, allowAddresses: new Set(['127.0.0.1']),
  });
  try {
    await assertCutOff(await outcomeWithin5s(transport, server), server);
  } finally {
    server.close();
    await transport.close().catch(() => {});
    await dns.close();
  }
});

test('smarthost: an EHLO reply dripped a byte at a time is cut off at the setup deadline, and the message deferred', async () => {
  const server = await drippingServer();
  const transport = new SmtpTransport({ url: `smtp://127.0.0.1:${server.port}?tls=none`, maxConnections: 1, connectTimeoutMs: CONNECT_MS, commandTimeoutMs: COMMAND_MS });
  try {
    await assertCutOff(await outcomeWithin5s(transport, server), server);
  } finally {
    server.close();
    await transport.close().catch(() => {});
  }
});

test.run();
