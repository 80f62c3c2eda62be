// With the embedded default (`relay start`, RELAY_DELIVERY=outbox), a SIGKILL while the sender
// writes a burst into the outbox leaves claims whose transaction start is durable and whose
// write was queued on the outbox thread, half done (only temporary copies, or the .eml without
// its envelope entry) or done but not recorded. When the claim's grace ends, recovery asks the
// outbox what became of each (MailTransport.settle): the outbox is Relay's own provider and
// places its files by link and rename, the envelope entry last, so it knows exactly. A recipient
// its envelope names is `sent`, as a normal send records it; any other was not written and is
// retried, and the retry's write completes what the dead one left. So no email ends
// `delivery_unknown` (the contract keeps that for mail the provider may have accepted:
// docs/delivery.md, `outbox`), none is lost, and none is in the outbox twice.
//
// Kill moment (a positive marker, not a timer): the first `<emailId>.envelope.json` placed in
// the outbox directory during a burst of one-recipient sends; the writes queued or in progress
// with it at that instant are the ones cut off. Repeated three times, restarting on the same
// data directory each time; the retry scale makes the claim grace 1.2 s. That the recovery ran
// at all is shown by the starting senders' warning about claims found open inside a transaction.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, watch } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { freePort, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';

const test = suite('outbox: after a crash, recovery records what the outbox holds');

const dataDir = mkdtempSync(join(tmpdir(), 'relay-outbox-crash-'));
const outbox = join(dataDir, 'outbox');
let apiKey = '';
let port = 0;
let relay: RelayProcess | null = null;
const started: RelayProcess[] = [];

test.before(async () => {
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'owner@example.test', '--password', 'a long enough password',
    '--workspace', 'Crash', '--project', 'web', '--environment', 'production', '--activate', '--domain', 'example.test'], { RELAY_DATA_DIR: dataDir });
  assert.is(setup.code, 0, setup.stderr);
  apiKey = JSON.parse(setup.stdout).apiKey;
  port = await freePort();
  mkdirSync(outbox, { recursive: true, mode: 0o700 });
});

test.after(async () => {
  await relay?.kill();
  rmSync(dataDir, { recursive: true, force: true });
});

async function start(): Promise<RelayProcess> {
  relay = spawnRelay(['start'], { RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_DELIVERY: 'outbox', RELAY_DELIVERY_RETRY_SCALE: '0.001' });
  started.push(relay);
  await waitForReady(`http://127.0.0.1:${port}`, relay, 60_000);
  return relay;
}

async function get(path: string): Promise<any> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: `Bearer ${apiKey}` } });
  assert.is(response.status, 200, `GET ${path}`);
  return response.json();
}

const OPEN_CLAIMS = 'open delivery claims found at start (left by a sender that stopped, or held by another that runs)';
/** How many claims the starting senders found open inside a transaction: those recovery settles. */
const claimsFoundInTransaction = (): number => started.flatMap((process) => process.output().split('\n'))
  .filter((line) => line.includes(`"msg":"${OPEN_CLAIMS}"`))
  .reduce((sum, line) => sum + (JSON.parse(line).inTransaction?.count ?? 0), 0);

/** Sends `count` one-recipient emails at once; the ids answered 202 (a request the kill cut off has none). */
async function burst(round: number, count: number): Promise<string[]> {
  const answers = await Promise.all(Array.from({ length: count }, async (_, i) => {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/v1/emails`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ from: 'hello@example.test', to: `r${round}-${i}@example.net`, subject: `crash ${round}-${i}`, text: 'hello' }),
      });
      return response.status === 202 ? ((await response.json()) as { id: string }).id : null;
    } catch {
      return null;
    }
  }));
  return answers.filter((id): id is string => id !== null);
}

test('a kill -9 mid-burst leaves no email delivery_unknown: each ends sent, written to the outbox once', async () => {
  const accepted: string[] = [];
  for (let round = 0; round < 3; round++) {
    const running = await start();
    let killed = false;
    // The first message of the burst placed in the outbox: kill at once, while the others are being written.
    const watcher = watch(outbox, (_event, name) => {
      if (!killed && name && !name.startsWith('.') && name.endsWith('.envelope.json')) {
        killed = true;
        running.child.kill('SIGKILL');
      }
    });
    try {
      accepted.push(...await burst(round, 40));
      await waitUntil(() => killed, 'a message of the burst placed in the outbox', 60_000);
    } finally {
      watcher.close();
    }
    await running.exited;
  }
  await start();
  // Settled: every email answered 202 is final (the claims left open are recovered after 1.2 s).
  const final = new Map<string, { status: string; failureCode: string | null; to: string }>();
  await waitUntil(async () => {
    for (const id of accepted) {
      if (final.has(id)) continue;
      const email = await get(`/v1/emails/${id}`);
      if (email.status === 'sent' || email.status === 'failed') final.set(id, { status: email.status, failureCode: email.failureCode, to: email.to[0] });
    }
    return final.size === accepted.length;
  }, 'every accepted email final', 120_000);

  assert.ok(claimsFoundInTransaction() > 0, 'the kills left claims open inside a transaction (the case recovery settles)');
  const notSent = [...final].filter(([, email]) => email.status !== 'sent').map(([id, email]) => `${id}: ${email.status}/${email.failureCode}`);
  assert.equal(notSent, [], `of ${accepted.length} accepted emails, these did not end sent`);
  for (const [id, email] of final) {
    assert.ok(existsSync(join(outbox, `${id}.eml`)), `${id}.eml is in the outbox`);
    const envelopes = JSON.parse(readFileSync(join(outbox, `${id}.envelope.json`), 'utf8')) as Array<{ recipients: string[] }>;
    assert.equal(envelopes.map((e) => e.recipients), [[email.to]], `${id}: one transaction, to its recipient`);
  }
});

test.run();
