// The feedback SMTP server cannot be held or flooded (issue 22, item 6): connections per client
// address, the length of a session, the deadline of a DATA transfer, the memory that open
// transfers hold and the rate DATA is read at are bounded, each answered with its SMTP reply. Clients are bare sockets
// (test/support/smtp-session.ts) from chosen loopback addresses; the limits are made small
// enough to reach, the server and its replies are the production ones.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startInboundFixture, type InboundFixture } from './support/inbound.ts';
import { waitUntil } from './support/eventually.ts';
import { dsn } from './support/reports.ts';
import { dataLines, SmtpSession } from './support/smtp-session.ts';

const test = suite('feedback SMTP server: limits');

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A plain-text bounce for `address` whose body is padded to about `bytes`. */
function bounce(address: string, bytes: number, id: string): string {
  const filler = Array.from({ length: Math.ceil(bytes / 82) }, (_, i) => `${String(i).padStart(6, '0')} ${'x'.repeat(72)}`);
  return [
    'From: Mail Delivery System <MAILER-DAEMON@mx.example.org>',
    `Subject: Undelivered Mail Returned to Sender`,
    `Message-ID: <${id}@mx.example.org>`,
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'This is the mail system at host mx.example.org.',
    '',
    `<${address}>: host mx.example.org said: 550 5.1.1 <${address}>: Recipient address rejected: User unknown`,
    '',
    ...filler,
    '',
  ].join('\r\n');
}

/** `report` (a dsn()) with its returned headers replaced by a message carrying `bytes` of attachment. */
function withAttachment(report: string, bytes: number): string {
  const attachment = Buffer.alloc(bytes, 7).toString('base64').replace(/.{76}/g, '$&\r\n');
  return report.replace(/Content-Type: text\/rfc822-headers\r\n\r\n([\s\S]*?)\r\n--(dsn-boundary-\d+)--/, (_all, headers: string, boundary: string) => [
    'Content-Type: message/rfc822', '', headers.trim(), 'Content-Type: application/pdf', 'Content-Transfer-Encoding: base64', '', attachment, `--${boundary}--`,
  ].join('\r\n'));
}

async function transaction(session: SmtpSession, to: string): Promise<void> {
  assert.is((await session.command('MAIL FROM:<>')).code, 250);
  assert.is((await session.command(`RCPT TO:<${to}>`)).code, 250);
  assert.is((await session.command('DATA')).code, 354);
}

const reportedIndexes = async (fx: InboundFixture, id: string) =>
  (await fx.t.stores.events.readStream(`email-${id}`)).filter((e) => e.type === 'RecipientReported').map((e) => (e.data as { recipientIndex: number }).recipientIndex);

test('a client address holds at most its share of connections (421 4.7.0); other addresses still get in, and a freed slot is given again', async () => {
  const fx = await startInboundFixture({ maxConnectionsPerClient: 3 });
  const open: SmtpSession[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      const { session, greeting } = await SmtpSession.open(fx.inbound.port, { localAddress: '127.0.3.1' });
      open.push(session);
      assert.is(greeting.code, 220);
    }
    const { session: fourth, greeting: refused } = await SmtpSession.open(fx.inbound.port, { localAddress: '127.0.3.1' });
    assert.is(refused.code, 421);
    assert.match(refused.text, /^421 4\.7\.0 .*too many connections from 127\.0\.3\.1/);
    await fourth.closed();
    const { session: other, greeting } = await SmtpSession.open(fx.inbound.port, { localAddress: '127.0.3.2' });
    open.push(other);
    assert.is(greeting.code, 220, 'another address is not affected');
    // One of the three leaves: its address may connect again.
    await open[0].command('QUIT');
    await open[0].closed();
    await waitUntil(async () => {
      const { session, greeting: again } = await SmtpSession.open(fx.inbound.port, { localAddress: '127.0.3.1' });
      open.push(session);
      return again.code === 220;
    }, 'the freed slot is given to the address again', 5_000);
  } finally {
    for (const s of open) s.close();
    await fx.close();
  }
});

test('no session outlives the session limit, however busy it keeps itself (NOOP): 421 4.4.2 and the connection closes', async () => {
  const fx = await startInboundFixture({ limits: { sessionMs: 1_500 } });
  const { session } = await SmtpSession.open(fx.inbound.port);
  try {
    assert.is((await session.command('EHLO client.example.org')).code, 250);
    let answered = 0;
    const deadline = Date.now() + 10_000;
    let last = await session.command('NOOP');
    while (last.code === 250 && Date.now() < deadline) {
      answered++;
      await sleep(100);
      last = await session.command('NOOP').catch(() => ({ code: 0, lines: [], text: 'closed without a reply' }));
    }
    assert.ok(answered >= 3, `the session was alive and answering (${answered} NOOPs)`);
    assert.match(last.text, /^421 4\.4\.2 .*session lasted 1\.5 s/);
    await session.closed();
  } finally {
    session.close();
    await fx.close();
  }
});

