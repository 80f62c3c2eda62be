// DKIM key rotation through the real API, against a DNS server the test starts: a domain verified
// through DNS starts a rotation (a new key under a new selector, its record to publish), mail
// goes on being signed with the old key until a verify finds the new record, then with the new
// one; both checked by mailauth's verifier (what a receiver does) asking the same DNS server. The
// re-check asks for the active selector, and completes a rotation whose new record DNS shows.
// Cancelling, a second start (409) and selectors.
import { createPublicKey, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { resealDkimKeys } from '../apps/services/dkim-key-vault.ts';
import { recheckDomains } from '../apps/services/domain-recheck.ts';
import { domainsOf, type DomainView, type RecheckResult, type RotationCheckResult } from '../apps/services/management/domains.ts';
import { loadSecretKeys, SecretBox } from '../infra/secrets/secret-box.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { dkimResults, waitForDetail } from './support/delivery.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

const HOUR = 3_600_000;
const MAIL_HOST = 'mx.relay.test';

interface Ctx {
  dns: TestDnsServer;
  t: TestApp;
  owner: Caller;
  projectId: string;
  workspaceId: string;
  /** An API key of the (development) project: it sends to the domain's own addresses. */
  secret: string;
}

/** What a customer who followed the instructions publishes. */
const published = (records: DomainView['records']): ZoneRecord[] => records.map((r): ZoneRecord =>
  r.type === 'MX' ? { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } } : { name: r.name, type: 'TXT', data: r.txtStrings ?? r.value });

const dkimName = (selector: string, domain: string) => `${selector}._domainkey.${domain}`;

async function verifiedDomain(ctx: Ctx, name: string): Promise<DomainView> {
  const created = await call(ctx.t, 'POST', `/v1/workspaces/${ctx.workspaceId}/domains`, { as: ctx.owner, body: { name } });
  assert.is(created.statusCode, 201, created.body);
  const domain = created.json() as DomainView;
  ctx.dns.setZone(published(domain.records));
  const verified = await call(ctx.t, 'POST', `/v1/domains/${domain.id}/verify`, { as: ctx.owner });
  assert.is(verified.json().status, 'verified', verified.body);
  assert.is((await call(ctx.t, 'POST', `/v1/domains/${domain.id}/projects/${ctx.projectId}`, { as: ctx.owner })).statusCode, 200);
  return verified.json() as DomainView;
}

/** Sent through the API and the pipeline to the outbox: the selector its DKIM signature names, once mailauth passed it against the test's DNS. */
async function sentSelector(ctx: Ctx, domain: string): Promise<string> {
  const response = await ctx.t.app.inject({
    method: 'POST', url: '/v1/emails', headers: { authorization: `Bearer ${ctx.secret}` },
    payload: { from: `app@${domain}`, to: `you@${domain}`, subject: 'signed by which key?', text: 'hi' },
  });
  assert.is(response.statusCode, 202, response.body);
  const id = response.json().id as string;
  await waitForDetail(ctx.t, ctx.secret, id, (d) => d.status === 'sent', 'is sent', 15_000);
  const results = await dkimResults(ctx.dns, readFileSync(join(ctx.t.config.dataDir, 'outbox', `${id}.eml`)));
  assert.is(results.length, 1);
  assert.is(results[0].status.result, 'pass', results[0].status.comment ?? results[0].info);
  return results[0].selector as string;
}

const rotate = (ctx: Ctx, domain: DomainView, body?: unknown) => call(ctx.t, 'POST', `/v1/domains/${domain.id}/dkim-rotation`, { as: ctx.owner, ...(body === undefined ? {} : { body }) });
const cancel = (ctx: Ctx, domain: DomainView) => call(ctx.t, 'DELETE', `/v1/domains/${domain.id}/dkim-rotation`, { as: ctx.owner });
const verify = async (ctx: Ctx, domain: DomainView) => {
  const response = await call(ctx.t, 'POST', `/v1/domains/${domain.id}/verify`, { as: ctx.owner });
  assert.is(response.statusCode, 200, response.body);
  return response.json() as DomainView;
};

