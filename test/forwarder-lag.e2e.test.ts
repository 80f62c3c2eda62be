// A forwarder that is down is visible (issue 23): `relay api` and `relay forwarder` run as
// processes of their own on one embedded data directory, no processor runs. While the
// forwarder is killed, the events admitted meanwhile show as relay_forwarder_lag on the API's
// /metrics (the event store's head minus the forwarder's saved checkpoint; the consumer groups'
// lag cannot show them, the log has not got them); once it runs again the lag falls to 0. The
// forwarder's own /readyz and /metrics report it as a part: running, its progress, work waiting.
// The data directory's log has a file of its own (log.db, as in one made before the log moved
// into the event store's file), so the forwarder copies the events; in the default the log
// serves them from the event store and the lag is 0 by construction (test/walking-skeleton.e2e.test.ts).
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { samplesOf, scrape, sumOf } from './support/metrics.ts';
import { freePort, postEmail, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';

const test = suite('the forwarder\'s lag and liveness, across processes');
const WAIT_MS = 60_000;

test('its lag rises on the API\'s /metrics while the forwarder is down and falls to 0 after it restarts; its own /readyz and /metrics show it as a part', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-forwarder-lag-'));
  closeSync(openSync(join(dataDir, 'log.db'), 'a'));
  const processes: RelayProcess[] = [];
  try {
    const env = { RELAY_DATA_DIR: dataDir };
    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], env);
    assert.is(setup.code, 0, setup.stderr);
    const apiKey = JSON.parse(setup.stdout).apiKey as string;
    const start = async (args: string[]) => {
      const port = await freePort();
      const process = spawnRelay(args, { ...env, PORT: String(port) });
      processes.push(process);
      const url = `http://127.0.0.1:${port}`;
      await waitForReady(url, process, WAIT_MS);
      return { process, url };
    };
    const api = await start(['api']);
    let forwarder = await start(['forwarder']);
    const lag = async () => sumOf(await scrape(api.url), 'relay_forwarder_lag');
    const send = (subject: string) => postEmail(api.url, apiKey, { from: 'hello@example.test', to: 'you@example.test', subject, text: subject });

    for (let i = 0; i < 3; i++) await send(`while running ${i}`);
    await waitUntil(async () => await lag() === 0, 'the running forwarder keeps its lag at 0', WAIT_MS);
    assert.is(samplesOf(await scrape(api.url), 'relay_metrics_collector_up', { collector: 'forwarder_lag' })[0]?.value, 1);

    // Its own process: a part named forwarder, running, with its last progress.
    const readyz = await (await fetch(`${forwarder.url}/readyz`)).json() as { checks: Record<string, boolean>; parts: Record<string, { state: string; lastProgressAt: string; workWaiting: boolean }> };
    assert.equal(Object.keys(readyz.parts), ['forwarder']);
    assert.is(readyz.checks.forwarder, true);
    assert.is(readyz.parts.forwarder.state, 'running');
    assert.is(readyz.parts.forwarder.workWaiting, false);
    const own = await scrape(forwarder.url);
    assert.is(samplesOf(own, 'relay_part_up', { part: 'forwarder' })[0]?.value, 1);
    assert.is(samplesOf(own, 'relay_part_work_waiting', { part: 'forwarder' })[0]?.value, 0);
    assert.ok(Math.abs(samplesOf(own, 'relay_part_last_progress_seconds', { part: 'forwarder' })[0].value - Date.parse(readyz.parts.forwarder.lastProgressAt) / 1000) < 0.001);

    await forwarder.process.kill();
    for (let i = 0; i < 4; i++) await send(`while down ${i}`);
    // Each admission appends its EmailAccepted (and a usage charge): at least 4 events behind.
    await waitUntil(async () => await lag() >= 4, 'the lag shows the 4 emails admitted while the forwarder is down', WAIT_MS);
    const down = await lag();
    await send('still down');
    await waitUntil(async () => await lag() > down, 'the lag rises with one more', WAIT_MS);

    forwarder = await start(['forwarder']);
    await waitUntil(async () => await lag() === 0, 'the restarted forwarder brings its lag back to 0', WAIT_MS);
  } finally {
    for (const process of processes) await process.kill();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
