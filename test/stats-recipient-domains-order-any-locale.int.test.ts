// GET /v1/projects/:id/stats orders `recipient_domains` (and, with groupBy, a period's `series`
// points) and cuts the list at 50 in an order of the data alone, whatever locale the API process
// starts under: with String#localeCompare, a process under da_DK (where "aa" is the letter å,
// after "z") dropped at the cut a domain an English one showed, and two API processes of one
// deployment answered differently. The test runs itself under LANG=LC_ALL=da_DK.UTF-8 (Node's
// ICU takes its default locale from the environment at start).
import { spawnSync } from 'node:child_process';

const LOCALE = 'da_DK.UTF-8';
if (Intl.DateTimeFormat().resolvedOptions().locale !== 'da-DK') {
  const run = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit', env: { ...process.env, LANG: LOCALE, LC_ALL: LOCALE },
  });
  process.exit(run.status ?? 1);
}

const { randomBytes } = await import('node:crypto');
const { mkdtempSync, rmSync } = await import('node:fs');
const { tmpdir } = await import('node:os');
const { join } = await import('node:path');
const { suite } = await import('uvu');
const assert = await import('uvu/assert');
const { emailStreamId } = await import('../domain/email/events.ts');
const { startTestApp } = await import('./support/app.ts');
const { accepted, attempted, claimed, outcome, toNewEvent } = await import('./support/email-events.ts');
const { waitUntil } = await import('./support/eventually.ts');
const { call, newCaller, workspaceWithProject } = await import('./support/management.ts');

const test = suite('stats: failing recipient domains ordered by the server\'s locale');
const dataDir = mkdtempSync(join(tmpdir(), 'relay-stats-locale-'));
let t: Awaited<ReturnType<typeof startTestApp>>;
let owner: Awaited<ReturnType<typeof newCaller>>;
let projectId = '';

// 51 domains, each with one hard bounce: a tie at the cut of 50. In code-point order (and under
// the default locale) aarhus.example comes first; in Danish collation "aa" is å, after "z".
const DOMAINS = ['aarhus.example', ...Array.from({ length: 50 }, (_, i) => `b${String(i).padStart(2, '0')}.example`)];
const RANGE = 'from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z&granularity=day';

const bounced = (emailId: string, address: string) => [
  accepted({ emailId, projectId, to: [address], toAddresses: [address], cc: [], ccAddresses: [], bccCount: 0, recipientCount: 1 }),
  claimed(),
  attempted([outcome(0, 'hard_bounced', { address, smtpCode: 550, enhancedCode: '5.1.1', response: '550 5.1.1 user unknown' })]),
];

test.before(async () => {
  t = await startTestApp({}, { processors: ['deliverability'], dataDir });
  owner = await newCaller(t, `owner-${randomBytes(3).toString('hex')}@example.test`);
  ({ projectId } = await workspaceWithProject(t, owner, 'production'));
  for (const [i, domain] of DOMAINS.entries()) {
    const emailId = `em_locale${String(i).padStart(2, '0')}`;
    await t.stores.events.append(emailStreamId(emailId), bounced(emailId, `user@${domain}`).map(toNewEvent), { expectedRevision: 'no_stream' });
  }
});

test.after(async () => {
  await t.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function stats(query: string) {
  const response = await call(t, 'GET', `/v1/projects/${projectId}/stats?${query}`, { as: owner });
  assert.is(response.statusCode, 200, response.body);
  return response.json();
}

test('the 50 domains shown, and their order, are those of the data, not of the server\'s locale', async () => {
  assert.is(Intl.DateTimeFormat().resolvedOptions().locale, 'da-DK', 'the test runs under a Danish locale');
  await waitUntil(async () => (await stats(RANGE)).totals.hard_bounced === DOMAINS.length, 'every bounce counted', 20_000);
  const shown: string[] = (await stats(RANGE)).recipient_domains.map((d: { domain: string }) => d.domain);
  assert.is(shown.length, 50);
  // Every domain failed once: ties, broken in code-point order, the order the default locale gives too.
  assert.equal(shown, [...DOMAINS].sort().slice(0, 50), 'ties in code-point order: aarhus.example first, b49.example past the cut');
});

test('with groupBy, a period\'s points are in the same order whatever the server\'s locale', async () => {
  const series: Array<{ group: string }> = (await stats(`${RANGE}&groupBy=recipient_domain`)).series;
  const groups = series.map((p) => p.group);
  assert.equal(groups, [...DOMAINS].sort(), 'one day, its groups in code-point order');
});

test.run();
