// A pooled connection is checked with RSET before it carries the next message, and the reply to
// that RSET has the command timeout as a deadline however it trickles in, like the setup, the
// envelope and the reply to the dot (docs/delivery.md): a server that drips its RSET reply a byte
// at a time, each byte well inside the socket timeout's silence, loses the connection at the
// deadline, and the next message goes on (on a new connection) rather than waiting for as long as
// the server likes. The connection given up on is logged, naming the host and why. Real sockets: a
// raw SMTP server that takes the first message whole and drips its reply to RSET; the test's DNS
// server for MX.
import net from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import { SmtpTransport } from '../infra/mail/smtp-transport.ts';
import type { SessionLog } from '../infra/mail/pooled-sessions.ts';
import type { MailTransport, OutgoingMessage, TransportOutcome } from '../infra/ports/mail-transport.ts';
import { startDnsServer } from './support/dns-server.ts';

const test = suite('SMTP: RSET reply deadline');

const CONNECT_MS = 200;
const COMMAND_MS = 300;

interface RsetDripServer { port: number; rsetSeen: Promise<void>; drips(): number; close(): void }

/** Answers at once until RSET, whose reply comes one byte every 30 ms for as long as the client listens. */
async function rsetDripServer(): Promise<RsetDripServer> {
  let seen!: () => void;
  const rsetSeen = new Promise<void>((resolve) => (seen = resolve));
  const sockets = new Set<net.Socket>();
  let drips = 0;
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    socket.write('220 drip.test ESMTP\r\n');
    let inData = false;
    let buffered = '';
    let drip: NodeJS.Timeout | undefined;
    socket.on('data', (chunk) => {
      if (drip) return;
      buffered += chunk.toString('latin1');
      for (;;) {
        if (inData) {
          const end = buffered.indexOf('\r\n.\r\n');
          if (end < 0) return;
          buffered = buffered.slice(end + 5);
          inData = false;
          socket.write('250 2.0.0 queued as Q1\r\n');
          continue;
        }
        const eol = buffered.indexOf('\r\n');
        if (eol < 0) return;
        const line = buffered.slice(0, eol);
        buffered = buffered.slice(eol + 2);
        const verb = line.slice(0, 4).toUpperCase();
        if (verb === 'EHLO') socket.write('250-drip.test\r\n250 PIPELINING\r\n');
        else if (verb === 'DATA') {
          inData = true;
          socket.write('354 go ahead\r\n');
        } else if (verb === 'RSET') {
          seen();
          socket.write('250');
          drip = setInterval(() => {
            drips++;
            if (socket.writable) socket.write('x');
          }, 30);
          socket.once('close', () => clearInterval(drip));
          return;
        } else if (verb === 'QUIT') socket.end('221 bye\r\n');
        else socket.write('250 ok\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    rsetSeen,
    drips: () => drips,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

const message = (id: string): OutgoingMessage => ({
  emailId: id, envelope: { mailFrom: 'b@bounce.example.test', recipients: ['ann@drip.test'] }, raw: Buffer.from('Subject: x\r\n\r\nhi\r\n'), messageId: `${id}@example.test`,
});

interface Warning { fields: Record<string, unknown>; message: string }

/** A log that keeps what the transport warns of. */
function capturingLog(): SessionLog & { warnings: Warning[] } {
  const warnings: Warning[] = [];
  return { warnings, warn: (fields, message) => warnings.push({ fields, message }) };
}

/** The second message's outcome, or null when there is none 5 s in. */
async function secondOutcome(transport: MailTransport, server: RsetDripServer, idleMs = 0): Promise<TransportOutcome | null> {
  const first = await transport.send(message('em_first'));
  assert.ok(['delivered', 'accepted'].includes(first.recipients[0]?.result), 'the first message was taken whole');
  await new Promise((resolve) => setTimeout(resolve, idleMs));
  const second = transport.send(message('em_second'));
  await server.rsetSeen; // positive marker: the reused connection is being checked with RSET
  const sent = await Promise.race([second, new Promise<null>((resolve) => setTimeout(() => resolve(null), 5_000))]);
  return sent;
}

test('MX: a reused connection whose RSET reply is dripped is cut off at a deadline, and the next message goes on (or is deferred)', async () => {
  const server = await rsetDripServer();
  const dns = await startDnsServer([
    { name: 'drip.test', type: 'MX', data: { preference: 10, exchange: 'mx.drip.test' } },
    { name: 'mx.drip.test', type: 'A', data: '127.0.0.1' },
  ]);
  const log = capturingLog();
  const transport = new MxTransport({
    dnsServers: [dns.address], heloName: 'relay.example.test', port: server.port, maxConnectionsPerHost: 1,
    connectTimeoutMs: CONNECT_MS, commandTimeoutMs: COMMAND_MS, dnsTimeoutMs: 1000, allowAddresses: new Set(['127.0.0.1']), log,
  });
  try {
    const sent = await secondOutcome(transport, server);
    assert.ok(sent, `no outcome for the next message 5 s into an RSET reply dripped (${server.drips()} bytes so far) with ${COMMAND_MS} ms of silence allowed`);
    assert.is(log.warnings.length, 1, 'the connection given up on is logged once');
    assert.equal(log.warnings[0].fields, { host: 'mx.drip.test', address: '127.0.0.1', reason: `no complete reply to RSET within ${COMMAND_MS} ms` });
    assert.is(log.warnings[0].message, 'mx: a pooled connection to mx.drip.test [127.0.0.1] failed RSET and was closed');
  } finally {
    server.close();
    await Promise.race([transport.close().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 2_000))]);
    await dns.close();
  }
});

test('smarthost: a connection idle past its check (1 s) whose RSET reply is dripped is cut off at a deadline', async () => {
  const server = await rsetDripServer();
  // The socket timeout also closes an idle connection: it must outlast the 1 s after which an idle one is checked.
  const commandMs = 1_500;
  const log = capturingLog();
  const transport = new SmtpTransport({ url: `smtp://127.0.0.1:${server.port}?tls=none`, maxConnections: 1, connectTimeoutMs: CONNECT_MS, commandTimeoutMs: commandMs, log });
  try {
    const sent = await secondOutcome(transport, server, 1_100);
    assert.ok(sent, `no outcome for the next message 5 s into an RSET reply dripped (${server.drips()} bytes so far) with ${commandMs} ms of silence allowed`);
    assert.is(log.warnings.length, 1, 'the connection given up on is logged once');
    assert.equal(log.warnings[0].fields, { host: '127.0.0.1', reason: `no complete reply to RSET within ${commandMs} ms` });
    assert.is(log.warnings[0].message, 'smtp: a pooled connection to 127.0.0.1 failed RSET and was closed');
  } finally {
    server.close();
    await Promise.race([transport.close().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 2_000))]);
  }
});

test.run();
