// Reports cannot freeze the feedback server or fail each other (issue 22, item 1): a RCPT costs
// the same whatever the email's history, concurrent reports about one email are all recorded
// (no revision conflict, no 451), reports about another email never wait for them, and a report
// the parser cannot finish is refused (554 5.3.4) while the server goes on answering, its thread
// replaced. Real SMTP clients (nodemailer, bare sockets) against the real server.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { toNewEvent } from '../apps/services/command-handler.ts';
import { emailStreamId, type RecipientReported } from '../domain/email/events.ts';
import { EMAIL_SCHEMA_VERSIONS } from '../domain/email/upcast.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { startInboundFixture } from './support/inbound.ts';
import { deliverReport, dsn } from './support/reports.ts';
import { dataLines, SmtpSession } from './support/smtp-session.ts';

const test = suite('feedback SMTP server: reports');

const reported = async (events: EventStore, id: string) =>
  (await events.readStream(emailStreamId(id))).filter((e) => e.type === 'RecipientReported').map((e) => (e.data as { recipientIndex: number }).recipientIndex);

/** The event store with its reads of one stream counted. */
function countingReads(real: EventStore, watched: () => string | null): { events: EventStore; read: () => number } {
  let read = 0;
  const events = new Proxy(real, {
    get(target, property) {
      if (property === 'readStream') {
        return async (...args: Parameters<EventStore['readStream']>) => {
          const found = await target.readStream(...args);
          if (args[0] === watched()) read += found.length;
          return found;
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { events, read: () => read };
}

test('a RCPT reads one event of the email, however long its history: 100 pipelined RCPTs to an email with 3,000 events, then one report read once', async () => {
  let watched: string | null = null;
  let counter!: ReturnType<typeof countingReads>;
  const fx = await startInboundFixture({ events: (real) => (counter = countingReads(real, () => watched)).events });
  try {
    const { id, returnPaths } = await fx.email(['ann@example.org']);
    const stream = emailStreamId(id);
    // A long history: 3,000 delay reports, appended as the ingest would have.
    for (let batch = 0; batch < 30; batch++) {
      const events = Array.from({ length: 100 }, (_, i): RecipientReported => ({
        type: 'RecipientReported',
        data: {
          reportId: `history-${batch}-${i}`, recipientIndex: 0, address: 'ann@example.org', outcome: 'delayed', format: 'dsn',
          status: '4.4.1', diagnosticCode: null, reason: 'connection timed out', complaintType: null, occurredAt: new Date().toISOString(),
        },
      }));
      const written = events.map((e) => toNewEvent(e, { correlationId: 'history', causationId: 'history' }, EMAIL_SCHEMA_VERSIONS.RecipientReported));
      await fx.t.stores.events.append(stream, written, { expectedRevision: batch * 100 });
    }
    assert.is((await fx.t.stores.events.readStream(stream)).length, 3_001);
    watched = stream;
    const { session } = await SmtpSession.open(fx.inbound.port);
    try {
      await session.command('EHLO client.example.org');
      session.write('MAIL FROM:<>', ...Array.from({ length: 100 }, () => `RCPT TO:<${returnPaths[0]}>`));
      assert.is((await session.reply()).code, 250);
      // Every RCPT counts against the 50 recipients of a message, the same return path again too.
      for (let i = 0; i < 50; i++) assert.match((await session.reply()).text, /^250 2\.1\.5 /);
      for (let i = 0; i < 50; i++) assert.match((await session.reply()).text, /^452 4\.5\.3 /);
      const readByRcpts = counter.read();
      assert.is(readByRcpts, 1, `the RCPTs read ${readByRcpts} events of the email's stream (its admission, once: the email is kept)`);
      // The report is about one recipient, however often it was named: one finding at most
      // (whether a report after 3,000 is recorded at all is the domain's rule, not the server's).
      assert.is((await session.command('DATA')).code, 354);
      session.write(...dataLines(dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 User unknown' })));
      assert.match((await session.reply()).text, /^250 /);
      assert.ok((await reported(fx.t.stores.events, id)).length <= 3_001);
    } finally {
      session.close();
    }
  } finally {
    await fx.close();
  }
});

test('20 concurrent reports about one email are all accepted and all recorded (no revision conflict reaches a client)', async () => {
  const fx = await startInboundFixture();
  try {
    const to = Array.from({ length: 20 }, (_, i) => `r${i}@example.org`);
    const { id, returnPaths } = await fx.email(to);
    const results = await Promise.allSettled(to.map((address, i) => deliverReport(fx.inbound.port, returnPaths[i], dsn({
      recipient: address, action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 User unknown', messageId: `concurrent.${i}.${id}@mx.example.org`,
    }))));
    const refused = results.flatMap((r) => (r.status === 'rejected' ? [String((r.reason as { response?: string }).response ?? r.reason)] : []));
    assert.equal(refused, [], 'every report got 250');
    assert.equal((await reported(fx.t.stores.events, id)).sort((a, b) => a - b), to.map((_, i) => i));
    assert.equal(fx.errors, []);
  } finally {
    await fx.close();
  }
});

test('reports about one email wait for each other, not for another email: a report about B is recorded while one about A is held', async () => {
  let held: string | null = null;
  const gate = deferred();
  let waiting = false;
  const fx = await startInboundFixture({
    events: (real) => new Proxy(real, {
      get(target, property) {
        if (property === 'append') {
          return async (...args: Parameters<EventStore['append']>) => {
            if (args[0] === held) {
              waiting = true;
              await gate.promise;
            }
            return target.append(...args);
          };
        }
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }),
  });
  try {
    const a = await fx.email(['ann@example.org']);
    const b = await fx.email(['bob@example.org']);
    held = emailStreamId(a.id);
    let aSettled = false;
    const aDelivered = deliverReport(fx.inbound.port, a.returnPaths[0], dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1' }))
      .finally(() => (aSettled = true));
    await waitUntil(() => waiting, "A's report is being recorded (its append held)");
    await deliverReport(fx.inbound.port, b.returnPaths[0], dsn({ recipient: 'bob@example.org', action: 'failed', status: '5.1.1' }));
    assert.equal(await reported(fx.t.stores.events, b.id), [0], "B's report is recorded");
    assert.not.ok(aSettled, "A's report is still held");
    gate.resolve();
    await aDelivered;
    assert.equal(await reported(fx.t.stores.events, a.id), [0]);
  } finally {
    gate.resolve();
    await fx.close();
  }
});

test('a report the parser cannot finish within its budget is refused (554 5.3.4); meanwhile the server answers, and the next report is parsed on a new thread', async () => {
  const fx = await startInboundFixture({
    parserWorkerUrl: new URL('./fixtures/hanging-report-worker.ts', import.meta.url),
    limits: { parseBudgetMs: 1_000, parseThreads: 1 },
  });
  const { id, returnPaths } = await fx.email(['ann@example.org', 'bob@example.org']);
  const hanging = (await SmtpSession.open(fx.inbound.port)).session;
  const next = (await SmtpSession.open(fx.inbound.port)).session;
  try {
    await hanging.command('EHLO client.example.org');
    await hanging.command('MAIL FROM:<>');
    await hanging.command(`RCPT TO:<${returnPaths[0]}>`);
    await hanging.command('DATA');
    const stuck = dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1' }).replace('MIME-Version: 1.0', 'X-Test-Hang: forever\r\nMIME-Version: 1.0');
    hanging.write(...dataLines(stuck));
    const refusal = hanging.reply();
    // While that report spins on its thread, the event loop answers another client.
    assert.is((await next.command('EHLO client.example.org')).code, 250);
    assert.is((await next.command('MAIL FROM:<>')).code, 250);
    assert.is((await next.command(`RCPT TO:<${returnPaths[1]}>`)).code, 250);
    assert.is((await next.command('DATA')).code, 354);
    next.write(...dataLines(dsn({ recipient: 'bob@example.org', action: 'failed', status: '5.1.1', diagnostic: '550 5.1.1 User unknown' })));
    assert.match((await refusal).text, /^554 5\.3\.4 Report too complex to read within 1 s/);
    assert.match((await next.reply()).text, /^250 /, 'the next report is parsed once the stuck thread is replaced');
    assert.equal(await reported(fx.t.stores.events, id), [1], 'only the parsed report is recorded');
  } finally {
    hanging.close();
    next.close();
    await fx.close();
  }
});

test.run();
