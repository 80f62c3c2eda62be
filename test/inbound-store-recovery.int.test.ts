// The feedback SMTP server after a store failure (apps/inbound/inbound-server.ts): the failure
// makes `inbound` `recovering`, and reports are seldom, so the server pings its stores itself on
// a capped, doubling back-off and runs again once they answer, with no report needed; the probe
// ends when it recovers (by its ping, or by a lookup or recording that succeeds) or when the
// server stops, leaving no timer behind. So /readyz, which answers 503 for the whole process
// once a part has been recovering past the stuck threshold, answers 200 again within seconds of
// the stores answering, not when the next bounce happens to arrive.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ALL_PARTS, startRelay, type RunningRelay } from '../apps/relay.ts';
import { verpAddress, VERP_MAC_PURPOSE } from '../domain/delivery/verp.ts';
import { loadConfig } from '../infra/config.ts';
import type { EventStore } from '../infra/ports/event-store.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort } from './support/free-port.ts';
import { startInboundFixture, type InboundFixture } from './support/inbound.ts';
import { SmtpSession } from './support/smtp-session.ts';

const test = suite('inbound: recovery from a store failure, in relay start');
const STUCK_AFTER_MS = 500;

interface Readyz { checks: Record<string, boolean>; parts: Record<string, { state: string; reason: string | null }> }

const diskError = () => Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR', errcode: 10 });

