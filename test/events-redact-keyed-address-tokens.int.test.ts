// `relay events export --redact` replaces an address by a token keyed by the installation's
// secret key (a MAC of its canonical form under the current key, apps/services/event-reading.ts),
// never by a hash anyone can compute: whoever holds a redacted export cannot confirm a guessed
// address with it, a BCC recipient's included (its copy hard-bounces, the suppressor blocks it,
// and RecipientSuppressed names it in the export). One mailbox still has one token in every
// export of the installation: the command reads the key from RELAY_SECRET_KEY or the data
// directory's key file, and never makes one; in a data directory without its key (a backup made
// --without-secret-key) --redact is refused (exit 1, nothing exported), the export without it
// still runs, and RELAY_SECRET_KEY set to the installation's key gives the same tokens.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { addressTokens } from '../apps/services/event-reading.ts';
import { deliverReport, dsn } from './support/reports.ts';
import { allCaughtUp, exportEvents, returnPathOf, sendOverHttp, startCatalogFlow, waitForEmail, type CatalogFlow } from './support/catalog-flow.ts';
import { waitUntil } from './support/eventually.ts';
import { runRelay } from './support/relay-process.ts';

const test = suite<{ flow: CatalogFlow; redacted: string; emailId: string }>('relay events export --redact: address tokens keyed by the secret key');

const HIDDEN = 'quiet.watcher@two.example.org';

test.before(async (ctx) => {
  ctx.flow = await startCatalogFlow();
  ctx.redacted = '';
  ctx.emailId = '';
});

test.after(async (ctx) => {
  await ctx.flow?.close();
});

/** What an analyst computes for a guess with nothing of Relay's: the unkeyed hash that redaction showed until the tokens were keyed. */
const unkeyed = (address: string): string => `${createHash('sha256').update(address).digest('hex').slice(0, 16)}@${address.split('@')[1]}`;

test('a guessed BCC address cannot be confirmed from the redacted export', async (ctx) => {
  const { flow } = ctx;
  const { id } = await sendOverHttp(flow, {
    from: `hello@${flow.tenant.domain}`, to: ['dora@one.example.org'], bcc: [HIDDEN], subject: 'Board minutes', text: 'hi',
  });
  ctx.emailId = id;
  await waitForEmail(flow, id, (d) => d.status === 'sent', 'is sent');
  // The BCC copy hard-bounces: the suppressor blocks the address across the workspace.
  await deliverReport(flow.inbound.port, returnPathOf(flow, id, HIDDEN), dsn({ recipient: HIDDEN, action: 'failed', status: '5.1.1' }));
  await allCaughtUp(flow);
  await waitUntil(async () => {
    const events = await exportEvents(flow, ['--redact']);
    ctx.redacted = events.map((e) => JSON.stringify(e)).join('\n');
    return events.some((e) => e.type === 'RecipientSuppressed');
  }, 'the BCC recipient\'s block is in the export', 30_000);
  assert.not.ok(ctx.redacted.includes(HIDDEN), 'the address itself is redacted');
  // The block is there under the installation's token of the address (the key the running Relay holds).
  const token = addressTokens(flow.t.ctx.services.secrets)(HIDDEN);
  assert.match(token, /^[0-9a-f]{20}@two\.example\.org$/);
  assert.ok(ctx.redacted.includes(token), `the BCC recipient's block shows its token ${token}:\n${ctx.redacted}`);

  // An analyst's guesses for the organisation, one of them right: none can be tested.
  const guesses = ['watcher@two.example.org', 'q.watcher@two.example.org', HIDDEN, 'quiet@two.example.org'];
  const confirmed = guesses.filter((guess) => ctx.redacted.includes(unkeyed(guess)));
  assert.equal(confirmed, [], `the redacted export confirms a guessed address by its unkeyed sha256: ${confirmed.join(', ')}`);
});

test('in a data directory without its key, --redact is refused; the export without it runs, and RELAY_SECRET_KEY gives the same tokens', async ({ flow, redacted, emailId }) => {
  assert.ok(redacted !== '' && emailId !== '', 'the first test exported');
  const copy = join(mkdtempSync(join(tmpdir(), 'relay-redact-nokey-')), 'data');
  try {
    const backup = await runRelay(['backup', copy, '--without-secret-key'], { RELAY_DATA_DIR: flow.dataDir });
    assert.is(backup.code, 0, backup.stderr);

    const refused = await runRelay(['events', 'export', '--redact'], { RELAY_DATA_DIR: copy });
    assert.is(refused.code, 1, `${refused.stdout}\n${refused.stderr}`);
    assert.is(refused.stdout, '', 'nothing exported');
    assert.match(refused.stderr, /--redact/);
    assert.match(refused.stderr, /RELAY_SECRET_KEY/);
    // The same refusal for `relay events --redact`.
    const refusedRead = await runRelay(['events', '--redact'], { RELAY_DATA_DIR: copy });
    assert.is(refusedRead.code, 1, refusedRead.stderr);
    assert.is(refusedRead.stdout, '');

    const clear = await runRelay(['events', 'export'], { RELAY_DATA_DIR: copy });
    assert.is(clear.code, 0, clear.stderr);
    assert.ok(clear.stdout.includes(`email-${emailId}`), 'the export without --redact runs on the copy');

    // The installation's key, given as RELAY_SECRET_KEY: the tokens of the first export.
    const key = readFileSync(join(flow.dataDir, 'secret.key'), 'utf8').trim();
    const keyed = await runRelay(['events', 'export', '--redact'], { RELAY_DATA_DIR: copy, RELAY_SECRET_KEY: key });
    assert.is(keyed.code, 0, keyed.stderr);
    const token = addressTokens(flow.t.ctx.services.secrets)(HIDDEN);
    assert.ok(keyed.stdout.includes(token), `the token ${token} under RELAY_SECRET_KEY:\n${keyed.stdout}`);
    assert.not.ok(keyed.stdout.includes(HIDDEN));
  } finally {
    rmSync(join(copy, '..'), { recursive: true, force: true });
  }
});

test.run();
