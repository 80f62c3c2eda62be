// 552 in reply to RCPT TO is a temporary failure (RFC 5321 4.5.3.1.10): RFC 821 gave 552 for
// "too many recipients", whose code is now 452, and clients SHOULD treat a 552 there as
// temporary, as Postfix's does. A receiver that limits recipients per session the RFC 821 way
// (Relay carries up to messages_per_connection transactions, one recipient each, on one pooled
// connection) would otherwise make the recipient soft_bounced at once, never retried, although
// the next session would take it. 552 anywhere else (the message's size at the end of data)
// still refuses. Real sockets: the smtp-server sink, the test's DNS server, the real mx transport.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { RecipientOutcome } from '../infra/ports/mail-transport.ts';
import { startDnsServer } from './support/dns-server.ts';
import { smtpError, startSmtpSink, type SmtpSinkOptions } from './support/smtp-sink.ts';

const test = suite('MX: 552 to RCPT TO is temporary');

/** Each of `who` sent to `<who>@limit.test` in turn, one transaction each on one pooled connection, as the sender does. */
async function sendEach(who: string[], sinkOptions: SmtpSinkOptions): Promise<RecipientOutcome[]> {
  const sink = await startSmtpSink(sinkOptions);
  const dns = await startDnsServer([
    { name: 'limit.test', type: 'MX', data: { preference: 10, exchange: 'mx.limit.test' } },
    { name: 'mx.limit.test', type: 'A', data: '127.0.0.1' },
  ]);
  const mx = new MxTransport({
    dnsServers: [dns.address], heloName: 'relay.example.test', port: sink.port, connectTimeoutMs: 3000, commandTimeoutMs: 3000,
    dnsTimeoutMs: 1000, allowAddresses: new Set(['127.0.0.1']), maxConnectionsPerHost: 1,
  });
  try {
    const outcomes: RecipientOutcome[] = [];
    for (const name of who) {
      const outcome = await mx.send({ emailId: `em_${name}`, envelope: { mailFrom: `b+${name}@bounce.example.test`, recipients: [`${name}@limit.test`] }, raw: Buffer.from('Subject: x\r\n\r\nhi\r\n'), messageId: `${name}@example.test` });
      outcomes.push(outcome.recipients[0]);
    }
    return outcomes;
  } finally {
    await mx.close();
    await sink.close();
    await dns.close();
  }
}

test('a 552 "too many recipients" reply to RCPT TO defers the recipient', async () => {
  // Two recipients a session: the third RCPT TO of a session is answered 552.
  const perSession = new Map<string, number>();
  const outcomes = await sendEach(['ann', 'bob', 'cy'], {
    onRcptTo: (_address, session) => {
      const seen = (perSession.get(session.id) ?? 0) + 1;
      perSession.set(session.id, seen);
      return seen > 2 ? smtpError(552, '5.5.3 Too many recipients for this session') : undefined;
    },
  });
  assert.equal(outcomes.slice(0, 2).map((r) => r.result), ['delivered', 'delivered']);
  const third = outcomes[2];
  assert.is(third.smtpCode, 552, third.response);
  assert.is(third.enhancedCode, '5.5.3');
  assert.is(third.stage, 'rcpt_to');
  assert.is(third.result, 'deferred', third.response);
});

test('a 552 to the end of data (the message too large) still refuses the recipient', async () => {
  const [outcome] = await sendEach(['ann'], { onData: () => ({ error: smtpError(552, '5.3.4 Message size exceeds fixed maximum message size') }) });
  assert.is(outcome.smtpCode, 552, outcome.response);
  assert.is(outcome.stage, 'data');
  assert.is(outcome.result, 'rejected', outcome.response);
});

test.run();
