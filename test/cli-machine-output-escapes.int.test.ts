// Machine-readable output (--json, JSON lines, CSV) of the operator commands is read on a
// terminal too, so it carries no raw control character from outside Relay: JSON.stringify escapes
// C0 controls, and DEL and the C1 controls (U+009B is CSI, an escape introducer on many
// terminals) are written as \u escapes as well, so each line still parses to the same strings.
// In a CSV export the data cell is that JSON, and the row is escaped as text output is.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores } from '../apps/runtime.ts';
import { siteSnapshots, type SiteSnapshot } from '../apps/services/delivery/sites.ts';
import { parkEvent } from '../apps/services/parked-events.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { loadConfig } from '../infra/config.ts';
import { accepted } from './support/email-events.ts';
import { runRelay } from './support/relay-process.ts';

const CONTROLS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
const ESCAPES = '\u001b]0;relay: all clear\u0007\u001b[2J\u001b[H\u009b31m\u007f';
const SUBJECT = `Invoice ${ESCAPES}`;

const test = suite<{ dataDir: string }>('machine-readable CLI output and control characters from outside');
test.before(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-cli-json-escapes-'));
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
    // As an older Relay may have admitted it (admission now refuses C1 in subjects).
    const event = accepted({ emailId: 'em_escapes', subject: SUBJECT });
    await stores.events.append(emailStreamId('em_escapes'), [{ id: randomUUID(), ...event, metadata: { correlationId: 'c', causationId: 'c', schemaVersion: 1 } }], {
      expectedRevision: 'no_stream',
    });
  } finally {
    await stores.close();
  }
});
test.after((ctx) => rmSync(ctx.dataDir, { recursive: true, force: true }));

/** Every string anywhere in a parsed JSON value. */
const stringsIn = (value: unknown): string[] =>
  typeof value === 'string' ? [value] : value && typeof value === 'object' ? Object.values(value).flatMap(stringsIn) : [];

const cases: Array<{ args: string[]; holds: string }> = [
  { args: ['sites', '--json'], holds: `421 4.7.0 ${ESCAPES} Try again later` },
  { args: ['parked', 'list', '--json'], holds: `remote said ${ESCAPES} no` },
  { args: ['events', '--stream', emailStreamId('em_escapes')], holds: SUBJECT },
  { args: ['events', 'export'], holds: SUBJECT },
];
for (const { args, holds } of cases) {
  test(`relay ${args.join(' ')} writes JSON without raw control characters that parses to the same strings`, async ({ dataDir }) => {
    const run = await runRelay(args, { RELAY_DATA_DIR: dataDir });
    assert.is(run.code, 0, run.stderr);
    assert.not.match(run.stdout, CONTROLS, `raw control characters on stdout: ${JSON.stringify(run.stdout)}`);
    assert.ok(run.stdout.includes('\\u009b31m\\u007f'), run.stdout);
    const lines = run.stdout.trim().split('\n');
    assert.ok(lines.length > 0 && lines.map((l) => JSON.parse(l)).some((value) => stringsIn(value).includes(holds)), run.stdout);
  });
}

/** The cells of one RFC 4180 record. */
function csvCells(record: string): string[] {
  const cells: string[] = [];
  let i = 0;
  while (i <= record.length) {
    if (record[i] === '"') {
      let text = '';
      i++;
      while (!(record[i] === '"' && record[i + 1] !== '"')) {
        if (i >= record.length) throw new Error(`unterminated quoted cell in ${record}`);
        text += record[i];
        i += record[i] === '"' ? 2 : 1;
      }
      cells.push(text);
      i += 2; // the closing quote and the comma
    } else {
      const end = record.indexOf(',', i);
      cells.push(record.slice(i, end === -1 ? record.length : end));
      i = end === -1 ? record.length + 1 : end + 1;
    }
  }
  return cells;
}

test('relay events export --format csv has no raw control characters; its data cell parses to the same subject', async ({ dataDir }) => {
  const run = await runRelay(['events', 'export', '--format', 'csv'], { RELAY_DATA_DIR: dataDir });
  assert.is(run.code, 0, run.stderr);
  assert.not.match(run.stdout, CONTROLS, `raw control characters on stdout: ${JSON.stringify(run.stdout)}`);
  const [header, row, ...rest] = run.stdout.trim().split('\n');
  assert.equal(rest, [], run.stdout);
  const columns = csvCells(header);
  const cells = csvCells(row);
  assert.is(cells.length, columns.length, row);
  assert.is(cells[columns.indexOf('streamId')], emailStreamId('em_escapes'));
  assert.is(JSON.parse(cells[columns.indexOf('data')]).subject, SUBJECT);
});

test.run();
