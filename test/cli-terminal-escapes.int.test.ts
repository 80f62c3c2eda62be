// What the operator commands print as text from outside Relay reaches the terminal with its
// control characters escaped: a remote MX's throttling reply (`relay sites`; the site state keeps
// its first 200 characters as sent), a processor's error message (`relay parked list`), an
// email's subject and addresses (`relay outbox list`, where JSON.stringify escapes C0 controls
// but not DEL nor C1 ones such as U+009B, CSI). Raw, they could retitle the terminal, rewrite the
// table, or write the clipboard (OSC 52).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { siteSnapshots, type SiteSnapshot } from '../apps/services/delivery/sites.ts';
import { parkEvent } from '../apps/services/parked-events.ts';
import { loadConfig } from '../infra/config.ts';
import { runRelay } from './support/relay-process.ts';

const CONTROLS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
const ESCAPES = '\u001b]0;relay: all clear\u0007\u001b[2J\u001b[H\u009b31m\u007f';

const test = suite<{ dataDir: string }>('operator commands and control characters from outside');
test.before(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-cli-escapes-'));
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: ctx.dataDir, RELAY_LOG_LEVEL: 'silent' }));
  try {
    const now = new Date();
    const snapshot: SiteSnapshot = {
      _id: 'test-instance mx.evil.test', site: 'mx.evil.test', instance: 'test-instance',
      limits: { connections: 2, messagesPerConnection: 100, messagesPerMinute: 60 } as SiteSnapshot['limits'],
      rate: 30, pausedUntil: null, throttles: 1, delivered: 0, deferred: 1, inFlight: 0, recent: [`421 4.7.0 ${ESCAPES} Try again later`], updatedAt: now.toISOString(),
    };
    await siteSnapshots(stores.documents).insert(snapshot);
    await parkEvent(stores.documents, {
      processor: 'projector', group: 'relay.projector', event: { id: 'evt_1', streamId: 'email-em_1', revision: 0, type: 'EmailAccepted' },
      error: new Error(`remote said ${ESCAPES} no`), attempts: 1, firstFailedAt: now, lastFailedAt: now,
    });
    // The read model as an older Relay may have projected it (admission now refuses C1 in subjects).
    await stores.documents.collection<{ _id: string; subject: string; toAddresses: string[]; createdAt: string }>(COLLECTIONS.emails).insert({
      _id: 'em_escapes', subject: `Invoice ${ESCAPES}`, toAddresses: [`to\u009b2J@example.test`], createdAt: now.toISOString(),
    });
  } finally {
    await stores.close();
  }
  mkdirSync(join(ctx.dataDir, 'outbox'), { recursive: true });
  writeFileSync(join(ctx.dataDir, 'outbox', 'em_escapes.eml'), 'Subject: x\r\n\r\nbody\r\n');
});
test.after((ctx) => rmSync(ctx.dataDir, { recursive: true, force: true }));

const cases: Array<{ args: string[]; shows: RegExp }> = [
  { args: ['sites'], shows: /mx\.evil\.test .*421 4\.7\.0 \\x1b\]0;relay: all clear\\x07\\x1b\[2J/ },
  { args: ['parked', 'list'], shows: /relay\.projector:evt_1 .*remote said \\x1b\]0;relay: all clear\\x07\\x1b\[2J\\x1b\[H\\x9b31m\\x7f no/ },
  { args: ['outbox', 'list'], shows: /em_escapes .*to\\x9b2J@example\.test .*Invoice \\u001b\]0;relay: all clear\\u0007\\u001b\[2J\\u001b\[H\\x9b31m\\x7f/ },
];
for (const { args, shows } of cases) {
  test(`relay ${args.join(' ')} escapes control characters`, async ({ dataDir }) => {
    const run = await runRelay(args, { RELAY_DATA_DIR: dataDir });
    assert.is(run.code, 0, run.stderr);
    assert.match(run.stdout, shows, run.stdout);
    assert.not.match(run.stdout, CONTROLS, `raw control characters on stdout: ${JSON.stringify(run.stdout)}`);
  });
}

test.run();
