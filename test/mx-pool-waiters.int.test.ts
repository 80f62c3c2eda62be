// The MX connection pool (infra/mail/mx-connections.ts) under a burst: a transaction that finds
// no idle connection waits for one on its way back to the pool only when no other transaction
// waits for that one already; otherwise it opens another, up to the host's limit. So two
// transactions that start right as a connection returns are not carried one after the other:
// while the server holds one, the other is delivered on a second connection. Real test DNS
// server (answers with TTLs, so lookups come from the cache and cost no turn of their own), real
// SMTP server on loopback.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';
import { startDnsServer } from './support/dns-server.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { makeTestCert, startSmtpSink } from './support/smtp-sink.ts';

const test = suite('mx pool: waiters');

const message = (n: number): OutgoingMessage => ({
  emailId: `em_${n}`, envelope: { mailFrom: 'b@bounce.example.test', recipients: [`r${n}@pool.test`] }, raw: Buffer.from(`Subject: ${n}\r\n\r\nhi\r\n`), messageId: `${n}@example.test`,
});

test('two transactions starting as a connection returns: one is held by the server, the other is delivered meanwhile on a second connection', async () => {
  const hold = deferred();
  let held: string | null = null;
  const sink = await startSmtpSink({
    cert: makeTestCert(['mx.pool.test']),
    onData: async (raw) => {
      const subject = /Subject: (\d+)/.exec(raw.toString())![1];
      if (subject !== '0' && held === null) {
        held = subject; // the first of the two later transactions is held until the test lets go
        await hold.promise;
      }
      return {};
    },
  });
  const dns = await startDnsServer([
    { name: 'pool.test', type: 'MX', data: { preference: 10, exchange: 'mx.pool.test' }, ttl: 300 },
    { name: 'mx.pool.test', type: 'A', data: '127.0.0.1', ttl: 300 },
  ]);
  dns.negativeTtl = 300; // the empty AAAA answer is cached too
  const transport = new MxTransport({
    dnsServers: [dns.address], heloName: 'relay.example.test', port: sink.port,
    connectTimeoutMs: 3000, commandTimeoutMs: 5000, dnsTimeoutMs: 1000, maxConnectionsPerHost: 3, allowAddresses: new Set(['127.0.0.1']),
  });
  try {
    assert.is((await transport.send(message(0))).recipients[0].result, 'delivered');
    // Right after the first transaction ends (its connection on its way back to the pool), two more start.
    const done: string[] = [];
    const one = transport.send(message(1)).then((o) => done.push(`1:${o.recipients[0].result}`));
    const two = transport.send(message(2)).then((o) => done.push(`2:${o.recipients[0].result}`));
    let freeFlowing = true;
    try {
      await waitUntil(() => done.length === 1, 'the transaction that is not held is delivered while the other is held', 2000);
    } catch {
      freeFlowing = false;
    }
    hold.resolve();
    await Promise.all([one, two]);
    assert.ok(freeFlowing, `the second transaction waited for the held one (held: ${held}; finished in order ${done.join(', ')}; connections opened: ${sink.connections})`);
    assert.equal(done.sort(), ['1:delivered', '2:delivered']);
    assert.is(sink.connections, 2, 'the returning connection was reused by one of them, the other opened a second');
  } finally {
    hold.resolve();
    await transport.close();
    await sink.close();
    await dns.close();
  }
});

test.run();
