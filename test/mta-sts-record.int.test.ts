// The `_mta-sts` TXT record a recipient domain publishes, read through MtaStsResolver against the
// test DNS server and a real HTTPS policy host. Its owner writes it, and one TXT record holds
// close to 64 KiB (over TCP): mailauth's reader, used before, took ~1.6 s of the event loop for a
// run of 64,000 blanks inside a field (/[ \t]+$/ is quadratic there), on every message to the
// domain. Such a record is now invalid (longer than MAX_STS_RECORD_LENGTH, and read in linear
// time whatever its length); test/mta-sts-record.unit.test.ts has the grammar.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DnsCache } from '../infra/dns/dns-cache.ts';
import { StubResolver } from '../infra/dns/stub-resolver.ts';
import { MtaStsResolver } from '../infra/mail/mta-sts.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { policyText, startPolicyServer, type PolicyServer } from './support/mta-sts-server.ts';
import { longestStall } from './support/event-loop.ts';

interface Context { ca: TestCa; dns: TestDnsServer; policies: PolicyServer }
const test = suite<Context>('_mta-sts TXT records of any size');

// A valid id, then a field "a<blanks>x" that is not the last one.
const RECORD = 'v=STSv1; id=1; a' + ' '.repeat(64_000) + 'x;';

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  ctx.dns = await startDnsServer([
    { name: '_mta-sts.blanks.test', type: 'TXT', data: RECORD, ttl: 3600 },
    { name: 'mta-sts.blanks.test', type: 'A', data: '127.0.0.1', ttl: 3600 },
  ]);
  ctx.policies = await startPolicyServer(ctx.ca.issue(['mta-sts.blanks.test']));
  ctx.policies.policies.set('blanks.test', policyText('enforce', ['mx.blanks.test']));
});

test.after(async (ctx) => {
  await ctx.policies.close();
  await ctx.dns.close();
  ctx.ca.remove();
});

test('given a _mta-sts record of 64,000 blanks inside a field, when policies for its domain are looked up (the second from the DNS cache), then no lookup blocks the event loop and the record names no policy', async (ctx) => {
  const dns = new DnsCache(new StubResolver({ servers: [ctx.dns.address], timeoutMs: 2000, tries: 1 }));
  const sts = new MtaStsResolver({ dns, port: ctx.policies.port, ca: ctx.ca.ca, allowAddresses: new Set(['127.0.0.1']), fetchTimeoutMs: 5000 });
  const { result: lookups, stallMs } = await longestStall(async () => [await sts.policyFor('blanks.test'), await sts.policyFor('blanks.test')], 5);
  const overTcp = ctx.dns.queries.filter((q) => q.name === '_mta-sts.blanks.test' && q.transport === 'tcp');
  assert.is(overTcp.length, 1, 'the record came over TCP, once: the second lookup was answered from the DNS cache');
  assert.ok(stallMs < 250, `the lookups blocked the event loop for ${Math.round(stallMs)} ms in one go`);
  assert.equal(lookups.map((l) => [l.policy, l.failure]), [[null, undefined], [null, undefined]]);
  assert.is(ctx.policies.fetches.get('blanks.test'), undefined, 'the policy host was not asked');
});

test.run();
