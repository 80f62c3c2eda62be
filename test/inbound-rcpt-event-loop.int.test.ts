// RCPT lookups at the feedback SMTP server leave the event loop that the API shares free,
// whatever the client pipelines: a RCPT reads only what it needs of its email (never opens the
// sealed body, which may be 10 MB; a BCC recipient's address is taken from it once, when the
// report arrives), a return path named again is not read again, every RCPT of a transaction
// counts against its 50 recipients (a repeated one too: 452 4.5.3 past them), and each lookup
// is answered on a turn of its own, so a pipeline of RCPTs never runs as one block even when
// the store answers synchronously (node:sqlite).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { verpAddress, VERP_MAC_PURPOSE } from '../domain/delivery/verp.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import { send } from './support/delivery.ts';
import { startInboundFixture } from './support/inbound.ts';
import { dsn } from './support/reports.ts';
import { dataLines, SmtpSession } from './support/smtp-session.ts';
import { longestStall } from './support/event-loop.ts';

const test = suite('feedback SMTP server: RCPT lookups and the event loop');

test('100 pipelined RCPTs to the return paths of a large email do not stall the event loop for more than 500 ms', async () => {
  const fx = await startInboundFixture();
  try {
    const id = await send(fx.t, fx.tenant.key, {
      from: `hello@${fx.tenant.domain}`, to: ['ann@example.org'], bcc: ['eve@example.net'], subject: 'Your statement', html: `<p>${'x'.repeat(9_000_000)}</p>`,
    });
    const mac = (data: string) => fx.t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, data);
    const returnPath = (recipientIndex: number) => verpAddress({ emailId: id, recipientIndex, mailFromDomain: `bounce.${fx.tenant.domain}` }, mac);
    for (const [who, index] of [['To', 0], ['BCC', 1]] as const) {
      const { session } = await SmtpSession.open(fx.inbound.port);
      try {
        assert.is((await session.command('EHLO client.example.org')).code, 250);
        assert.is((await session.command('MAIL FROM:<>')).code, 250);
        const codes: number[] = [];
        const stall = (await longestStall(async () => {
          session.write(...Array.from({ length: 100 }, () => `RCPT TO:<${returnPath(index)}>`));
          for (let i = 0; i < 100; i++) codes.push((await session.reply()).code);
        })).stallMs;
        assert.equal([...new Set(codes.slice(0, 50))], [250], `the first 50 RCPTs were accepted (${[...new Set(codes)]})`);
        assert.equal([...new Set(codes.slice(50))], [452], 'the RCPTs past the 50 recipients of a message were answered 452');
        assert.ok(stall < 500, `100 RCPTs to the ${who} recipient's return path held the event loop for ${Math.round(stall)} ms in one stretch`);
      } finally {
        session.close();
      }
    }
  } finally {
    await fx.close();
  }
});

test('every RCPT of a transaction counts against its 50 recipients, a repeated return path too: past them 452 4.5.3, and a new transaction starts again from none', async () => {
  const fx = await startInboundFixture();
  try {
    const { id, returnPaths } = await fx.email(['ann@example.org', 'bob@example.org']);
    const { session } = await SmtpSession.open(fx.inbound.port);
    try {
      assert.is((await session.command('EHLO client.example.org')).code, 250);
      assert.is((await session.command('MAIL FROM:<>')).code, 250);
      session.write(...Array.from({ length: 50 }, (_, i) => `RCPT TO:<${returnPaths[i % 2]}>`));
      for (let i = 0; i < 50; i++) assert.is((await session.reply()).code, 250, `RCPT ${i + 1}`);
      for (const returnPath of returnPaths) assert.match((await session.command(`RCPT TO:<${returnPath}>`)).text, /^452 4\.5\.3 Too many recipients/);
      assert.match((await session.command('RCPT TO:<nobody@example.org>')).text, /^452 4\.5\.3 /);
      // The transaction goes on with the recipients it has: one report, one finding per recipient.
      assert.is((await session.command('DATA')).code, 354);
      session.write(...dataLines(dsn({ recipient: 'ann@example.org', action: 'failed', status: '5.1.1' })));
      assert.is((await session.reply()).code, 250);
      assert.is((await session.command('MAIL FROM:<>')).code, 250);
      assert.is((await session.command(`RCPT TO:<${returnPaths[1]}>`)).code, 250, 'a new transaction counts from none');
    } finally {
      session.close();
    }
    const reported = (await fx.t.stores.events.readStream(`email-${id}`)).filter((e) => e.type === 'RecipientReported')
      .map((e) => (e.data as { recipientIndex: number }).recipientIndex);
    assert.equal(reported, [0]);
  } finally {
    await fx.close();
  }
});

