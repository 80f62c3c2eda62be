// A receiving server that reads the message body slowly, each read taking up a write within the
// socket timeout's silence: only the body's deadline, max(the command timeout, its size at the
// minimum rate), ends it, for the MX transport and the smarthost alike. The dot never went out,
// so the message is deferred (not unknown), the connection closed and its slot freed. A body read
// at a moderate rate, longer than the command timeout but within its deadline, goes through.
// Real sockets: a raw SMTP server that reads the body at a set pace, the test's DNS server.
import net from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import { SmtpTransport } from '../infra/mail/smtp-transport.ts';
import type { MailTransport, OutgoingMessage, TransportOutcome } from '../infra/ports/mail-transport.ts';
import { startDnsServer } from './support/dns-server.ts';
import { deferred } from './support/eventually.ts';

const test = suite('SMTP body transfer deadline');

const MiB = 1024 * 1024;
// Also the socket timeout: each write of the body (16 KiB) must be taken up within it, which the
// paces below do, however the kernel's buffers wake the writer.
const COMMAND_MS = 2_500;

/** How fast the server reads a body: `bytes` every `everyMs`. */
interface Pace { bytes: number; everyMs: number }

interface Connection { bodyBytes: number; closed: Promise<void> }
interface PacedServer { port: number; connections: Connection[]; queued: number[]; close(): void }

/**
 * An ESMTP server that answers every command at once and reads the body of a message on its
 * n-th connection at `paceOf(n)` (null: as fast as it comes); `queued` has each whole body's size.
 */
