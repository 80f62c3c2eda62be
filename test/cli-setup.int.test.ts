// `relay setup` and the operator commands, run as the real CLI process on a fresh data
// directory; the results are then checked in-process against the same stores.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { authenticateApiKey } from '../apps/api/auth/bearer.ts';
import { openStores, type Stores } from '../apps/runtime.ts';
import { resolveSession } from '../apps/services/management/sessions.ts';
import { authenticateUser } from '../apps/services/management/users.ts';
import { RelayError } from '../domain/errors.ts';
import type { SendingDomain } from '../domain/management.ts';
import { loadConfig } from '../infra/config.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { DEFAULT_ALLOWANCES } from '../domain/usage/quota.ts';

const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));

interface Run { code: number | null; stdout: string; stderr: string }

function relay(args: string[], env: Record<string, string>, stdin?: string): Promise<Run> {
  // Only what the test says: no RELAY_* leaking in from the shell that runs the tests.
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RELAY_')));
  const child = spawn(process.execPath, [MAIN, ...args], {
    env: { ...base, RELAY_LOG_LEVEL: 'silent', ...env },
    stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (stdin !== undefined) child.stdin!.end(stdin);
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

function json(run: Run): Record<string, unknown> & Record<string, any> {
  try {
    return JSON.parse(run.stdout);
  } catch {
    throw new Error(`stdout is not one JSON object (exit ${run.code}):\n${run.stdout}\nstderr:\n${run.stderr}`);
  }
}

/** Opens the stores of a data dir, runs `work`, closes them (the CLI and the test never hold them at once). */
async function withStores<T>(dataDir: string, work: (stores: Stores) => Promise<T>): Promise<T> {
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
  try {
    return await work(stores);
  } finally {
    await stores.close();
  }
}

interface Ctx { dataDir: string; dns: TestDnsServer }
const cli = suite<Ctx>('relay setup and operator commands');

cli.before.each((ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-cli-'));
});
cli.after.each((ctx) => {
  rmSync(ctx.dataDir, { recursive: true, force: true });
});
cli.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
});
cli.after(async (ctx) => {
  await ctx.dns.close();
});

cli('setup --json --trust-domain prints one JSON object whose key authenticates', async ({ dataDir }) => {
  const run = await relay(['setup', '--json', '--trust-domain', '--email', 'Ops@Acme.test', '--password', 'a good long password', '--domain', 'Acme.test'], { RELAY_DATA_DIR: dataDir });
  assert.is(run.code, 0, run.stderr);
  const out = json(run);
  assert.match(out.apiKey, /^rr_test_[A-Za-z0-9_-]{43}$/);
  assert.is(out.domain, 'acme.test');
  assert.is(out.email, 'ops@acme.test');
  assert.is(out.environment, 'development');
  assert.is(out.domainVerifiedBy, 'operator');
  assert.match(out.sessionCookie, /^rr_session=[A-Za-z0-9_-]{43}$/);
  assert.is(out.password, undefined, 'a given password is never echoed');
  for (const field of ['userId', 'workspaceId', 'projectId', 'domainId', 'keyId']) assert.type(out[field], 'string', field);
  assert.ok(run.stderr.length > 0, 'progress goes to stderr');

  await withStores(dataDir, async ({ documents }) => {
    const principal = await authenticateApiKey({ documents }, `Bearer ${out.apiKey}`);
    assert.equal(principal, {
      keyId: out.keyId, projectId: out.projectId, workspaceId: out.workspaceId, environment: 'development',
      permissions: ['email:send', 'email:read'], workspaceActivated: false, allowances: DEFAULT_ALLOWANCES,
    });
    const domain = await documents.collection<SendingDomain>('domains').get(out.domainId);
    assert.is(domain!.status, 'verified');
    assert.is(domain!.verifiedBy, 'operator');
    assert.match(domain!.operatorNote!, /trust-domain/);
    assert.equal(domain!.projectIds, [out.projectId]);
    const session = await resolveSession(documents, out.sessionCookie.split('=')[1], new Date());
    assert.is(session?.user._id, out.userId);
    assert.is((await authenticateUser(documents, 'ops@acme.test', 'a good long password'))._id, out.userId);
  });
});

cli('running setup again reuses user, workspace, project and domain and adds a key', async ({ dataDir }) => {
  const args = ['setup', '--json', '--trust-domain', '--email', 'ops@acme.test', '--password', 'a good long password'];
  const first = json(await relay(args, { RELAY_DATA_DIR: dataDir }));
  const secondRun = await relay(args, { RELAY_DATA_DIR: dataDir });
  assert.is(secondRun.code, 0, secondRun.stderr);
  const second = json(secondRun);
  for (const field of ['userId', 'workspaceId', 'projectId', 'domainId']) assert.is(second[field], first[field], field);
  assert.is.not(second.keyId, first.keyId);
  assert.is.not(second.apiKey, first.apiKey);
  assert.is(first.domain, 'example.test', 'the default domain');
  await withStores(dataDir, async ({ documents }) => {
    assert.ok(await authenticateApiKey({ documents }, `Bearer ${first.apiKey}`));
    assert.ok(await authenticateApiKey({ documents }, `Bearer ${second.apiKey}`));
    assert.is(await documents.collection('workspaces').count(), 1);
    assert.is(await documents.collection('domains').count(), 1);
  });
});

cli('without a verifiable domain or --trust-domain setup prints the records and exits non-zero', async ({ dataDir, dns }) => {
  dns.setZone([]);
  const env = { RELAY_DATA_DIR: dataDir, RELAY_DNS_SERVERS: dns.address, RELAY_MAIL_HOST: 'mx.relay.test' };
  const run = await relay(['setup', '--json', '--email', 'ops@acme.test', '--password', 'a good long password', '--domain', 'dns.test'], env);
  assert.is(run.code, 3, run.stderr);
  const out = json(run);
  assert.is(out.ok, false);
  assert.is(out.error, 'domain_not_verified');
  assert.is(out.apiKey, undefined);
  const records = out.records as Array<{ name: string; type: 'TXT' | 'MX'; value: string; priority?: number; purpose: string; txtStrings?: string[] }>;
  assert.equal(records.map((r) => r.purpose).sort(), ['dkim', 'dmarc', 'mail_from_mx', 'mail_from_spf']);
  assert.ok(dns.queries.some((q) => q.name.endsWith('dns.test')), 'DNS was asked');

  // Publish what it asked for; the next run verifies through DNS and finishes.
  dns.setZone(records.map((r): ZoneRecord => r.type === 'MX'
    ? { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } }
    : { name: r.name, type: 'TXT', data: r.txtStrings ?? r.value }));
  const again = await relay(['setup', '--json', '--email', 'ops@acme.test', '--domain', 'dns.test'], env);
  assert.is(again.code, 0, again.stderr);
  const done = json(again);
  assert.is(done.domainVerifiedBy, 'dns');
  assert.is(done.domainId, out.domainId);
  await withStores(dataDir, async ({ documents }) => {
    assert.is((await authenticateApiKey({ documents }, `Bearer ${done.apiKey}`)).projectId, done.projectId);
  });
});