test('RCPTs to a BCC recipient\'s return path never open the sealed body: its address is taken from it once, when the report has arrived', async () => {
  let keyReads = 0;
  // The content keys the server reads: opening a sealed body starts with reading its key.
  const watching = (real: DocumentStore): DocumentStore => new Proxy(real, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property !== 'collection') return typeof value === 'function' ? value.bind(target) : value;
      return (name: string) => {
        const collection = target.collection(name);
        if (name !== COLLECTIONS.contentKeys) return collection;
        return new Proxy(collection, {
          get(c, p) {
            const v = Reflect.get(c, p, c);
            if (p === 'get') keyReads++;
            return typeof v === 'function' ? v.bind(c) : v;
          },
        });
      };
    },
  });
  const fx = await startInboundFixture({ documents: watching });
  try {
    const id = await send(fx.t, fx.tenant.key, { from: `hello@${fx.tenant.domain}`, to: ['ann@example.org'], bcc: ['eve@example.net'], subject: 'Your statement', text: 'hi' });
    const mac = (data: string) => fx.t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, data);
    const bccReturnPath = verpAddress({ emailId: id, recipientIndex: 1, mailFromDomain: `bounce.${fx.tenant.domain}` }, mac);
    const { session } = await SmtpSession.open(fx.inbound.port);
    try {
      assert.is((await session.command('EHLO client.example.org')).code, 250);
      assert.is((await session.command('MAIL FROM:<>')).code, 250);
      session.write(...Array.from({ length: 50 }, () => `RCPT TO:<${bccReturnPath}>`));
      for (let i = 0; i < 50; i++) assert.is((await session.reply()).code, 250);
      assert.is(keyReads, 0, 'a RCPT opened the sealed body');
      assert.is((await session.command('DATA')).code, 354);
      session.write(...dataLines(dsn({ recipient: 'eve@example.net', action: 'failed', status: '5.1.1' })));
      assert.is((await session.reply()).code, 250);
    } finally {
      session.close();
    }
    assert.is(keyReads, 1, 'the body is opened once for the report');
    // The report names the BCC recipient's address, taken from the body: it is recorded for it.
    const reported = (await fx.t.stores.events.readStream(`email-${id}`)).filter((e) => e.type === 'RecipientReported')
      .map((e) => [(e.data as { recipientIndex: number }).recipientIndex, (e.data as { outcome: string }).outcome]);
    assert.equal(reported, [[1, 'hard_bounced']]);
  } finally {
    await fx.close();
  }
});

test('each RCPT lookup is answered on a turn of its own: a store that answers synchronously cannot make a pipeline one block', async () => {
  // A synchronous store that takes 40 ms of the event loop a read, as node:sqlite may on a busy disk.
  const busy = (real: EventStore): EventStore => new Proxy(real, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (property !== 'readStream' || !slow) return typeof value === 'function' ? value.bind(target) : value;
      return (...args: unknown[]) => {
        const until = performance.now() + 40;
        while (performance.now() < until);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  let slow = false;
  const fx = await startInboundFixture({ events: busy });
  try {
    // Twenty emails: twenty reads, none of them saved by a return path seen before.
    const returnPaths: string[] = [];
    for (let i = 0; i < 20; i++) returnPaths.push((await fx.email([`ann${i}@example.org`])).returnPaths[0]);
    const { session } = await SmtpSession.open(fx.inbound.port);
    try {
      assert.is((await session.command('EHLO client.example.org')).code, 250);
      assert.is((await session.command('MAIL FROM:<>')).code, 250);
      slow = true;
      const codes: number[] = [];
      const stall = (await longestStall(async () => {
        session.write(...returnPaths.map((returnPath) => `RCPT TO:<${returnPath}>`));
        for (let i = 0; i < returnPaths.length; i++) codes.push((await session.reply()).code);
      })).stallMs;
      assert.equal([...new Set(codes)], [250]);
      assert.ok(stall < 300, `20 RCPTs of 40 ms each held the event loop for ${Math.round(stall)} ms in one stretch`);
    } finally {
      slow = false;
      session.close();
    }
  } finally {
    await fx.close();
  }
});

test.run();
