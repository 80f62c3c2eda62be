// A connection flood fills the feedback SMTP server's 200 connections (20 per client, so ten
// flooding addresses suffice) and every genuine bounce or complaint report is then refused with
// 421 for as long as the flood lasts, while the inbound part stays `running` and /readyz 200.
// `relay start` makes it visible: relay_inbound_refused_total counts each refusal by reason
// (every reason there from 0), relay_inbound_connections shows the server full, and a warn line
// names the reason and how many (apps/inbound/inbound-server.ts, apps/relay.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { parseMetrics, samplesOf } from './support/metrics.ts';
import { freePort, spawnRelay, waitForReady } from './support/relay-process.ts';
import { SmtpSession } from './support/smtp-session.ts';

const test = suite('an inbound connection flood is visible');

interface LogLine { level: number; msg: string; part?: string; reason?: string; refused?: number }

test('refusals of a flood are counted by reason on /metrics and told at warn, with the connections held', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-flood-'));
  const port = await freePort();
  const smtpPort = await freePort();
  const relay = spawnRelay(['start'], {
    RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_INBOUND_SMTP_PORT: String(smtpPort), RELAY_INBOUND_SMTP_HOST: '0.0.0.0',
    RELAY_LOG_FORMAT: 'json', RELAY_LOG_LEVEL: 'info',
  });
  const base = `http://127.0.0.1:${port}`;
  const inbound = async () => {
    const samples = parseMetrics(await (await fetch(`${base}/metrics`)).text());
    return {
      refused: Object.fromEntries(samplesOf(samples, 'relay_inbound_refused_total').map((s) => [s.labels.reason, s.value])),
      connections: samplesOf(samples, 'relay_inbound_connections').map((s) => s.value),
    };
  };
  // Refusals of return paths (another test's) stay at 0 through a flood.
  const NO_RETURN_PATH_REFUSALS = { not_a_return_path: 0, unknown_return_path: 0, unknown_email: 0, unknown_recipient: 0 };
  const refusing = () => relay.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as LogLine)
    .filter((line) => line.level === 40 && line.part === 'inbound' && line.reason !== undefined);
  const flood: SmtpSession[] = [];
  try {
    await waitForReady(base, relay);
    assert.equal(await inbound(), { refused: { too_many_connections: 0, too_many_from_client: 0, parser_busy: 0, no_room: 0, ...NO_RETURN_PATH_REFUSALS }, connections: [0] });

    // 10 addresses x 20 connections: the server's 200; one more from a flooding address is over its share.
    for (let host = 2; host <= 11; host++) {
      const opened = await Promise.all(Array.from({ length: 20 }, () => SmtpSession.open(smtpPort, { localAddress: `127.0.0.${host}` })));
      for (const { session, greeting } of opened) {
        assert.is(greeting.code, 220, greeting.text);
        flood.push(session);
      }
      if (host === 2) {
        const { session, greeting } = await SmtpSession.open(smtpPort, { localAddress: '127.0.0.2' });
        session.close();
        assert.match(greeting.text, /^421 4\.7\.0 /);
      }
    }
    // A mail server with a genuine bounce report.
    const { session: genuine, greeting } = await SmtpSession.open(smtpPort, { localAddress: '127.0.0.99' });
    genuine.close();
    assert.is(greeting.code, 421, `the genuine client is refused: ${greeting.text}`);

    assert.equal(await inbound(), { refused: { too_many_connections: 1, too_many_from_client: 1, parser_busy: 0, no_room: 0, ...NO_RETURN_PATH_REFUSALS }, connections: [200] });
    await waitUntil(() => refusing().length === 2, 'a warn line for each reason');
    assert.equal(refusing().map(({ reason, refused }) => [reason, refused]), [['too_many_from_client', 1], ['too_many_connections', 1]]);
    assert.match(refusing()[1].msg, 'the feedback SMTP server refused 1 session(s) or report(s) for want of room (too_many_connections)');
  } finally {
    for (const session of flood) session.close();
    await relay.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