cli('a production setup needs activation: the key is refused until the operator activates', async ({ dataDir }) => {
  const env = { RELAY_DATA_DIR: dataDir };
  const run = await relay(['setup', '--json', '--trust-domain', '--environment', 'production', '--project', 'Live'], env);
  assert.is(run.code, 0, run.stderr);
  const out = json(run);
  assert.match(out.apiKey, /^rr_live_/);
  assert.type(out.password, 'string', 'a generated password is printed once');
  assert.match(run.stderr, /not activated/);
  const refused = await withStores(dataDir, ({ documents }) => authenticateApiKey({ documents }, `Bearer ${out.apiKey}`).catch((e: RelayError) => e.code));
  assert.is(refused, 'production_not_enabled');

  const activate = await relay(['workspace', 'activate', out.workspaceId], env);
  assert.is(activate.code, 0, activate.stderr);
  const principal = await withStores(dataDir, ({ documents }) => authenticateApiKey({ documents }, `Bearer ${out.apiKey}`));
  assert.is(principal.workspaceActivated, true);

  assert.is((await relay(['workspace', 'deactivate', out.workspaceId], env)).code, 0);
  const again = await withStores(dataDir, ({ documents }) => authenticateApiKey({ documents }, `Bearer ${out.apiKey}`).catch((e: RelayError) => e.code));
  assert.is(again, 'production_not_enabled');
});

cli('user create takes the password from stdin and refuses duplicates', async ({ dataDir }) => {
  const env = { RELAY_DATA_DIR: dataDir };
  const created = await relay(['user', 'create', '--email', 'Piped@Acme.test', '--json'], env, 'from stdin password\n');
  assert.is(created.code, 0, created.stderr);
  assert.is(json(created).email, 'piped@acme.test');
  await withStores(dataDir, async ({ documents }) => {
    assert.is((await authenticateUser(documents, 'piped@acme.test', 'from stdin password'))._id, json(created).userId);
  });
  const duplicate = await relay(['user', 'create', '--email', 'piped@acme.test'], { ...env, RELAY_PASSWORD: 'another long password' });
  assert.is(duplicate.code, 1);
  assert.match(duplicate.stderr, /conflict/);
  const weak = await relay(['user', 'create', '--email', 'weak@acme.test', '--password', 'short'], env);
  assert.is(weak.code, 1);
  assert.match(weak.stderr, /at least 12/);
  const usage = await relay(['user', 'create'], env);
  assert.is(usage.code, 2);
});

