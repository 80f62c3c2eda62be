// One MX delivery attempt considers a bounded number of a domain's MX hosts, in preference
// order (MAX_MX_HOSTS_PER_DOMAIN in infra/mail/mx-transport.ts, as Postfix's
// smtp_mx_address_limit and Exim's hosts_max_try): hosts whose address lookups fail cost no
// connection attempt, so without the bound a domain listing many hosts that do not resolve made
// one attempt look up every one of them and wait out each one's DNS timeouts. With hosts left
// out, an attempt that found no usable host is deferred, not bounced: a host past the bound may
// have an address.
import dgram from 'node:dgram';
import dnsPacket from 'dns-packet';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';

const HOSTS = 40;
const LIMIT = 10;
interface Context { udp: dgram.Socket; port: number; addressQueries: Map<string, Set<string>> }
const test = suite<Context>('MX hosts considered per attempt');

test.before(async (ctx) => {
  ctx.addressQueries = new Map();
  ctx.udp = dgram.createSocket('udp4');
  ctx.udp.on('message', (message, remote) => {
    const query = dnsPacket.decode(message);
    const q = query.questions![0];
    const reply = (packet: Partial<dnsPacket.Packet>) =>
      ctx.udp.send(dnsPacket.encode({ type: 'response', id: query.id, questions: query.questions, ...packet }), remote.port, remote.address);
    if (q.type === 'MX') {
      // many.test: 40 hosts of one preference; gone.test: 40 hosts of preferences 0..39.
      const answers = Array.from({ length: HOSTS }, (_, i) => ({
        name: q.name, type: 'MX' as const, ttl: 0, class: 'IN' as const, data: { preference: q.name === 'gone.test' ? i : 10, exchange: `h${i}.${q.name}` },
      }));
      reply({ flags: dnsPacket.RECURSION_DESIRED, answers });
      return;
    }
    const domain = q.name.slice(q.name.indexOf('.') + 1);
    if (!ctx.addressQueries.has(domain)) ctx.addressQueries.set(domain, new Set());
    ctx.addressQueries.get(domain)!.add(q.name);
    // many.test's hosts: never answered (a zone whose servers are down). gone.test's: NXDOMAIN.
    if (domain === 'gone.test') reply({ flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | 3 });
  });
  await new Promise<void>((resolve) => ctx.udp.bind(0, '127.0.0.1', () => resolve()));
  ctx.port = ctx.udp.address().port;
});

test.after((ctx) => new Promise<void>((resolve) => ctx.udp.close(() => resolve())));

const message = (to: string): OutgoingMessage => ({ emailId: 'em_many', envelope: { mailFrom: 'b@bounce.example.test', recipients: [to] }, raw: Buffer.from('Subject: s\r\n\r\nhi\r\n'), messageId: 'm@example.test' });
const transport = (ctx: Context) => new MxTransport({ dnsServers: [`127.0.0.1:${ctx.port}`], heloName: 'relay.example.test', dnsTimeoutMs: 50, connectTimeoutMs: 1000, commandTimeoutMs: 1000 });

test('40 MX hosts whose lookups time out: one attempt looks up at most 10 of them and is deferred', async (ctx) => {
  const mx = transport(ctx);
  const started = Date.now();
  const outcome = await mx.send(message('x@many.test'));
  const elapsed = Date.now() - started;
  await mx.close();
  assert.is(outcome.recipients[0].result, 'deferred');
  const looked = ctx.addressQueries.get('many.test')?.size ?? 0;
  // Before the bound: every host, each after its A and AAAA queries timed out.
  assert.ok(looked > 0 && looked <= LIMIT, `${looked} of ${HOSTS} MX hosts looked up in one attempt, ${elapsed} ms (dnsTimeoutMs 50; 5 s by default)`);
});

test('40 MX hosts without an address: the 10 most preferred are looked up and the attempt is deferred, not bounced', async (ctx) => {
  const mx = transport(ctx);
  const outcome = await mx.send(message('x@gone.test'));
  await mx.close();
  const looked = [...(ctx.addressQueries.get('gone.test') ?? [])].sort();
  assert.equal(looked, Array.from({ length: LIMIT }, (_, i) => `h${i}.gone.test`).sort());
  const [recipient] = outcome.recipients;
  // Hosts past the bound were not looked up: no verdict on them, so no hard bounce.
  assert.is(recipient.result, 'deferred', recipient.response);
  assert.match(recipient.response, `${HOSTS - LIMIT} more MX hosts of gone.test not tried`);
});

test.run();