/** A re-check pass as the retention part runs it, `laterMs` from now: the DKIM names it asked DNS about, and what it found. */
async function recheckPass(ctx: Ctx, domain: DomainView, laterMs: number): Promise<{ asked: string[]; result: RecheckResult | undefined; rotation: RotationCheckResult | undefined }> {
  const from = ctx.dns.queries.length;
  let result: RecheckResult | undefined;
  let rotation: RotationCheckResult | undefined;
  await recheckDomains({
    documents: ctx.t.ctx.documents, config: ctx.t.config, dns: ctx.t.ctx.services.dns, policy: ctx.t.config.domainRecheck,
    now: () => new Date(ctx.t.clock.now().getTime() + laterMs),
    onRechecked: (r) => { if (r.domain._id === domain.id) result = r; },
    onRotationChecked: (r) => { if (r.domain._id === domain.id) rotation = r; },
  });
  const asked = ctx.dns.queries.slice(from).map((q) => q.name.toLowerCase()).filter((name) => name.includes(`._domainkey.${domain.name}`));
  return { asked: [...new Set(asked)].sort(), result, rotation };
}

const test = suite<Ctx>('DKIM key rotation');

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
  ctx.t = await startTestApp({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_MAIL_HOST: MAIL_HOST }, { processors: true });
  ctx.owner = await newCaller(ctx.t, 'owner@rotation.test');
  ({ workspaceId: ctx.workspaceId, projectId: ctx.projectId } = await workspaceWithProject(ctx.t, ctx.owner));
  const key = await call(ctx.t, 'POST', `/v1/projects/${ctx.projectId}/api-keys`, { as: ctx.owner, body: { name: 'sender', permissions: ['email:send', 'email:read'] } });
  ctx.secret = key.json().secret;
});

test.after(async (ctx) => {
  await ctx.t.close();
  await ctx.dns.close();
});

test('a rotation signs with the old key until DNS shows the new record, then with the new key; the re-check follows the active selector', async (ctx) => {
  const domain = await verifiedDomain(ctx, 'rotate.example.test');
  const old = domain.dkimSelector;
  const oldZone = published(domain.records);
  assert.is(await sentSelector(ctx, domain.name), old, 'control: mail is signed with the domain\'s key');

  const started = await rotate(ctx, domain);
  assert.is(started.statusCode, 201, started.body);
  const rotation = (started.json() as DomainView).dkimRotation!;
  assert.ok(rotation, started.body);
  assert.is.not(rotation.selector, old);
  assert.match(rotation.selector, /^rr\d{8}[a-z2-7]{6}$/);
  assert.is(rotation.record!.name, dkimName(rotation.selector, domain.name));
  assert.match(rotation.record!.value, /^v=DKIM1; k=rsa; p=[A-Za-z0-9+/]+=*$/);
  assert.is.not(rotation.record!.value, domain.records.find((r) => r.purpose === 'dkim')!.value);
  assert.is((await call(ctx.t, 'GET', `/v1/domains/${domain.id}`, { as: ctx.owner })).json().dkimRotation.selector, rotation.selector);

  // The new key is stored sealed, as the active one is, and it is the key whose record is shown.
  const stored = (await domainsOf(ctx.t.ctx.documents).get(domain.id))!;
  assert.match(stored.dkimRotation!.privateKeySealed, /^v1\./);
  assert.not.match(stored.dkimRotation!.privateKeySealed, /PRIVATE KEY/);
  const pem = ctx.t.ctx.services.secrets.open(stored.dkimRotation!.privateKeySealed, 'dkim-private-key');
  const publicKey = createPublicKey(pem).export({ type: 'spki', format: 'der' }).toString('base64');
  assert.is(rotation.record!.value, `v=DKIM1; k=rsa; p=${publicKey}`);

  assert.is(await sentSelector(ctx, domain.name), old, 'a pending rotation signs with the old key, whose record is published');
  const pendingPass = await recheckPass(ctx, domain, 7 * HOUR);
  assert.equal(pendingPass.asked, [dkimName(old, domain.name), dkimName(rotation.selector, domain.name)].sort(), 'the re-check asks for the active selector, and looks for the new one\'s record');
  assert.is(pendingPass.result?.verdict, 'passed');
  assert.is(pendingPass.rotation?.completed, false, 'the new record is not published yet');
  assert.is(await sentSelector(ctx, domain.name), old, 'a re-check that did not find the new record changes nothing');

  const notYet = await verify(ctx, domain);
  assert.is(notYet.dkimSelector, old);
  assert.is(notYet.dkimRotation?.check?.status, 'missing');
  assert.is(notYet.status, 'verified');
  assert.is(await sentSelector(ctx, domain.name), old, 'a verify that did not find the new record changes nothing');

  ctx.dns.setZone([...oldZone, ...published([rotation.record!])]);
  const done = await verify(ctx, domain);
  assert.is(done.dkimSelector, rotation.selector);
  assert.is(done.dkimRotation, null);
  assert.equal(done.retiredDkimKeys.map((k) => [k.selector, k.recordName]), [[old, dkimName(old, domain.name)]]);
  assert.is(done.status, 'verified');
  const dkim = done.checks!.find((c) => c.purpose === 'dkim')!;
  assert.equal([dkim.name, dkim.status], [dkimName(rotation.selector, domain.name), 'ok']);
  assert.is(done.records.find((r) => r.purpose === 'dkim')!.name, dkimName(rotation.selector, domain.name));

  assert.is(await sentSelector(ctx, domain.name), rotation.selector, 'after completion mail is signed with the new key, and verifies');

  // The retired record taken down: the re-check asks for the new selector only, and passes.
  ctx.dns.setZone(published(done.records));
  const afterPass = await recheckPass(ctx, domain, 7 * HOUR);
  assert.equal(afterPass.asked, [dkimName(rotation.selector, domain.name)]);
  assert.is(afterPass.result?.verdict, 'passed');
});