test('a DATA transfer that trickles is cut at the DATA deadline (421 4.4.2); nothing is recorded and the budget is given back', async () => {
  const fx = await startInboundFixture({ limits: { dataMs: 1_000, dataBytesInFlight: 256 * 1024 } });
  const { id, returnPaths } = await fx.email(['ann@example.org']);
  const { session } = await SmtpSession.open(fx.inbound.port);
  try {
    await session.command('EHLO client.example.org');
    await transaction(session, returnPaths[0]);
    const report = bounce('ann@example.org', 200 * 1024, 'trickle');
    session.socket.write(report.slice(0, 200 * 1024 - 100));
    let cut: string | null = null;
    void session.reply().then((r) => (cut = r.text), () => (cut = 'closed without a reply'));
    for (let i = 0; i < 100 && cut === null; i++) {
      session.socket.write('y');
      await sleep(100);
    }
    assert.match(String(cut), /^421 4\.4\.2 .*DATA not completed within 1 s/);
    await session.closed();
  } finally {
    session.close();
  }
  try {
    assert.equal(await reportedIndexes(fx, id), []);
    // What the cut transfer held is free again: a report as large is taken in full.
    const { session: next } = await SmtpSession.open(fx.inbound.port);
    await next.command('EHLO client.example.org');
    await transaction(next, returnPaths[0]);
    next.write(...dataLines(bounce('ann@example.org', 200 * 1024, 'after-the-cut')));
    assert.match((await next.reply()).text, /^250 /);
    next.close();
    assert.equal(await reportedIndexes(fx, id), [0]);
  } finally {
    await fx.close();
  }
});

test('open DATA transfers hold at most the budget: a report that would go past it is answered 452 4.3.1, and taken once the budget has room', async () => {
  const fx = await startInboundFixture({ limits: { dataBytesInFlight: 300 * 1024 } });
  const { id, returnPaths } = await fx.email(['ann@example.org', 'bob@example.org']);
  const a = (await SmtpSession.open(fx.inbound.port)).session;
  const b = (await SmtpSession.open(fx.inbound.port)).session;
  const probe = (await SmtpSession.open(fx.inbound.port)).session;
  try {
    for (const s of [a, b, probe]) await s.command('EHLO client.example.org');
    // A sends 200 KiB of its report and holds the transfer open.
    await transaction(a, returnPaths[0]);
    const first = dataLines(bounce('ann@example.org', 200 * 1024, 'held'));
    a.write(...first.slice(0, -1));
    // The server holds A's bytes once a client announcing 150 KiB is told there is no room.
    await waitUntil(async () => {
      const reply = await probe.command('MAIL FROM:<> SIZE=153600');
      if (reply.code === 250) await probe.command('RSET');
      return reply.code === 452;
    }, 'a MAIL FROM announcing 150 KiB is refused for want of room', 10_000);
    assert.match((await probe.command('MAIL FROM:<> SIZE=153600')).text, /^452 4\.3\.1 Insufficient system storage/);
    // B's 200 KiB would go past the budget: refused at the end of its DATA, to be retried.
    await transaction(b, returnPaths[1]);
    b.write(...dataLines(bounce('bob@example.org', 200 * 1024, 'refused-then-taken')));
    assert.match((await b.reply()).text, /^452 4\.3\.1 Insufficient system storage/);
    // A ends its transfer: recorded.
    a.write('.');
    assert.match((await a.reply()).text, /^250 /);
    // B tries again in the same session: now there is room.
    await transaction(b, returnPaths[1]);
    b.write(...dataLines(bounce('bob@example.org', 200 * 1024, 'refused-then-taken')));
    assert.match((await b.reply()).text, /^250 /);
    assert.equal((await reportedIndexes(fx, id)).sort(), [0, 1]);
  } finally {
    for (const s of [a, b, probe]) s.close();
    await fx.close();
  }
});

test('DATA is read at a bounded rate, all sessions together: senders beyond it are slowed down, not refused', async () => {
  const fx = await startInboundFixture({ limits: { dataBytesPerSecond: 64 * 1024 } });
  const { id, returnPaths } = await fx.email(['ann@example.org', 'bob@example.org']);
  const sessions = [(await SmtpSession.open(fx.inbound.port)).session, (await SmtpSession.open(fx.inbound.port)).session];
  try {
    const started = performance.now();
    const replies = await Promise.all(sessions.map(async (session, i) => {
      await session.command('EHLO client.example.org');
      await transaction(session, returnPaths[i]);
      // Cheap to read: a DSN whose bulk is an attachment the parser never decodes.
      session.write(...dataLines(withAttachment(dsn({ recipient: ['ann@example.org', 'bob@example.org'][i], action: 'failed', status: '5.1.1' }), 150 * 1024)));
      return (await session.reply()).text;
    }));
    const seconds = (performance.now() - started) / 1000;
    assert.ok(replies.every((r) => /^250 /.test(r)), replies.join(' | '));
    // About 400 KiB at 64 KiB/s, the first 64 KiB at once: at least 5 s, however fast the
    // machine (read as fast as it arrives, the two take a fraction of a second).
    assert.ok(seconds >= 5, `both read in ${seconds.toFixed(1)} s`);
    assert.equal((await reportedIndexes(fx, id)).sort(), [0, 1]);
  } finally {
    for (const s of sessions) s.close();
    await fx.close();
  }
});

test('a 4 MiB bounce fits a 1 MiB budget: only the parts the parser reads are held, and it is recorded', async () => {
  const fx = await startInboundFixture({ limits: { dataBytesInFlight: 1024 * 1024 } });
  const { id, returnPaths } = await fx.email(['ann@example.org']);
  const { session } = await SmtpSession.open(fx.inbound.port);
  try {
    await session.command('EHLO client.example.org');
    await transaction(session, returnPaths[0]);
    const raw = bounce('ann@example.org', 4 * 1024 * 1024 - 4096, 'four-mib');
    assert.ok(raw.length > 4_000_000 && raw.length < 4 * 1024 * 1024, `${raw.length} bytes`);
    session.write(...dataLines(raw));
    assert.match((await session.reply()).text, /^250 /);
    assert.equal(await reportedIndexes(fx, id), [0]);
  } finally {
    session.close();
    await fx.close();
  }
});

test.run();