async function pacedServer(paceOf: (connection: number) => Pace | null): Promise<PacedServer> {
  const connections: Connection[] = [];
  const queued: number[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    const closed = deferred();
    socket.once('close', () => closed.resolve());
    const connection: Connection = { bodyBytes: 0, closed: closed.promise };
    const pace = paceOf(connections.push(connection) - 1);
    socket.write('220 paced.test ESMTP\r\n');
    let commands = '';
    let inData = false;
    let tail = '';
    let pull: NodeJS.Timeout | undefined;
    socket.once('close', () => clearInterval(pull));
    socket.on('data', (chunk: Buffer) => {
      if (inData) {
        connection.bodyBytes += chunk.length;
        const text = tail + chunk.toString('latin1');
        if (!text.includes('\r\n.\r\n')) {
          tail = text.slice(-4);
          return;
        }
        inData = false;
        clearInterval(pull);
        socket.resume();
        queued.push(connection.bodyBytes);
        socket.write('250 2.0.0 queued as Q1\r\n');
        return;
      }
      commands += chunk.toString('latin1');
      for (let nl = commands.indexOf('\r\n'); nl >= 0; nl = commands.indexOf('\r\n')) {
        const verb = commands.slice(0, 4).toUpperCase();
        commands = commands.slice(nl + 2);
        if (verb === 'EHLO') socket.write('250-paced.test\r\n250 PIPELINING\r\n');
        else if (verb === 'QUIT') socket.end('221 bye\r\n');
        else if (verb !== 'DATA') socket.write('250 ok\r\n');
        else {
          socket.write('354 go ahead\r\n');
          inData = true;
          tail = '\r\n';
          connection.bodyBytes = 0;
          if (pace) {
            // Paused, the socket gives what read() takes (and emits it as 'data'), nothing more.
            socket.pause();
            pull = setInterval(() => socket.read(pace.bytes) ?? socket.read(), pace.everyMs);
          }
        }
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections,
    queued,
    close: () => {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** A message of `size` bytes in 78-byte lines. */
function message(id: string, size: number): OutgoingMessage {
  const raw = Buffer.alloc(size, 'y');
  raw.write(`Subject: ${id}\r\n\r\n`);
  for (let at = 100; at + 2 <= size; at += 78) raw.write('\r\n', at);
  raw.write('\r\n', size - 2);
  return { emailId: id, envelope: { mailFrom: 'b@bounce.example.test', recipients: ['ann@paced.test'] }, raw, messageId: `${id}@example.test` };
}

/** The outcome, or null when there is none `ms` in. */
async function outcomeWithin(transport: MailTransport, sent: OutgoingMessage, ms: number): Promise<TransportOutcome | null> {
  let timer: NodeJS.Timeout | undefined;
  const none = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)));
  try {
    return await Promise.race([transport.send(sent), none]);
  } finally {
    clearTimeout(timer);
  }
}

type WithTransport = (server: PacedServer, minBodyBytesPerSecond: number, run: (transport: MailTransport) => Promise<void>) => Promise<void>;

const withMx: WithTransport = async (server, minBodyBytesPerSecond, run) => {
  const dns = await startDnsServer([
    { name: 'paced.test', type: 'MX', data: { preference: 10, exchange: 'mx.paced.test' } },
    { name: 'mx.paced.test', type: 'A', data: '127.0.0.1' },
  ]);
  const transport = new MxTransport({
    dnsServers: [dns.address], heloName: 'relay.example.test', port: server.port, maxConnectionsPerHost: 1,
    connectTimeoutMs: COMMAND_MS, commandTimeoutMs: COMMAND_MS, minBodyBytesPerSecond, dnsTimeoutMs: 1000, allowAddresses: new Set(['127.0.0.1']),
  });
  try {
    await run(transport);
  } finally {
    server.close();
    await transport.close().catch(() => {});
    await dns.close();
  }
};

const withSmarthost: WithTransport = async (server, minBodyBytesPerSecond, run) => {
  const transport = new SmtpTransport({
    url: `smtp://127.0.0.1:${server.port}?tls=none`, maxConnections: 1, connectTimeoutMs: COMMAND_MS, commandTimeoutMs: COMMAND_MS, minBodyBytesPerSecond,
  });
  try {
    await run(transport);
  } finally {
    server.close();
    await transport.close().catch(() => {});
  }
};

for (const [name, withTransport, taken] of [['MX', withMx, 'delivered'], ['smarthost', withSmarthost, 'accepted']] as const) {
  test(`${name}: a body read at a trickle is cut off at its deadline (size at the minimum rate), deferred, and the connection closed and its slot freed`, async () => {
    // 16 MiB at 4 MiB/s: 4 s, past the command timeout; the server reads 1.6 MiB/s at most, and
    // the kernel's buffers hold a few MiB: far from the whole body by then.
    const size = 16 * MiB;
    const deadlineMs = 4_000;
    const server = await pacedServer((n) => (n === 0 ? { bytes: 32 * 1024, everyMs: 20 } : null));
    await withTransport(server, 4 * MiB, async (transport) => {
      const started = Date.now();
      const sent = await outcomeWithin(transport, message('em_trickle', size), 20_000);
      assert.ok(sent, 'no outcome 20 s into a body read at a trickle');
      const [outcome] = sent.recipients;
      assert.is(outcome.result, 'deferred', 'the dot never went out: a temporary failure, retried');
      assert.is(outcome.stage, 'data');
      assert.match(outcome.response, `the message body (${size} bytes) not all sent within ${deadlineMs} ms`);
      assert.ok(Date.now() - started >= deadlineMs, `cut off after ${Date.now() - started} ms, before the deadline`);

      // The only slot is free at once, and the next message goes on a new connection.
      const next = await outcomeWithin(transport, message('em_next', 4096), 10_000);
      assert.ok(next, 'no outcome for the next message: the slot was not freed');
      assert.is(next.recipients[0].result, taken);
      assert.is(server.connections.length, 2, 'the cut-off connection was not reused');
      // The server sees the end once it has read what the kernel's buffers still held.
      await server.connections[0].closed;
      assert.ok(server.connections[0].bodyBytes < size, `${server.connections[0].bodyBytes} bytes read of ${size}`);
      assert.is(server.queued.length, 1, 'only the next message taken');
    });
  });

  test(`${name}: a large body read at a moderate pace, longer than the command timeout but within its deadline, goes through`, async () => {
    // 40 MiB read 12.8 MiB/s at most: over 3 s, past the command timeout, which alone would cut
    // it off, and well within 40 s at 1 MiB/s. The few MiB the kernel's buffers still hold once
    // the last byte left are read well within the command timeout the reply to the dot has.
    const size = 40 * MiB;
    const server = await pacedServer(() => ({ bytes: 128 * 1024, everyMs: 10 }));
    await withTransport(server, 1 * MiB, async (transport) => {
      const started = Date.now();
      const sent = await outcomeWithin(transport, message('em_moderate', size), 30_000);
      assert.ok(sent, 'no outcome 30 s into a body read at a moderate pace');
      assert.is(sent.recipients[0].result, taken, sent.recipients[0].response);
      assert.ok(Date.now() - started > COMMAND_MS, `the transfer took ${Date.now() - started} ms, not longer than the command timeout`);
      assert.equal(server.queued.length, 1);
      assert.ok(server.queued[0] >= size, `${server.queued[0]} bytes of ${size} taken`);
    });
  });
}

test.run();
