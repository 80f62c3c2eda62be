// MTA-STS (RFC 8461) in the mx transport, through real interfaces: the policy record comes from
// the test DNS server, the policy file from a real HTTPS server on loopback (certificate from
// a test CA, the port moved as RELAY_MTA_STS_PORT moves it), and mail goes to a real SMTP
// server whose certificate (from the same CA) names some MX hosts and not others. Every TLS
// session's outcome is collected as the TLS report sink receives it.
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MAX_MX_PATTERNS, MtaStsResolver } from '../infra/mail/mta-sts.ts';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { mtaStsPolicyStore } from '../apps/services/mta-sts-policies.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';
import type { TlsSessionResult } from '../infra/mail/tls-sessions.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Context {
  ca: TestCa;
  policyCert: { key: string; cert: string };
  dns: TestDnsServer;
  sink: SmtpSink;
  policies: PolicyServer;
  sessions: TlsSessionResult[];
  /** The MTA-STS cache's clock, and the transport's monotonic clock (its refusal memory's): time passing moves both. */
  now: number;
  transport?: MxTransport;
}

const mx = (domain: string, exchange: string, preference: number): ZoneRecord => ({ name: domain, type: 'MX', data: { preference, exchange } });
const loopback = (name: string): ZoneRecord => ({ name, type: 'A', data: '127.0.0.1' });
const sts = (domain: string, id: string): ZoneRecord => ({ name: `_mta-sts.${domain}`, type: 'TXT', data: `v=STSv1; id=${id}` });

// The SMTP server's certificate names good.*; wrongname.* hosts reach the same server but are
// not named in it.
const DOMAINS = ['enforce.test', 'testing.test', 'none.test', 'cached.test', 'rotate.test', 'allbad.test'];
function zone(overrides: ZoneRecord[] = []): ZoneRecord[] {
  const records: ZoneRecord[] = [];
  for (const d of DOMAINS) {
    records.push(mx(d, `mx.unlisted.test`, 5), mx(d, `wrongname.${d}`, 10), loopback(`wrongname.${d}`), loopback(`mta-sts.${d}`));
    if (d !== 'allbad.test') records.push(mx(d, `good.${d}`, 20), loopback(`good.${d}`));
  }
  records.push(loopback('mx.unlisted.test'));
  records.push(sts('enforce.test', 'e1'), sts('testing.test', 't1'), sts('none.test', 'n1'), sts('cached.test', 'c1'), sts('rotate.test', 'r1'), sts('allbad.test', 'a1'));
  return [...records.filter((r) => !overrides.some((o) => o.name === r.name && o.type === r.type)), ...overrides];
}

const message = (to: string): OutgoingMessage => ({
  emailId: 'em_sts', envelope: { mailFrom: 'b@bounce.example.test', recipients: [to] }, raw: Buffer.from('From: a@example.test\r\nSubject: sts\r\n\r\nhi\r\n'), messageId: 'sts@example.test',
});

const test = suite<Context>('MTA-STS');

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  const mxCert = ctx.ca.issue(DOMAINS.filter((d) => d !== 'allbad.test').map((d) => `good.${d}`));
  const policyCert = (ctx.policyCert = ctx.ca.issue(DOMAINS.map((d) => `mta-sts.${d}`)));
  ctx.dns = await startDnsServer(zone());
  ctx.sink = await startSmtpSink({ cert: { key: Buffer.from(mxCert.key), cert: Buffer.from(mxCert.cert) } });
  ctx.policies = await startPolicyServer(policyCert);
});

test.before.each((ctx) => {
  ctx.sessions = [];
  ctx.now = Date.now();
  ctx.dns.setZone(zone());
  ctx.policies.policies.clear();
  ctx.policies.contentTypes.clear();
  ctx.policies.fetches.clear();
  ctx.policies.policies.set('enforce.test', policyText('enforce', ['good.enforce.test', '*.enforce.test']));
  ctx.policies.policies.set('allbad.test', policyText('enforce', ['*.allbad.test']));
  ctx.policies.policies.set('testing.test', policyText('testing', ['good.testing.test']));
  ctx.policies.policies.set('none.test', policyText('none', []));
  ctx.policies.policies.set('cached.test', policyText('enforce', ['good.cached.test'], 3600));
  ctx.policies.policies.set('rotate.test', policyText('enforce', ['wrongname.rotate.test']));
  ctx.sink.messages.length = 0;
  ctx.sink.mailFromCommands.length = 0;
});

