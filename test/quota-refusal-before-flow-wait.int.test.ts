// A send that its monthly allowance refuses is answered at once, also while admission flow
// control holds sends because the pipeline is behind: it does not wait the longest wait
// (RELAY_ADMISSION_MAX_WAIT_MS) for a 429 it was always going to get, holding an undecided rate
// slot that other API processes count as taken. The API process knows such a refusal without a
// read from the month's usage as it last folded it (usage only grows); it does not claim to know
// where the charge could still pass: a month it has not folded, an email id derived from an
// Idempotency-Key that may have been charged in the month before, a month's last minute (a send
// that waited may be charged in the next month).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startRelay, type RunningRelay } from '../apps/relay.ts';
import { eventsTopic, groupOf } from '../apps/pipeline/topics.ts';
import { slowestGroupBacklog } from '../apps/services/admission-flow.ts';
import { projectsOf } from '../apps/services/management/projects.ts';
import { setWorkspaceAllowances } from '../apps/services/management/workspaces.ts';
import { UsageLedger, type RecipientCharge } from '../apps/services/usage-ledger.ts';
import { RelayError } from '../domain/errors.ts';
import { DEFAULT_ALLOWANCES, monthEnd, monthOf, monthStart, usageStreamId } from '../domain/usage/quota.ts';
import { loadConfig } from '../infra/config.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { parseMetrics, sumOf } from './support/metrics.ts';
import { runRelay } from './support/relay-process.ts';

const message = (n: number) => ({ from: 'hello@example.test', to: `you${n}@example.test`, subject: `Flow ${n}`, text: 'Hi' });

/** The real clock, or 10 minutes on within 5 minutes of a month's turn: no send of the test falls in a month's first or last minute. */
function clockAwayFromTurns(): () => Date {
  const now = new Date();
  const month = monthOf(now);
  const nearTurn = now.getTime() - monthStart(month).getTime() < 300_000 || monthEnd(month).getTime() - now.getTime() < 300_000;
  const offset = nearTurn ? 600_000 : 0;
  return () => new Date(Date.now() + offset);
}

test('with the pipeline behind, sends past the workspace allowance are refused at once, with or without an Idempotency-Key', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-quota-flow-'));
  const env = { RELAY_DATA_DIR: dataDir };
  let relay: RunningRelay | undefined;
  try {
    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], env);
    assert.is(setup.code, 0, setup.stderr);
    const { apiKey, projectId } = JSON.parse(setup.stdout);
    // The API alone: the projector's group is behind by every email sent (no projector runs).
    relay = await startRelay(loadConfig({
      ...env, PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', RELAY_LOG_LEVEL: 'error', RELAY_METRICS: 'on',
      RELAY_ADMISSION_BACKLOG_GROUPS: 'projector', RELAY_ADMISSION_BACKLOG: '1', RELAY_ADMISSION_MAX_WAIT_MS: '1000',
    }), ['api'], { now: clockAwayFromTurns() });
    const post = (n: number, idempotencyKey?: string) => fetch(`${relay!.url}/v1/emails`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
      body: JSON.stringify(message(n)),
    });
    const waits = async () => sumOf(parseMetrics(await relay!.metrics.render()), 'relay_admission_flow_waits_total', {});
    const { logNamespace } = loadConfig(env);
    for (let n = 0; (await slowestGroupBacklog(relay.stores.log, eventsTopic(logNamespace), [groupOf(logNamespace, 'projector')])) <= 1; n++) {
      assert.is((await post(n)).status, 202);
    }
    // Until the gate reads the backlog again (at most every 50 ms), sends go ahead at once; then
    // one within the allowance waits its longest wait, and is admitted.
    for (let n = 50; (await waits()) === 0; n++) assert.is((await post(n, `within-allowance-${n}`)).status, 202);
    assert.is(await waits(), 1);

    // The operator stops the workspace's sending for the month (as `relay workspace quota --recipients 0` does).
    const project = await projectsOf(relay.stores.documents).get(projectId);
    await setWorkspaceAllowances(relay.stores.documents, project!.workspaceId, { workspaceRecipients: 0 });

    for (const [n, idempotencyKey] of [[98, undefined], [99, 'past-allowance']] as const) {
      const refused = await post(n, idempotencyKey);
      assert.is(refused.status, 429);
      assert.is(((await refused.json()) as { error: { code: string } }).error.code, 'quota_exceeded');
    }
    assert.is(await waits(), 1, 'a send past the allowance waited for the pipeline before its refusal');
  } finally {
    await relay?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('the ledger knows a refusal without a read only where it is certain', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-quota-certain-'));
  const store = new SqliteEventStore(join(dir, 'events.db'));
  const ledger = new UsageLedger(store);
  const allowances = { ...DEFAULT_ALLOWANCES, workspaceRecipients: 3 };
  const charge = (emailId: string, iso: string, idempotent: boolean): RecipientCharge => ({
    workspaceId: 'ws_certain', emailId, fingerprint: 'f', apiKeyId: 'key_1', developmentKey: false, recipients: 1,
    allowances, at: new Date(iso), origin: { correlationId: 'test', causationId: 'test' }, idempotent,
  });
  const refusalOf = async (promise: Promise<void>) => promise.then(() => undefined, (error: unknown) => error);
  const mid = '2026-11-22T10:00:00.000Z';
  try {
    // An email id charged in October whose email was never stored: its retry in November adds nothing.
    await store.append(usageStreamId('ws_certain', '2026-10'), [{
      id: randomUUID(), type: 'RecipientsCharged',
      data: { emailId: 'em_october', fingerprint: 'f', apiKeyId: 'key_1', developmentKey: false, recipients: 1, occurredAt: '2026-10-31T12:00:00.000Z' },
      metadata: { correlationId: 'test', causationId: 'test', schemaVersion: 1 },
    }], { expectedRevision: 'no_stream' });

    assert.is(ledger.certainRefusal({ ...charge('em_plain0', mid, false), allowances: { ...allowances, workspaceRecipients: 0 } }), undefined, 'November is not folded here yet');
    await ledger.charge({ ...charge('em_plain1', mid, false), recipients: 3 });
    const known = ledger.certainRefusal(charge('em_plain2', mid, false));
    const charged = await refusalOf(ledger.charge(charge('em_plain2', mid, false)));
    assert.instance(known, RelayError);
    assert.equal([known!.code, known!.details], [(charged as RelayError).code, (charged as RelayError).details], 'the refusal the charge gives');

    assert.is(ledger.certainRefusal(charge('em_keyed1', mid, true)), undefined, 'October is not final here yet');
    assert.instance(await refusalOf(ledger.charge(charge('em_keyed1', mid, true))), RelayError);
    assert.instance(ledger.certainRefusal(charge('em_keyed2', mid, true)), RelayError, 'October is final here, without em_keyed2');
    assert.is(ledger.certainRefusal(charge('em_october', mid, true)), undefined, 'charged in October');
    assert.is(await refusalOf(ledger.charge(charge('em_october', mid, true))), undefined, 'nothing to add: it passes');
    assert.is(ledger.certainRefusal(charge('em_plain3', '2026-11-30T23:59:30.000Z', false)), undefined, 'in the month\'s last minute');
  } finally {
    ledger.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
