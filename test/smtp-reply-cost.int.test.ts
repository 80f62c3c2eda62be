// Reading a reply costs the same whatever shape the server gives it. Whoever runs a recipient
// domain's MX (anyone with a domain of their own) chooses the replies the mx transport reads, and
// a run of whitespace in the middle of one line once took time quadratic in its length (60 KB:
// over a second of a blocked event loop, once per parse). The reply is read in time linear in at
// most its first few KB, and a connection takes no reply over MAX_REPLY_BYTES: past that the
// connection ends and the recipient is deferred, saying why, without waiting for a timeout.
// Real sockets: a raw SMTP server on loopback that sends the replies as written, the test's DNS
// server for MX, the real mx and smtp transports.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MAX_REPLY_BYTES } from '../infra/mail/smtp-replies.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import { SmtpTransport } from '../infra/mail/smtp-transport.ts';
import type { MailTransport, OutgoingMessage, TransportOutcome } from '../infra/ports/mail-transport.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { startScriptedSmtp, type SmtpScript } from './support/scripted-smtp.ts';
import { longestStall } from './support/event-loop.ts';

const test = suite('SMTP replies: what reading one costs');

/** Longer than the 1,000 characters of a reply an outcome keeps, and quadratic work of seconds. */
const SPACES = ' '.repeat(60_000);
/** The longest the event loop may go without running a 10 ms timer while one message is sent. */
const MAX_BLOCK_MS = 250;

const message: OutgoingMessage = {
  emailId: 'em_1', envelope: { mailFrom: 'b@bounce.example.test', recipients: ['ann@spaces.test'] }, raw: Buffer.from('Subject: x\r\n\r\nhi\r\n'), messageId: 'x@example.test',
};

/** The outcome of one send, and the longest the event loop was held while it ran (and one turn after). */
async function timedSend(transport: MailTransport): Promise<{ outcome: TransportOutcome; longestBlockMs: number }> {
  const { result: outcome, stallMs } = await longestStall(async () => {
    const sent = await transport.send(message);
    await new Promise((resolve) => setTimeout(resolve, 30));
    return sent;
  }, 10);
  return { outcome, longestBlockMs: stallMs };
}

type Kind = 'mx' | 'smarthost';

/** Sends `message` through a transport of `kind` to a raw server answering as `script` says. */
async function sendTo(kind: Kind, script: SmtpScript): Promise<{ outcome: TransportOutcome; longestBlockMs: number }> {
  const server = await startScriptedSmtp(script);
  let dns: TestDnsServer | null = null;
  let transport: MailTransport;
  if (kind === 'mx') {
    dns = await startDnsServer([
      { name: 'spaces.test', type: 'MX', data: { preference: 10, exchange: 'mx.spaces.test' } },
      { name: 'mx.spaces.test', type: 'A', data: '127.0.0.1' },
    ]);
    transport = new MxTransport({
      dnsServers: [dns.address], heloName: 'relay.example.test', port: server.port, connectTimeoutMs: 5000, commandTimeoutMs: 5000,
      dnsTimeoutMs: 1000, allowAddresses: new Set(['127.0.0.1']),
    });
  } else {
    transport = new SmtpTransport({ url: `smtp://127.0.0.1:${server.port}?tls=none`, maxConnections: 1, connectTimeoutMs: 5000, commandTimeoutMs: 5000 });
  }
  try {
    return await timedSend(transport);
  } finally {
    server.close();
    await Promise.race([transport.close().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 2_000))]);
    await dns?.close();
  }
}

test('MX: a refusal at RCPT TO holding a long run of spaces is read without holding the event loop', async () => {
  const { outcome, longestBlockMs } = await sendTo('mx', { rcpt: `550 5.1.1 <ann@spaces.test>${SPACES}User unknown\r\n` });
  const [r] = outcome.recipients;
  assert.is(r.result, 'rejected', r.response);
  assert.is(r.smtpCode, 550);
  assert.is(r.enhancedCode, '5.1.1');
  assert.ok(longestBlockMs < MAX_BLOCK_MS, `the event loop was held ${Math.round(longestBlockMs)} ms by one reply of ${SPACES.length + 40} bytes`);
});

test('smarthost: a 250 to the end of data holding a long run of spaces is read (queue id too) without holding the event loop', async () => {
  const { outcome, longestBlockMs } = await sendTo('smarthost', { endOfData: `250 2.0.0 Ok: queued as Q7${SPACES}thanks\r\n` });
  const [r] = outcome.recipients;
  assert.is(r.result, 'accepted', r.response);
  assert.is(outcome.providerMessageId, 'Q7');
  assert.ok(longestBlockMs < MAX_BLOCK_MS, `the event loop was held ${Math.round(longestBlockMs)} ms by one reply of ${SPACES.length + 40} bytes`);
});

for (const kind of ['mx', 'smarthost'] as const) {
  test(`${kind}: a reply over MAX_REPLY_BYTES ends the connection, and the recipient is deferred at once, saying why`, async () => {
    // Continuation lines: nodemailer measures a reply as each of its lines lands.
    const lines = Array.from({ length: Math.ceil(MAX_REPLY_BYTES / 1000) + 10 }, () => `550-5.1.1 ${'x'.repeat(1000)}\r\n`);
    const started = performance.now();
    const { outcome, longestBlockMs } = await sendTo(kind, { rcpt: `${lines.join('')}550 5.1.1 User unknown\r\n` });
    const [r] = outcome.recipients;
    assert.is(r.result, 'deferred', r.response.slice(0, 200));
    assert.match(r.response, /exceeds maximum allowed size/);
    // The command timeout (5 s) would also defer: the outcome came well before it.
    assert.ok(performance.now() - started < 2_500, `the outcome took ${Math.round(performance.now() - started)} ms`);
    assert.ok(longestBlockMs < MAX_BLOCK_MS, `the event loop was held ${Math.round(longestBlockMs)} ms`);
  });
}

test.run();
