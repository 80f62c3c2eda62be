// apps/api/MANAGEMENT-API.md (Deliverability stats) gives the answer of
// `GET /v1/projects/:projectId/stats` field by field ("**ProjectStats** `{…}`"), and the fields of
// `totals` (the outcomes counted, the rates and their bases): a client written from the page
// finds every field where the page says, `thresholds` beside `totals`, and no field unnamed.
// Run as an operator would: `relay start` on a fresh data directory, `relay setup --json
// --trust-domain`, one send, then the documented request with setup's session cookie.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readDoc } from './support/doc-blocks.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort, postEmail, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';

const test = suite('MANAGEMENT-API.md: the ProjectStats answer is the documented shape');

let dataDir: string;
let relay: RelayProcess | undefined;

test.after(async () => {
  await relay?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** The fields of a `{a, b, c}` list (top-level names only). */
const fieldsOf = (list: string) => list.replace(/\s+/g, ' ').slice(1, -1).split(',').map((field) => field.trim());

test('GET /v1/projects/:projectId/stats answers the fields the page lists, and no others', async () => {
  const doc = readDoc('apps/api/MANAGEMENT-API.md');
  const listed = /\*\*ProjectStats\*\* `(\{[^`]+\})`/.exec(doc);
  assert.ok(listed, 'MANAGEMENT-API.md gives the ProjectStats fields');
  const documented = fieldsOf(listed![1]);
  const outcomes = /Outcomes: ((?:`[a-z_]+`,? ?(?:and )?)+)\./.exec(doc.replace(/\s+/g, ' '));
  assert.ok(outcomes, 'MANAGEMENT-API.md lists the outcomes counted');
  // "`totals`: the counts over the range and two rates with their bases (`bounce_rate`, …)".
  const rates = /`totals`: the counts over the range and two rates with their bases \(([^)]+)\)/.exec(doc.replace(/\s+/g, ' '));
  assert.ok(rates, 'MANAGEMENT-API.md names the rates of `totals` and their bases');
  const documentedTotals = [...outcomes![1].matchAll(/`([a-z_]+)`/g), ...rates![1].matchAll(/`([a-z_]+)`/g)].map((m) => m[1]);

  dataDir = mkdtempSync(join(tmpdir(), 'relay-docs-stats-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = { RELAY_DATA_DIR: dataDir, PORT: String(port) };
  relay = spawnRelay(['start'], env);
  await waitForReady(base, relay);
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'you@example.com', '--password', 'a long local password', '--domain', 'example.com'], env);
  assert.is(setup.code, 0, setup.stderr);
  const { apiKey, projectId, sessionCookie } = JSON.parse(setup.stdout) as { apiKey: string; projectId: string; sessionCookie: string };
  await postEmail(base, apiKey, { from: 'hello@example.com', to: 'you@example.com', subject: 'Stats', text: 'Hello' });

  let stats: Record<string, unknown> = {};
  await waitUntil(async () => {
    const response = await fetch(`${base}/v1/projects/${projectId}/stats`, { headers: { cookie: sessionCookie } });
    assert.is(response.status, 200);
    stats = (await response.json()) as Record<string, unknown>;
    return (stats.totals as { sent: number }).sent === 1;
  }, 'the email is counted sent');

  assert.equal(Object.keys(stats).sort(), [...documented].sort(), 'ProjectStats fields: the documented list against the answer');
  assert.equal(Object.keys(stats.totals as object).sort(), documentedTotals.sort(), '`totals`: the documented counts and two rates against the answer');
});

test.run();
