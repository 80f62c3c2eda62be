// A pooled connection that fails RSET is logged at warn, and the server's reply (quoted in
// nodemailer's "Could not reset session state. response=…") goes only into the `reason` field,
// cut to a few hundred characters, every control character a space. The server is whoever runs
// the recipient domain an API client sends to (or the smarthost): its reply could otherwise make
// one warn line as large as the reply, and write lines and terminal escapes of its own into a
// log printed as is. Real sockets: a raw SMTP server answering RSET with a hostile reply, the
// test's DNS server for MX, the real mx and smtp transports.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import { SmtpTransport } from '../infra/mail/smtp-transport.ts';
import type { SessionLog } from '../infra/mail/pooled-sessions.ts';
import type { MailTransport, OutgoingMessage } from '../infra/ports/mail-transport.ts';
import { startDnsServer } from './support/dns-server.ts';
import { startScriptedSmtp, type SmtpScript } from './support/scripted-smtp.ts';

const test = suite('SMTP: a failed RSET in the log');

/** A forged log line and terminal escapes, then `lines` continuation lines of 1,000 characters. */
const hostileReply = (lines: number): string =>
  [
    '554-5.0.0 x',
    '554-{"level":50,"msg":"forged line"} \u001b[2J\u001b[31mRED\u0085\u2028',
    ...Array.from({ length: lines }, () => `554-${'A'.repeat(1000)}`),
    '554 5.0.0 no',
  ].join('\r\n') + '\r\n';

/** Under the largest reply a connection takes (MAX_REPLY_BYTES): nodemailer quotes it whole. */
const QUOTED = hostileReply(40);
/** Over it: the connection ends on it. */
const OVERSIZED = hostileReply(200);

const message = (id: string, domain: string): OutgoingMessage => ({
  emailId: id, envelope: { mailFrom: 'b@bounce.example.test', recipients: [`ann@${domain}`] }, raw: Buffer.from('Subject: x\r\n\r\nhi\r\n'), messageId: `${id}@example.test`,
});

interface Warning { fields: Record<string, unknown>; message: string }

function capturingLog(): SessionLog & { warnings: Warning[] } {
  const warnings: Warning[] = [];
  return { warnings, warn: (fields, text) => warnings.push({ fields, message: text }) };
}

/** What one warn line must be, whatever the server's reply. */
function assertFitForLog(warning: Warning, expectedMessage: string): void {
  assert.is(warning.message, expectedMessage, 'the message names the host, never the reply');
  const reason = warning.fields.reason;
  assert.type(reason, 'string');
  assert.ok((reason as string).length <= 301, `a reason of ${(reason as string).length} characters`);
  assert.not.match(reason as string, /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/, 'control characters from the peer in the reason');
  const line = JSON.stringify(warning);
  assert.ok(line.length < 1000, `one warn line of ${line.length} characters`);
}

/** Two messages to `transport`, the second on the connection the first used: RSET first. */
async function sendTwice(transport: MailTransport, domain: string): Promise<void> {
  await transport.send(message('em_first', domain));
  const second = await transport.send(message('em_second', domain));
  assert.ok(second.recipients[0], 'the next message has an outcome');
}

for (const [size, reply] of [['a quoted', QUOTED], ['an oversized', OVERSIZED]] as const) {
  test(`MX: ${size} reply to RSET is logged bounded and clean, in a field`, async () => {
    const server = await startScriptedSmtp({ rset: reply });
    const dns = await startDnsServer([
      { name: 'hostile.test', type: 'MX', data: { preference: 10, exchange: 'mx.hostile.test' } },
      { name: 'mx.hostile.test', type: 'A', data: '127.0.0.1' },
    ]);
    const log = capturingLog();
    const transport = new MxTransport({
      dnsServers: [dns.address], heloName: 'relay.example.test', port: server.port, maxConnectionsPerHost: 1,
      connectTimeoutMs: 1000, commandTimeoutMs: 2000, dnsTimeoutMs: 1000, allowAddresses: new Set(['127.0.0.1']), log,
    });
    try {
      await sendTwice(transport, 'hostile.test');
      assert.is(server.connections, 2, 'the connection that failed RSET was replaced');
      assert.is(log.warnings.length, 1, 'the failed RSET is logged once');
      assertFitForLog(log.warnings[0], 'mx: a pooled connection to mx.hostile.test [127.0.0.1] failed RSET and was closed');
      if (reply === QUOTED) assert.match(log.warnings[0].fields.reason as string, /^Could not reset session state\. response=554-5\.0\.0 x 554-\{"level":50,"msg":"forged line"\} {2}\[2J \[31mRED {3}554-A+…$/);
    } finally {
      server.close();
      await Promise.race([transport.close().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 2_000))]);
      await dns.close();
    }
  });
}

test('smarthost: a reply to RSET is logged bounded and clean, in a field', async () => {
  // A refused recipient leaves the connection to be reset before the next message, however soon.
  const script: SmtpScript = { rcpt: '550 5.1.1 no such user\r\n', rset: QUOTED };
  const server = await startScriptedSmtp(script);
  const log = capturingLog();
  const transport = new SmtpTransport({ url: `smtp://127.0.0.1:${server.port}?tls=none`, maxConnections: 1, connectTimeoutMs: 1000, commandTimeoutMs: 2000, log });
  try {
    await sendTwice(transport, 'hostile.test');
    assert.is(server.connections, 2, 'the connection that failed RSET was replaced');
    assert.is(log.warnings.length, 1, 'the failed RSET is logged once');
    assertFitForLog(log.warnings[0], 'smtp: a pooled connection to 127.0.0.1 failed RSET and was closed');
    assert.match(log.warnings[0].fields.reason as string, /^Could not reset session state\. response=554-5\.0\.0 x .*…$/);
  } finally {
    server.close();
    await Promise.race([transport.close().catch(() => {}), new Promise((resolve) => setTimeout(resolve, 2_000))]);
  }
});

test.run();
