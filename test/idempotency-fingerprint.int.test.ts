// The idempotency fingerprint is kept in every EmailAccepted/EmailSuppressed event forever,
// beside the plaintext fields. A plain hash of the canonical body would let anyone holding the
// events test guesses about the sealed body and BCC offline; a MAC under Relay's secret does
// not. Replays must keep working for streams written with the old sha256 fingerprint and with
// a previous key (rotation).
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openServices, openStores, type Stores } from '../apps/runtime.ts';
import { admitEmail, emailIdFor, type AdmissionDeps, type Sender } from '../apps/services/admission.ts';
import { canonicalJson } from '../apps/services/canonical-json.ts';
import { connectDomain, createDomain, markDomainVerified } from '../apps/services/management/domains.ts';
import { createProject } from '../apps/services/management/projects.ts';
import { createWorkspace, setWorkspaceActivation } from '../apps/services/management/workspaces.ts';
import { prepareStores } from '../apps/services/prepare-stores.ts';
import type { Services } from '../apps/services/services.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { normalizeSendRequest } from '../domain/email/send-request.ts';
import { RelayError } from '../domain/errors.ts';
import { loadConfig } from '../infra/config.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import { DEFAULT_ALLOWANCES } from '../domain/usage/quota.ts';

const test = suite('idempotency fingerprint');
const FINGERPRINT_PURPOSE = 'idempotency-fingerprint';

interface Context { dir: string; stores: Stores; services: Services; sender: Sender }
const ctx = {} as Context;

test.before(async () => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-fingerprint-'));
  const config = loadConfig({ RELAY_DATA_DIR: ctx.dir });
  ctx.stores = await openStores(config);
  ctx.services = await openServices(config, ctx.stores);
  await prepareStores(ctx.stores.documents);
  const now = new Date();
  const owner = { _id: 'usr_fp', email: 'fp@example.test', passwordHash: 'x', createdAt: now.toISOString() };
  const workspaceId = (await createWorkspace(ctx.stores.documents, owner, 'Fingerprints', now)).workspace._id;
  await setWorkspaceActivation(ctx.stores.documents, workspaceId, true, now);
  const project = await createProject(ctx.stores.documents, { workspaceId, name: 'fp', environment: 'production' }, now);
  const domain = await createDomain(ctx.stores.documents, { workspaceId, name: 'fp.example.test' }, now, ctx.services.secrets);
  await markDomainVerified(ctx.stores.documents, domain._id, 'test fixture', now);
  await connectDomain(ctx.stores.documents, domain._id, project._id);
  ctx.sender = { keyId: 'key_fp', projectId: project._id, workspaceId, environment: 'production', allowances: DEFAULT_ALLOWANCES };
});

test.after(async () => {
  await ctx.services.close();
  await ctx.stores.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

const deps = (secrets: AdmissionDeps['secrets']): AdmissionDeps => ({
  emails: ctx.services.emails, documents: ctx.stores.documents, rateLimits: ctx.services.rateLimits, usage: ctx.services.usage, secrets, now: () => new Date(),
});

const bodyWith = (code: string) => ({
  from: 'app@fp.example.test', to: 'ann@fp.example.test', bcc: 'hidden@fp.example.test', subject: 'Your code', text: `Your code is ${code}`,
});

const admit = (secrets: AdmissionDeps['secrets'], body: ReturnType<typeof bodyWith>, idempotencyKey: string) =>
  admitEmail(deps(secrets), ctx.sender, { body, idempotencyKey, send: normalizeSendRequest(body), origin: { correlationId: 'test', causationId: 'test' } });

const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

async function storedFingerprint(idempotencyKey: string): Promise<string> {
  const [event] = await ctx.stores.events.readStream(emailStreamId(emailIdFor(ctx.sender.projectId, idempotencyKey)));
  return (event.data as { fingerprint: string }).fingerprint;
}

async function conflictOf(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (error) {
    assert.instance(error, RelayError);
    return (error as RelayError).code;
  }
  return 'resolved';
}

test('the stored fingerprint is a MAC under the secret: not the sha256 of the body, and no guess can be tested without the key', async () => {
  const body = bodyWith('482913');
  await admit(ctx.services.secrets, body, 'fp-keyed');
  const stored = await storedFingerprint('fp-keyed');
  assert.match(stored, /^[0-9a-f]{64}$/);
  assert.is.not(stored, sha256Hex(canonicalJson(body)), 'not the unkeyed hash of the canonical body');
  assert.is.not(stored, sha256Hex(JSON.stringify(body)));
  assert.is(stored, ctx.services.secrets.mac(FINGERPRINT_PURPOSE, canonicalJson(body)).toString('hex'));
  // Whoever has the events but not the secret: the right guess (BCC and code) does not match.
  const outsider = new SecretBox({ current: randomBytes(32), previous: [] });
  assert.is.not(outsider.mac(FINGERPRINT_PURPOSE, canonicalJson(body)).toString('hex'), stored);
});

test('replay and conflict are unchanged', async () => {
  const body = bodyWith('111111');
  const first = await admit(ctx.services.secrets, body, 'fp-replay');
  const again = await admit(ctx.services.secrets, { ...body }, 'fp-replay');
  assert.is(again.id, first.id);
  assert.ok(again.replayed);
  assert.is(await conflictOf(admit(ctx.services.secrets, bodyWith('222222'), 'fp-replay')), 'idempotency_conflict');
  assert.equal((await ctx.stores.events.readStream(emailStreamId(first.id))).map((e) => e.type), ['EmailAccepted']);
});

test('an email admitted before the change (plain sha256 fingerprint) is still replayed; another body is still a conflict', async () => {
  const box = ctx.services.secrets;
  const legacy = {
    mac: (_purpose: string, data: string | Buffer) => createHash('sha256').update(data).digest(), macVerify: () => false,
    keyId: box.keyId, seal: box.seal.bind(box), open: box.open.bind(box), isSealed: box.isSealed.bind(box),
  };
  const body = bodyWith('333333');
  const first = await admit(legacy, body, 'fp-legacy');
  assert.is(await storedFingerprint('fp-legacy'), sha256Hex(canonicalJson(body)), 'the fixture is an old-style stream');
  const retry = await admit(ctx.services.secrets, body, 'fp-legacy');
  assert.is(retry.id, first.id);
  assert.ok(retry.replayed);
  assert.is(await conflictOf(admit(ctx.services.secrets, bodyWith('444444'), 'fp-legacy')), 'idempotency_conflict');
  assert.is((await ctx.stores.events.readStream(emailStreamId(first.id))).length, 1);
});

test('after a key rotation a retry of an email admitted with the previous key is a replay', async () => {
  const oldKey = randomBytes(32);
  const newKey = randomBytes(32);
  const body = bodyWith('555555');
  const first = await admit(new SecretBox({ current: oldKey, previous: [] }), body, 'fp-rotation');
  const rotated = new SecretBox({ current: newKey, previous: [oldKey] });
  const retry = await admit(rotated, body, 'fp-rotation');
  assert.is(retry.id, first.id);
  assert.ok(retry.replayed);
  assert.is(await conflictOf(admit(rotated, bodyWith('666666'), 'fp-rotation')), 'idempotency_conflict');
});

test.run();