test('a re-check pass completes a rotation once DNS shows the new record, with no verify asked; a record checked minutes ago is not asked again', async (ctx) => {
  const domain = await verifiedDomain(ctx, 'auto.example.test');
  const old = domain.dkimSelector;
  const started = await rotate(ctx, domain);
  assert.is(started.statusCode, 201, started.body);
  const rotation = (started.json() as DomainView).dkimRotation!;

  // Within the re-check's interval: only the pending record is looked for.
  const first = await recheckPass(ctx, domain, 60_000);
  assert.equal(first.asked, [dkimName(rotation.selector, domain.name)]);
  assert.is(first.result, undefined, 'the active records are not due');
  assert.is(first.rotation?.completed, false);
  const shown = (await call(ctx.t, 'GET', `/v1/domains/${domain.id}`, { as: ctx.owner })).json() as DomainView;
  assert.is(shown.dkimRotation?.check?.status, 'missing', 'the check is shown with the rotation');
  assert.ok(shown.dkimRotation?.checkedAt);

  ctx.dns.setZone([...published(domain.records), ...published([rotation.record!])]);
  const soon = await recheckPass(ctx, domain, 3 * 60_000);
  assert.equal(soon.asked, [], 'checked two minutes before: not asked again');
  assert.is(soon.rotation, undefined);

  const later = await recheckPass(ctx, domain, 7 * 60_000);
  assert.equal(later.asked, [dkimName(rotation.selector, domain.name)]);
  assert.equal(later.rotation && [later.rotation.completed, later.rotation.selector, later.rotation.retiredSelector], [true, rotation.selector, old]);
  const done = (await call(ctx.t, 'GET', `/v1/domains/${domain.id}`, { as: ctx.owner })).json() as DomainView;
  assert.is(done.dkimSelector, rotation.selector);
  assert.is(done.dkimRotation, null);
  assert.is(done.status, 'verified');
  assert.equal(done.retiredDkimKeys.map((k) => k.selector), [old]);
  const dkim = done.checks!.find((c) => c.purpose === 'dkim')!;
  assert.equal([dkim.name, dkim.status], [dkimName(rotation.selector, domain.name), 'ok']);
  assert.is(await sentSelector(ctx, domain.name), rotation.selector, 'mail is signed with the new key, and verifies');

  const after = await recheckPass(ctx, domain, 20 * 60_000);
  assert.equal(after.asked, [], 'nothing pending any more');
});