test('a store that fails a RCPT lookup and then answers again: /readyz answers 200 again within seconds, with no further report', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-inbound-recovery-'));
  let failing = false;
  let relay: RunningRelay | null = null;
  try {
    const smtpPort = await freePort();
    relay = await startRelay(loadConfig({ RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_INBOUND_SMTP_PORT: String(smtpPort), RELAY_LOG_LEVEL: 'silent' }), ALL_PARTS, {
      processorPolicy: { stuckAfterMs: STUCK_AFTER_MS },
      // The store is out as sqlite is on an I/O error: an email stream's read and the stores' pings fail.
      readFault: (sql) => (failing && (sql.includes('WHERE stream_id = ?') || sql.startsWith('SELECT 1 ')) ? diskError() : null),
    });
    const url = relay.url!;
    const readyz = async () => {
      const response = await fetch(`${url}/readyz`);
      return { code: response.status, body: await response.json() as Readyz };
    };
    await waitUntil(async () => (await readyz()).code === 200, '/readyz 200 at start', 10_000);

    // A well-formed return path (Relay's own MAC): its lookup reads the email's stream.
    const secrets = relay.services.secrets;
    const returnPath = verpAddress({ emailId: 'em_AAAAAAAAAAAAAAAAAAAA', recipientIndex: 0, mailFromDomain: 'bounce.example.test' }, (data) => secrets.mac(VERP_MAC_PURPOSE, data));
    const { session } = await SmtpSession.open(smtpPort);
    await session.command('EHLO mx.remote.test');
    await session.command('MAIL FROM:<>');
    failing = true;
    const rcpt = await session.command(`RCPT TO:<${returnPath}>`);
    assert.is(rcpt.code, 451, 'the lookup failed: the remote MTA is told to retry later');
    await session.command('QUIT').catch(() => null);
    session.socket.destroy();

    // Past the stuck threshold, the stores still out: the whole process is out of rotation, inbound included.
    let during: Readyz | null = null;
    await waitUntil(async () => {
      const answer = await readyz();
      if (answer.code === 503 && answer.body.checks.inbound === false) during = answer.body;
      return during !== null;
    }, '/readyz to answer 503 for inbound', 5_000);
    assert.is(during!.parts.inbound.state, 'recovering');

    // The stores answer again; no report arrives, as is usual for a feedback server. The
    // server's own ping (1 s, doubling) finds them answering.
    failing = false;
    await waitUntil(async () => {
      const answer = await readyz();
      return answer.code === 200 && answer.body.parts.inbound.state === 'running';
    }, '/readyz to answer 200 again once the stores answer (inbound recovered)', 8_000);
  } finally {
    await relay?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

// startInbound itself, its event store made to fail its reads and its pings on demand.

const probe = suite('inbound: its probe of the stores');

interface Outage {
  down: boolean;
  /** When the server pinged the event store, in ms. */
  pings: number[];
  events: (real: EventStore) => EventStore;
}

function outage(): Outage {
  const o: Outage = {
    down: false,
    pings: [],
    events: (real) => new Proxy(real, {
      get(target, prop) {
        if (prop === 'ping') {
          return async () => {
            o.pings.push(performance.now());
            return !o.down && target.ping();
          };
        }
        if (prop === 'readStream') return (...args: Parameters<EventStore['readStream']>) => (o.down ? Promise.reject(diskError()) : target.readStream(...args));
        const value = Reflect.get(target, prop, target) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }),
  };
  return o;
}

async function rcptSession(fx: InboundFixture): Promise<{ session: SmtpSession; returnPath: string }> {
  const { returnPaths: [returnPath] } = await fx.email(['ann@example.org']);
  const { session } = await SmtpSession.open(fx.inbound.port);
  await session.command('EHLO mx.remote.test');
  await session.command('MAIL FROM:<>');
  return { session, returnPath: returnPath! };
}

probe('while the stores do not answer it keeps recovering, pinging them on a doubling back-off; once they do it runs, the probe ends, and the next failure starts it from its first delay', async () => {
  const o = outage();
  const fx = await startInboundFixture({ events: o.events, storeProbe: { initialDelayMs: 25, maxDelayMs: 400 } });
  try {
    const { session, returnPath } = await rcptSession(fx);
    assert.is(fx.inbound.probingStores(), false, 'no probe while running');
    o.down = true;
    assert.is((await session.command(`RCPT TO:<${returnPath}>`)).code, 451);
    const failedAt = performance.now();
    assert.is(fx.inbound.liveness.state, 'recovering');
    assert.ok(fx.inbound.probingStores(), 'a probe is scheduled');

    await waitUntil(() => o.pings.length >= 5, 'five pings of the stores', 10_000);
    assert.is(fx.inbound.liveness.state, 'recovering', 'pings that fail do not make it run');
    const gaps = o.pings.slice(0, 5).map((at, i) => at - (i === 0 ? failedAt : o.pings[i - 1]!));
    // 25, 50, 100, 200, 400 ms (failedAt is taken just after the failure: the first gap may be a little short).
    [25, 50, 100, 200].forEach((ms, i) => assert.ok(gaps[i + 1]! >= ms - 2, `ping ${i + 2} came ${Math.round(gaps[i + 1]!)} ms after the one before, expected at least ${ms}`));

    o.down = false;
    await waitUntil(() => fx.inbound.liveness.state === 'running', 'inbound to run again, with no report', 5_000);
    assert.is(fx.inbound.probingStores(), false, 'the probe ended once the stores answered');

    // A new failure: the probe starts again from its first delay (25 ms, not the 400 ms it had reached).
    const before = o.pings.length;
    o.down = true;
    assert.is((await session.command(`RCPT TO:<${returnPath}>`)).code, 451);
    const failedAgainAt = performance.now();
    await waitUntil(() => o.pings.length > before, 'a ping after the new failure', 5_000);
    assert.ok(o.pings[before]! - failedAgainAt < 300, `the first ping came ${Math.round(o.pings[before]! - failedAgainAt)} ms after the failure`);
    o.down = false;
    await waitUntil(() => fx.inbound.liveness.state === 'running', 'inbound to run again', 5_000);
    session.socket.destroy();
  } finally {
    await fx.close();
  }
});

probe('a lookup that succeeds ends the probe; stopping the server ends it too, without waiting for it', async () => {
  const o = outage();
  // A probe an hour away: only the lookup or the stop can end it.
  const fx = await startInboundFixture({ events: o.events, storeProbe: { initialDelayMs: 3_600_000, maxDelayMs: 3_600_000 } });
  let closed = false;
  try {
    const { session, returnPath } = await rcptSession(fx);
    o.down = true;
    assert.is((await session.command(`RCPT TO:<${returnPath}>`)).code, 451);
    assert.ok(fx.inbound.probingStores(), 'a probe is scheduled');
    o.down = false;
    assert.is((await session.command(`RCPT TO:<${returnPath}>`)).code, 250, 'the lookup succeeds');
    assert.is(fx.inbound.liveness.state, 'running');
    assert.is(fx.inbound.probingStores(), false, 'the lookup ended the probe');

    // Another email's return path: an email looked up before is not read again.
    const { returnPaths: [another] } = await fx.email(['bob@example.org']);
    o.down = true;
    assert.is((await session.command(`RCPT TO:<${another}>`)).code, 451);
    assert.ok(fx.inbound.probingStores(), 'a probe is scheduled again');
    session.socket.destroy();
    const before = performance.now();
    closed = true;
    await fx.close();
    assert.ok(performance.now() - before < 10_000, 'stop() did not wait for the probe');
    assert.is(fx.inbound.probingStores(), false, 'no probe left once stopped');
    assert.is(fx.inbound.liveness.state, 'stopped');
    assert.is(o.pings.length, 0, 'the probe never pinged');
  } finally {
    if (!closed) await fx.close();
  }
});

test.run();
probe.run();