cli('domain verify checks real DNS; mark-verified records the operator and the reason', async ({ dataDir, dns }) => {
  dns.setZone([]);
  const env = { RELAY_DATA_DIR: dataDir, RELAY_DNS_SERVERS: dns.address };
  const setup = json(await relay(['setup', '--json', '--domain', 'pending.test'], env));
  assert.is(setup.error, 'domain_not_verified');
  const verify = await relay(['domain', 'verify', setup.domainId, '--json'], env);
  assert.is(verify.code, 1, verify.stderr);
  assert.is(json(verify).status, 'pending');
  assert.match(verify.stderr, /missing/);

  assert.is((await relay(['domain', 'mark-verified', setup.domainId], env)).code, 2, 'a reason is required');
  const marked = await relay(['domain', 'mark-verified', setup.domainId, '--reason', 'local test domain'], env);
  assert.is(marked.code, 0, marked.stderr);
  await withStores(dataDir, async ({ documents }) => {
    const domain = await documents.collection<SendingDomain>('domains').get(setup.domainId);
    assert.is(domain!.status, 'verified');
    assert.is(domain!.verifiedBy, 'operator');
    assert.match(domain!.operatorNote!, /local test domain/);
  });
  const missing = await relay(['domain', 'verify', 'dom_missing'], env);
  assert.is(missing.code, 1);
  assert.match(missing.stderr, /not_found/);
});

cli('domain rotate-dkim shows the new record and keeps the current key until domain verify finds it; cancel-rotation drops it', async ({ dataDir, dns }) => {
  dns.setZone([]);
  const env = { RELAY_DATA_DIR: dataDir, RELAY_DNS_SERVERS: dns.address };
  const setup = json(await relay(['setup', '--json', '--trust-domain', '--domain', 'rotate.test', '--password', 'a good long password'], env));
  const before = await withStores(dataDir, async ({ documents }) => (await documents.collection<SendingDomain>('domains').get(setup.domainId))!);

  const started = await relay(['domain', 'rotate-dkim', setup.domainId, '--json'], env);
  assert.is(started.code, 0, started.stderr);
  const rotation = json(started).dkimRotation;
  assert.is.not(rotation.selector, before.dkimSelector);
  assert.is(json(started).dkimSelector, before.dkimSelector, 'the current key signs on');
  assert.is(rotation.record.name, `${rotation.selector}._domainkey.rotate.test`);
  assert.ok(started.stderr.includes(`TXT ${rotation.record.name}  ${rotation.record.value}`), started.stderr);

  const twice = await relay(['domain', 'rotate-dkim', setup.domainId], env);
  assert.is(twice.code, 1);
  assert.match(twice.stderr, /conflict: .*already pending/);

  const sealed = await withStores(dataDir, async ({ documents }) => (await documents.collection<SendingDomain>('domains').get(setup.domainId))!.dkimRotation!.privateKeySealed);
  assert.match(sealed, /^v1\./);
  dns.setZone([{ name: rotation.record.name, type: 'TXT', data: rotation.record.txtStrings }]);
  const verified = await relay(['domain', 'verify', setup.domainId, '--json'], env);
  assert.is(verified.code, 0, verified.stderr);
  assert.is(json(verified).dkimSelector, rotation.selector);
  assert.equal(json(verified).retiredDkimKeys.map((k: { selector: string }) => k.selector), [before.dkimSelector]);
  await withStores(dataDir, async ({ documents }) => {
    const domain = (await documents.collection<SendingDomain>('domains').get(setup.domainId))!;
    assert.is(domain.dkimPrivateKeySealed, sealed, 'the new key signs, sealed as it was stored');
    assert.is(domain.dkimRotation, null);
  });

  const given = await relay(['domain', 'rotate-dkim', setup.domainId, '--selector', 'y2027'], env);
  assert.is(given.code, 0, given.stderr);
  assert.match(given.stderr, /TXT y2027\._domainkey\.rotate\.test/);
  const cancelled = await relay(['domain', 'cancel-rotation', setup.domainId, '--json'], env);
  assert.is(cancelled.code, 0, cancelled.stderr);
  assert.is(json(cancelled).dkimRotation, null);
  assert.is(json(cancelled).dkimSelector, rotation.selector);
  const nothing = await relay(['domain', 'cancel-rotation', setup.domainId], env);
  assert.is(nothing.code, 1);
  assert.match(nothing.stderr, /not_found/);
  const bad = await relay(['domain', 'rotate-dkim', setup.domainId, '--selector', 'not_a_label'], env);
  assert.is(bad.code, 1);
  assert.match(bad.stderr, /validation_error: --selector/);
});

cli.run();