test('a second start while one is pending is 409 in the error envelope; cancel drops the new key, even once its record is published', async (ctx) => {
  const domain = await verifiedDomain(ctx, 'cancel.example.test');
  const first = await rotate(ctx, domain);
  assert.is(first.statusCode, 201, first.body);
  const pending = (first.json() as DomainView).dkimRotation!;

  const second = await rotate(ctx, domain, { selector: 'another' });
  assert.is(second.statusCode, 409, second.body);
  assert.is(errorCode(second), 'conflict');
  assert.match(second.json().error.message, pending.selector);
  assert.is((await call(ctx.t, 'GET', `/v1/domains/${domain.id}`, { as: ctx.owner })).json().dkimRotation.selector, pending.selector, 'the pending rotation stands');

  ctx.dns.setZone([...published(domain.records), ...published([pending.record!])]);
  const cancelled = await cancel(ctx, domain);
  assert.is(cancelled.statusCode, 200, cancelled.body);
  assert.is(cancelled.json().dkimRotation, null);
  assert.is(cancelled.json().dkimSelector, domain.dkimSelector);
  assert.is((await domainsOf(ctx.t.ctx.documents).get(domain.id))!.dkimRotation, null, 'the new key is gone');
  assert.is((await verify(ctx, domain)).dkimSelector, domain.dkimSelector, 'a cancelled rotation never completes');

  const again = await cancel(ctx, domain);
  assert.is(again.statusCode, 404, again.body);
  assert.is(errorCode(again), 'not_found');
});

test('an operator-given selector is used as given, checked with the label rules, and never one the domain used', async (ctx) => {
  const domain = await verifiedDomain(ctx, 'selector.example.test');
  for (const [selector, status] of [['bad_label', 400], [domain.dkimSelector, 400], ['-x', 400], ['a'.repeat(64), 400]] as const) {
    const refused = await rotate(ctx, domain, { selector });
    assert.is(refused.statusCode, status, `${selector}: ${refused.body}`);
    assert.is(errorCode(refused), 'validation_error');
  }
  const given = await rotate(ctx, domain, { selector: 'S2027.Q1' });
  assert.is(given.statusCode, 201, given.body);
  assert.is(given.json().dkimRotation.selector, 's2027.q1');
  assert.is(given.json().dkimRotation.record.name, dkimName('s2027.q1', domain.name));
});

test('a new RELAY_SECRET_KEY re-seals a pending rotation\'s key beside the active one, so the rotation can still complete', async (ctx) => {
  const domain = await verifiedDomain(ctx, 'reseal.example.test');
  assert.is((await rotate(ctx, domain)).statusCode, 201);
  const documents = ctx.t.ctx.documents;
  const before = (await domainsOf(documents).get(domain.id))!;
  const oldBox = ctx.t.ctx.services.secrets;
  const keyOf = async (secretKey: string, previousKeys: string[] = []) => new SecretBox(await loadSecretKeys({ secretKey, previousKeys, dataDir: null }));
  const newKey = randomBytes(32).toString('base64');
  const oldKey = (await loadSecretKeys({ dataDir: ctx.t.config.dataDir })).current.toString('base64');
  const outcome = await resealDkimKeys(documents, await keyOf(newKey, [oldKey]));
  assert.equal(outcome.unopenable, []);
  const after = (await domainsOf(documents).get(domain.id))!;
  const newOnly = await keyOf(newKey);
  const open = (sealed: string, box: SecretBox) => box.open(sealed, 'dkim-private-key');
  assert.is(open(after.dkimRotation!.privateKeySealed, newOnly), open(before.dkimRotation!.privateKeySealed, oldBox), 'the pending key opens under the new secret alone');
  assert.is(open(after.dkimPrivateKeySealed, newOnly), open(before.dkimPrivateKeySealed, oldBox));
  assert.is(after.dkimRotation!.selector, before.dkimRotation!.selector);
});

test.run();
