// The feedback SMTP server tells every refusal for want of room (apps/inbound/inbound-server.ts):
// its connections all taken (smtp-server's own 421 "Too many connected clients"), a client
// network's share taken (421 4.7.0), no room for a report's bytes (452 4.3.1), the parsers busy
// (451 4.3.2). Each is given to onRefused by its reason (relay_inbound_refused_total), and each
// reason to onRefusing (a warn line) at once, then at most once per interval with how many came
// since. Limits are made small enough to reach; clients are bare sockets from chosen loopback
// addresses.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { InboundRefusalReason } from '../apps/relay-metrics.ts';
import { waitUntil } from './support/eventually.ts';
import { startInboundFixture } from './support/inbound.ts';
import { dataLines, SmtpSession } from './support/smtp-session.ts';
import { dsn } from './support/reports.ts';

const test = suite('feedback SMTP server: refusals are told');

function recorder() {
  const refused: InboundRefusalReason[] = [];
  const told: Array<{ reason: InboundRefusalReason; count: number; at: number }> = [];
  return {
    refused, told,
    onRefused: (reason: InboundRefusalReason) => refused.push(reason),
    onRefusing: (reason: InboundRefusalReason, count: number) => told.push({ reason, count, at: Date.now() }),
  };
}

test('connections over the server\'s limit and over a client\'s share: each counted by reason, told at once, then summed once per interval', async () => {
  const seen = recorder();
  const interval = 500;
  const fx = await startInboundFixture({ limits: { maxConnections: 3 }, maxConnectionsPerClient: 2, refusalsToldEveryMs: interval, ...seen });
  const open: SmtpSession[] = [];
  try {
    for (let i = 0; i < 2; i++) {
      const { session, greeting } = await SmtpSession.open(fx.inbound.port, { localAddress: '127.0.5.1' });
      open.push(session);
      assert.is(greeting.code, 220);
    }
    const { session: third, greeting: overShare } = await SmtpSession.open(fx.inbound.port, { localAddress: '127.0.5.1' });
    third.close();
    assert.match(overShare.text, /^421 4\.7\.0 .*too many connections from 127\.0\.5\.1/);
    const { session: other, greeting } = await SmtpSession.open(fx.inbound.port, { localAddress: '127.0.5.2' });
    open.push(other);
    assert.is(greeting.code, 220);
    assert.is(fx.inbound.connections(), 3);
    for (let i = 0; i < 4; i++) {
      const { session, greeting: full } = await SmtpSession.open(fx.inbound.port, { localAddress: '127.0.5.3' });
      session.close();
      assert.match(full.text, /^421 .*Too many connected clients/);
    }
    assert.equal(seen.refused, ['too_many_from_client', 'too_many_connections', 'too_many_connections', 'too_many_connections', 'too_many_connections']);
    // The first of each reason at once; the three after it once the interval is over.
    assert.equal(seen.told.map(({ reason, count }) => [reason, count]), [['too_many_from_client', 1], ['too_many_connections', 1]]);
    await waitUntil(() => seen.told.length === 3, 'the refusals after the first are told, summed');
    const [, first, summed] = seen.told;
    assert.equal([summed.reason, summed.count], ['too_many_connections', 3]);
    assert.ok(summed.at - first.at >= interval - 10, `told ${summed.at - first.at} ms after the first, not before the interval (${interval} ms)`);
    assert.is(fx.inbound.connections(), 3, 'refused connections are not held');
  } finally {
    for (const session of open) session.close();
    await fx.close();
  }
});

test('a report without room for its bytes (452 4.3.1) is no_room; one no parser can take (451 4.3.2) is parser_busy', async () => {
  const noRoom = recorder();
  const small = await startInboundFixture({ limits: { dataBytesInFlight: 1024 }, ...noRoom });
  try {
    const { session } = await SmtpSession.open(small.inbound.port);
    await session.command('EHLO client.example.org');
    assert.match((await session.command('MAIL FROM:<> SIZE=4096')).text, /^452 4\.3\.1 /);
    session.close();
    assert.equal(noRoom.refused, ['no_room']);
    assert.equal(noRoom.told.map(({ reason, count }) => [reason, count]), [['no_room', 1]]);
  } finally {
    await small.close();
  }

  // No report may wait for a parser thread: every one is refused as when all are busy.
  const busy = recorder();
  const fx = await startInboundFixture({ limits: { parseWaiting: 0 }, ...busy });
  try {
    const { returnPaths } = await fx.email(['ann@example.org']);
    const { session } = await SmtpSession.open(fx.inbound.port);
    await session.command('EHLO client.example.org');
    assert.is((await session.command('MAIL FROM:<>')).code, 250);
    assert.is((await session.command(`RCPT TO:<${returnPaths[0]}>`)).code, 250);
    assert.is((await session.command('DATA')).code, 354);
    session.write(...dataLines(dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1' })));
    assert.match((await session.reply()).text, /^451 4\.3\.2 /);
    session.close();
    assert.equal(busy.refused, ['parser_busy']);
    assert.equal(busy.told.map(({ reason, count }) => [reason, count]), [['parser_busy', 1]]);
  } finally {
    await fx.close();
  }
});

test.run();