test.after.each(async (ctx) => {
  await ctx.transport?.close();
  ctx.transport = undefined;
});

test.after(async (ctx) => {
  await ctx.policies.close();
  await ctx.sink.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

function transport(ctx: Context, policyPort = ctx.policies.port): MxTransport {
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
  const allowAddresses = new Set(['127.0.0.1']);
  ctx.transport = new MxTransport({
    dnsServers: [], dns, heloName: 'relay.example.test', port: ctx.sink.port, tls: { ca: ctx.ca.ca }, connectTimeoutMs: 3000, commandTimeoutMs: 3000, allowAddresses,
    mtaSts: new MtaStsResolver({ dns, port: policyPort, ca: ctx.ca.ca, allowAddresses, fetchTimeoutMs: 2000, now: () => ctx.now }),
    tlsReports: { record: (session) => ctx.sessions.push(session) },
    monotonicNow: () => ctx.now,
  });
  return ctx.transport;
}

const results = (ctx: Context) => ctx.sessions.map((s) => [s.policy.type, s.mxHost ?? null, s.result]);

test('enforce: an MX host outside the policy and one whose certificate does not name it are passed over; the matching one gets the mail', async (ctx) => {
  const outcome = await transport(ctx).send(message('ann@enforce.test'));
  assert.equal(outcome.recipients.map((r) => r.result), ['delivered']);
  assert.is(ctx.sink.messages.length, 1);
  assert.is(ctx.sink.messages[0].servername, 'good.enforce.test');
  assert.ok(ctx.sink.messages[0].secure);
  assert.equal(results(ctx), [
    ['sts', 'mx.unlisted.test', 'validation-failure'],
    ['sts', 'wrongname.enforce.test', 'certificate-host-mismatch'],
    ['sts', 'good.enforce.test', 'success'],
  ]);
  assert.equal(ctx.sessions[0].policy.mxHosts, ['good.enforce.test', '*.enforce.test']);
  assert.ok(ctx.sessions[0].policy.strings.includes('mode: enforce'));
});

test('enforce with no MX host that qualifies: deferred with a reason naming MTA-STS, and no envelope sent anywhere', async (ctx) => {
  const outcome = await transport(ctx).send(message('ann@allbad.test'));
  const [recipient] = outcome.recipients;
  assert.equal([recipient.result, recipient.stage], ['deferred', 'tls']);
  assert.match(recipient.response, /MTA-STS \(enforce\) of allbad\.test: MX host mx\.unlisted\.test does not match the policy's mx patterns \(\*\.allbad\.test\)/);
  assert.match(recipient.response, /wrongname\.allbad\.test \[127\.0\.0\.1\]: MTA-STS \(enforce\) of allbad\.test: certificate does not name wrongname\.allbad\.test/);
  assert.equal(ctx.sink.mailFromCommands, [], 'the refused session was closed before MAIL FROM');
  assert.equal(results(ctx), [['sts', 'mx.unlisted.test', 'validation-failure'], ['sts', 'wrongname.allbad.test', 'certificate-host-mismatch']]);
});

test('enforce: an address whose certificate failed the check is passed over without a connection for five minutes, then tried again', async (ctx) => {
  const sts = transport(ctx);
  const connectionsBefore = ctx.sink.connections;
  const first = (await sts.send(message('ann@allbad.test'))).recipients[0];
  assert.is(first.result, 'deferred');
  assert.is(ctx.sink.connections - connectionsBefore, 1, 'one session to wrongname.allbad.test, refused');
  assert.equal(results(ctx), [['sts', 'mx.unlisted.test', 'validation-failure'], ['sts', 'wrongname.allbad.test', 'certificate-host-mismatch']]);

  ctx.sessions = [];
  ctx.now += 4 * 60_000;
  const second = (await sts.send(message('bob@allbad.test'))).recipients[0];
  assert.equal([second.result, second.stage], ['deferred', 'tls']);
  assert.match(second.response, /wrongname\.allbad\.test \[127\.0\.0\.1\]: MTA-STS \(enforce\) of allbad\.test: certificate does not name wrongname\.allbad\.test \(a session at [0-9T:-]+Z; not tried again before [0-9T:-]+Z\)/);
  assert.is(ctx.sink.connections - connectionsBefore, 1, 'no new connection while the refusal stands');
  assert.equal(results(ctx), [['sts', 'mx.unlisted.test', 'validation-failure']], 'a remembered refusal is no new session for TLS reports');

  ctx.sessions = [];
  ctx.now += 60_000 + 1000;
  const third = (await sts.send(message('cy@allbad.test'))).recipients[0];
  assert.is(third.result, 'deferred');
  assert.is(ctx.sink.connections - connectionsBefore, 2, 'tried again once the five minutes are over');
  assert.equal(results(ctx), [['sts', 'mx.unlisted.test', 'validation-failure'], ['sts', 'wrongname.allbad.test', 'certificate-host-mismatch']]);
  assert.equal(ctx.sink.mailFromCommands, [], 'no envelope sent in any of the three');
});

test('enforce: a wall clock stepped back an hour while a refusal is remembered neither lengthens the five minutes nor names the step', async (ctx) => {
  const sts = transport(ctx);
  const connectionsBefore = ctx.sink.connections;
  assert.is((await sts.send(message('ann@allbad.test'))).recipients[0].result, 'deferred');
  assert.is(ctx.sink.connections - connectionsBefore, 1);
  const realNow = Date.now;
  Date.now = () => realNow() - 3_600_000; // NTP steps the host's clock back an hour
  try {
    ctx.now += 4 * 60_000;
    const second = (await sts.send(message('bob@allbad.test'))).recipients[0];
    assert.is(ctx.sink.connections - connectionsBefore, 1, 'no new connection while the refusal stands');
    const until = Date.parse(/not tried again before ([0-9T:-]+Z)\)/.exec(second.response)![1]);
    assert.ok(until <= Date.now() + 60_000, `the end named is the wall clock's, after the step (${second.response})`);
    ctx.now += 60_000 + 1000;
    assert.is((await sts.send(message('cy@allbad.test'))).recipients[0].result, 'deferred');
    assert.is(ctx.sink.connections - connectionsBefore, 2, 'tried again once the five minutes are over');
  } finally {
    Date.now = realNow;
  }
});

test('testing: delivered as without a policy (to the preferred MX, certificate or not), the session reported as the failure it would have been', async (ctx) => {
  const outcome = await transport(ctx).send(message('ann@testing.test'));
  assert.equal(outcome.recipients.map((r) => r.result), ['delivered']);
  assert.is(ctx.sink.messages[0].servername, 'mx.unlisted.test', 'the most preferred MX, although not in the policy');
  // One session, one result (RFC 8460 4.4 counts sessions): the host is not in the policy, which
  // fails it before its certificate is looked at (RFC 8461 4.1).
  assert.equal(results(ctx), [['sts', 'mx.unlisted.test', 'validation-failure']]);
  assert.is(ctx.sessions[0].receivingIp, '127.0.0.1');
});

test('none: delivered as without a policy, nothing to report against', async (ctx) => {
  const outcome = await transport(ctx).send(message('ann@none.test'));
  assert.equal(outcome.recipients.map((r) => r.result), ['delivered']);
  assert.is(ctx.sink.messages[0].servername, 'mx.unlisted.test');
  assert.equal(results(ctx), [['no-policy-found', 'mx.unlisted.test', 'success']]);
  assert.is(ctx.policies.fetches.get('none.test'), 1);
});

test('a policy host that cannot be reached: the cached policy stands until it expires, and the failure is reported', async (ctx) => {
  const t = transport(ctx);
  assert.equal((await t.send(message('a@cached.test'))).recipients.map((r) => r.result), ['delivered']);
  assert.is(ctx.sink.messages.at(-1)!.servername, 'good.cached.test');
  // A new policy id is published while the policy host is down.
  const port = ctx.policies.port;
  await ctx.policies.close();
  try {
    ctx.dns.setZone(zone([sts('cached.test', 'c2')]));
    ctx.sessions = [];
    assert.equal((await t.send(message('b@cached.test'))).recipients.map((r) => r.result), ['delivered']);
    assert.is(ctx.sink.messages.at(-1)!.servername, 'good.cached.test', 'still enforced: the unlisted and misnamed hosts were passed over');
    // The session to good.cached.test is the pooled one of the first message: not counted again,
    // and neither are the hosts passed over before it, which were counted with the first message
    // (RFC 8460 4.4 counts sessions, and this message set none up:
    // test/tlsrpt-enforce-passed-over-counted-per-session.int.test.ts).
    assert.equal(results(ctx), [['sts', null, 'sts-policy-fetch-error']]);
    assert.match(ctx.sessions[0].detail ?? '', /https:\/\/mta-sts\.cached\.test\/\.well-known\/mta-sts\.txt: .*ECONNREFUSED/);
    // Past max_age (an hour) the cached policy is gone: with none, the preferred MX gets the mail.
    ctx.now += 3601_000;
    ctx.sessions = [];
    assert.equal((await t.send(message('c@cached.test'))).recipients.map((r) => r.result), ['delivered']);
    assert.is(ctx.sink.messages.at(-1)!.servername, 'mx.unlisted.test');
    assert.equal(results(ctx), [['no-policy-found', null, 'sts-policy-fetch-error'], ['no-policy-found', 'mx.unlisted.test', 'success']]);
  } finally {
    ctx.policies = await startPolicyServer(ctx.policyCert, port);
  }
});

test('policy id: the same id is served from the cache; a new id fetches the new policy, which applies at once', async (ctx) => {
  const t = transport(ctx);
  // mx: wrongname.rotate.test, whose certificate does not name it; good.* is not listed.
  const refused = await t.send(message('a@rotate.test'));
  assert.equal(refused.recipients.map((r) => [r.result, r.stage]), [['deferred', 'tls']]);
  assert.equal(results(ctx).map((r) => r[2]), ['validation-failure', 'certificate-host-mismatch', 'validation-failure']);
  // The policy file changes without a new id: not fetched again, the old policy still decides.
  ctx.policies.policies.set('rotate.test', policyText('enforce', ['good.rotate.test']));
  assert.equal((await t.send(message('b@rotate.test'))).recipients.map((r) => r.result), ['deferred']);
  assert.is(ctx.policies.fetches.get('rotate.test'), 1);
  // A new id: fetched, and the new policy decides.
  ctx.dns.setZone(zone([sts('rotate.test', 'r2')]));
  ctx.sessions = [];
  assert.equal((await t.send(message('c@rotate.test'))).recipients.map((r) => r.result), ['delivered']);
  assert.is(ctx.policies.fetches.get('rotate.test'), 2);
  assert.is(ctx.sink.messages.at(-1)!.servername, 'good.rotate.test');
  assert.equal(results(ctx).at(-1), ['sts', 'good.rotate.test', 'success']);
});

test('a policy kept in the document store applies after a restart, while the policy host cannot be reached', async (ctx) => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-sts-'));
  const documents = new SqliteDocumentStore(join(dir, 'documents.db'));
  try {
    const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
    const options = { dns, allowAddresses: new Set(['127.0.0.1']), ca: ctx.ca.ca, store: mtaStsPolicyStore(documents), now: () => ctx.now, onStoreError: (error: Error) => { throw error; } };
    const first = await new MtaStsResolver({ ...options, port: ctx.policies.port }).policyFor('enforce.test');
    assert.equal([first.policy?.mode, first.policy?.id], ['enforce', 'e1']);
    // A new process: nothing in memory, and the policy host's port answers nothing.
    const silent = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
    try {
      const port = (silent.address() as net.AddressInfo).port;
      const restarted = await new MtaStsResolver({ ...options, port }).policyFor('enforce.test');
      assert.equal([restarted.policy?.mode, restarted.policy?.mx], ['enforce', ['good.enforce.test', '*.enforce.test']]);
      assert.is(restarted.failure, undefined, 'the same id: nothing to fetch');
      // A new id while the host is down: the stored policy still stands, the failure is said.
      ctx.dns.setZone(zone([sts('enforce.test', 'e2')]));
      const rotated = await new MtaStsResolver({ ...options, port }).policyFor('enforce.test');
      assert.equal([rotated.policy?.id, rotated.failure?.resultType], ['e1', 'sts-policy-fetch-error']);
    } finally {
      silent.close();
    }
  } finally {
    await documents.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a policy served as anything but text/plain is not a policy (RFC 8461 3.3): none applies, the failure names the type, and it is not fetched again for five minutes', async (ctx) => {
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
  const resolver = new MtaStsResolver({ dns, allowAddresses: new Set(['127.0.0.1']), port: ctx.policies.port, ca: ctx.ca.ca, fetchTimeoutMs: 2000, now: () => ctx.now });
  // The policy text is valid either way: only the media type decides.
  const control = await resolver.policyFor('cached.test');
  assert.equal([control.policy?.mode, control.policy?.mx, control.failure], ['enforce', ['good.cached.test'], undefined]);

  ctx.policies.contentTypes.set('enforce.test', 'text/html; charset=utf-8');
  const html = await resolver.policyFor('enforce.test');
  assert.is(ctx.policies.fetches.get('enforce.test'), 1, 'the policy host was asked');
  assert.is(html.policy, null, `a text/html answer became an ${html.policy?.mode} policy for ${html.policy?.mx}`);
  assert.is(html.failure?.resultType, 'sts-policy-invalid');
  assert.match(html.failure?.detail ?? '', /^https:\/\/mta-sts\.enforce\.test\/\.well-known\/mta-sts\.txt: served as text\/html, not text\/plain$/);

  // Served properly now (the type is case-insensitive, parameters aside), but not asked again yet.
  ctx.policies.contentTypes.set('enforce.test', 'Text/Plain ; charset=UTF-8');
  ctx.now += 4 * 60_000;
  const waiting = await resolver.policyFor('enforce.test');
  assert.equal([waiting.policy, waiting.failure?.resultType, ctx.policies.fetches.get('enforce.test')], [null, 'sts-policy-invalid', 1]);
  ctx.now += 60_000 + 1000;
  const plain = await resolver.policyFor('enforce.test');
  assert.equal([plain.policy?.mode, plain.policy?.mx, plain.failure], ['enforce', ['good.enforce.test', '*.enforce.test'], undefined]);
  assert.is(ctx.policies.fetches.get('enforce.test'), 2);

  ctx.policies.contentTypes.set('testing.test', null);
  const untyped = await resolver.policyFor('testing.test');
  assert.equal([untyped.policy, untyped.failure?.resultType], [null, 'sts-policy-invalid']);
  assert.match(untyped.failure?.detail ?? '', /served as no media type, not text\/plain/);
  ctx.policies.contentTypes.set('none.test', 'application/octet-stream');
  const binary = await resolver.policyFor('none.test');
  assert.equal([binary.policy, binary.failure?.resultType], [null, 'sts-policy-invalid']);
  assert.match(binary.failure?.detail ?? '', /served as application\/octet-stream, not text\/plain/);
});

test(`a policy listing more than ${MAX_MX_PATTERNS} mx patterns is not a policy: mail goes as without one, and the failure is reported; ${MAX_MX_PATTERNS} are a policy`, async (ctx) => {
  const patterns = (count: number) => ['good.enforce.test', ...Array.from({ length: count - 1 }, (_, i) => `mx${i}.enforce.test`)];
  ctx.policies.policies.set('enforce.test', policyText('enforce', patterns(MAX_MX_PATTERNS + 1)));
  const t = transport(ctx);
  assert.equal((await t.send(message('a@enforce.test'))).recipients.map((r) => r.result), ['delivered']);
  assert.is(ctx.sink.messages.at(-1)!.servername, 'mx.unlisted.test', 'no policy: the preferred MX host');
  assert.equal(results(ctx), [['no-policy-found', null, 'sts-policy-invalid'], ['no-policy-found', 'mx.unlisted.test', 'success']]);
  assert.match(ctx.sessions[0].detail ?? '', /^https:\/\/mta-sts\.enforce\.test\/\.well-known\/mta-sts\.txt: 101 mx patterns, more than the 100 Relay accepts$/);
  // A new id whose policy lists 100: enforced (the unlisted and misnamed hosts passed over).
  ctx.dns.setZone(zone([sts('enforce.test', 'e2')]));
  ctx.policies.policies.set('enforce.test', policyText('enforce', patterns(MAX_MX_PATTERNS)));
  assert.equal((await t.send(message('b@enforce.test'))).recipients.map((r) => r.result), ['delivered']);
  assert.is(ctx.policies.fetches.get('enforce.test'), 2);
  assert.is(ctx.sink.messages.at(-1)!.servername, 'good.enforce.test');
});

test('a new policy served as text/html leaves the cached policy in force, and the failure is reported', async (ctx) => {
  const t = transport(ctx);
  assert.equal((await t.send(message('a@cached.test'))).recipients.map((r) => r.result), ['delivered']);
  assert.is(ctx.sink.messages.at(-1)!.servername, 'good.cached.test');
  // A new id whose policy would allow any MX host, but as an HTML page.
  ctx.dns.setZone(zone([sts('cached.test', 'c2')]));
  ctx.policies.policies.set('cached.test', policyText('enforce', ['*.test']));
  ctx.policies.contentTypes.set('cached.test', 'text/html');
  ctx.sessions = [];
  assert.equal((await t.send(message('b@cached.test'))).recipients.map((r) => r.result), ['delivered']);
  assert.is(ctx.policies.fetches.get('cached.test'), 2, 'the new id was fetched');
  assert.is(ctx.sink.messages.at(-1)!.servername, 'good.cached.test', 'still the cached policy: the unlisted and misnamed hosts were passed over');
  // Over the first message's pooled session: the hosts passed over were counted with it, not
  // again (RFC 8460 4.4 counts sessions).
  assert.equal(results(ctx), [['sts', null, 'sts-policy-invalid']]);
  assert.match(ctx.sessions[0].detail ?? '', /served as text\/html, not text\/plain/);
  assert.equal(ctx.sessions[0].policy.mxHosts, ['good.cached.test'], 'reported against the policy that applied');
});

test('the fetch is bounded: an untrusted certificate, a policy over the size limit, a host that never answers, a missing policy (404): none applies, each says why', async (ctx) => {
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 1000, tries: 1 }));
  const allowAddresses = new Set(['127.0.0.1']);
  const resolver = (options: { ca?: string; port?: number; maxPolicyBytes?: number; fetchTimeoutMs?: number }) =>
    new MtaStsResolver({ dns, allowAddresses, port: ctx.policies.port, ca: ctx.ca.ca, fetchTimeoutMs: 2000, ...options });
  const untrusted = await resolver({ ca: undefined }).policyFor('enforce.test');
  assert.is(untrusted.policy, null);
  assert.is(untrusted.failure?.resultType, 'sts-webpki-invalid', untrusted.failure?.detail);
  const large = await resolver({ maxPolicyBytes: 40 }).policyFor('enforce.test');
  assert.is(large.policy, null);
  assert.equal(large.failure?.resultType, 'sts-policy-invalid');
  assert.match(large.failure?.detail ?? '', /larger than 40 bytes/);
  ctx.policies.policies.delete('enforce.test');
  const missing = await resolver({}).policyFor('enforce.test');
  assert.equal([missing.policy, missing.failure?.resultType], [null, 'sts-policy-fetch-error']);
  assert.match(missing.failure?.detail ?? '', /HTTP 404/);
  // A server that accepts the connection and then says nothing.
  const silent = net.createServer(() => {});
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
  try {
    const started = Date.now();
    const hung = await resolver({ port: (silent.address() as net.AddressInfo).port, fetchTimeoutMs: 300 }).policyFor('enforce.test');
    assert.equal([hung.policy, hung.failure?.resultType], [null, 'sts-policy-fetch-error']);
    assert.match(hung.failure?.detail ?? '', /no policy within 300 ms/);
    assert.ok(Date.now() - started < 2000, 'ended by the time limit, not by the socket');
  } finally {
    silent.close();
  }
});

test.run();
