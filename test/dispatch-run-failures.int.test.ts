// relay_dispatch_run_failures_total (apps/relay-metrics.ts) as a running Relay's /metrics shows
// it. The sender and the webhooks each show their series at 0 from their start; then the
// sender's due item cannot be delivered because its email's stream cannot be read (the event
// store's reads fail, injected into the embedded stores as an I/O error would), so each run of
// its step throws before it rescheduled the item. The dispatcher only backs the item off and
// goes on: without the counter, only the log would tell. It rises with each failed run under
// part="sender", while the webhooks, which have nothing failing, stay at 0.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startRelay, type RunningRelay } from '../apps/relay.ts';
import { workItems } from '../apps/services/delivery/work-items.ts';
import { loadConfig } from '../infra/config.ts';
import { waitUntil } from './support/eventually.ts';
import { samplesOf, scrape } from './support/metrics.ts';

const test = suite('/metrics: failed runs of due items, by part');
const METRIC = 'relay_dispatch_run_failures_total';

const diskError = () => Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR', errcode: 10 });

/** The part's one sample (its series must exist, also at 0). */
function failuresOf(samples: Awaited<ReturnType<typeof scrape>>, part: string): number {
  const found = samplesOf(samples, METRIC, { part });
  assert.is(found.length, 1, `one ${METRIC} series for part="${part}"`);
  return found[0].value;
}

test('a sender step that keeps failing is counted under part="sender" at each run; the webhooks\' series stays at 0', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-dispatch-run-failures-'));
  let failing = false;
  let faultedReads = 0;
  let relay: RunningRelay | null = null;
  try {
    relay = await startRelay(loadConfig({ RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_LOG_LEVEL: 'silent' }), ['sender', 'webhooks'], {
      readFault: (sql) => {
        if (!failing || !sql.includes('FROM es_events WHERE stream_id = ?')) return null;
        faultedReads++;
        return diskError();
      },
    });
    const url = relay.url!;

    const atStart = await scrape(url);
    assert.is(failuresOf(atStart, 'sender'), 0);
    assert.is(failuresOf(atStart, 'webhooks'), 0);

    // An email's first attempt, due now, as the sender's handler schedules it on EmailAccepted.
    failing = true;
    await workItems(relay.stores.documents).insert({
      _id: 'em_unreadable', step: 'attempt', attempt: 1, dueAt: new Date(0).toISOString(), streamRevision: 0, origin: { correlationId: 'c', causationId: 'c' }, domain: null,
    });
    let first = 0;
    await waitUntil(async () => (first = failuresOf(await scrape(url), 'sender')) >= 1, 'the first failed run to be counted', 10_000);
    // Run again after its back-off (1 s), failing again: the counter rises with it.
    let later = 0;
    await waitUntil(async () => (later = failuresOf(await scrape(url), 'sender')) > first, 'the next failed run to be counted', 10_000);

    const end = await scrape(url);
    const counted = failuresOf(end, 'sender');
    assert.ok(counted >= later, `${counted} failed runs counted`);
    assert.ok(counted <= faultedReads, `no more counted (${counted}) than runs that could not read the stream (${faultedReads})`);
    assert.is(failuresOf(end, 'webhooks'), 0, 'nothing failed in the webhooks part');
  } finally {
    await relay?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
