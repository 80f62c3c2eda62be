// The MX connection pool (infra/mail/mx-connections.ts) keeps a slot per MX host (and TLS
// requirement) only while the slot holds something: once every connection to a host has closed,
// whether it carried mail and idled out or failed to be set up, nothing of the host is left.
// Recipient domains, and so MX hosts, are chosen by whoever gives an address (a sign-up form),
// so a pool that kept every host it ever used would grow without end in a long-running sender.
// Shown through the real transport (real DNS server, real smtp-server on 127.0.0.1) and read from
// the process's heap: each MX host name carries a marker, the DNS answers have TTL 0 (the DNS
// cache keeps none of them), and once every connection has closed no string names a host.
import dgram from 'node:dgram';
import { getHeapSnapshot } from 'node:v8';
import dnsPacket from 'dns-packet';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MxTransport } from '../infra/mail/mx-transport.ts';
import type { OutgoingMessage } from '../infra/ports/mail-transport.ts';
import { waitUntil } from './support/eventually.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

const HOSTS = 200;
const MARKER = 'zqpoolslotmarker';
interface Context { udp: dgram.Socket; port: number; sink: SmtpSink }
const test = suite<Context>('mx pool: slots of hosts no longer used');

test.before(async (ctx) => {
  ctx.sink = await startSmtpSink({ noStartTls: true });
  ctx.udp = dgram.createSocket('udp4');
  ctx.udp.on('message', (message, remote) => {
    const query = dnsPacket.decode(message);
    const q = query.questions![0];
    const answers: dnsPacket.Answer[] = [];
    // <kind><i>.pool.test: MX <marker>-<kind><i>.mx.test (TTL 0: never cached). "ok" hosts are
    // the sink's address; "refused" ones are 127.0.0.2, where nothing listens on the sink's port.
    if (q.type === 'MX') answers.push({ name: q.name, type: 'MX', ttl: 0, class: 'IN', data: { preference: 10, exchange: `${MARKER}-${q.name.split('.')[0]}.mx.test` } });
    if (q.type === 'A' && q.name.startsWith(`${MARKER}-ok`)) answers.push({ name: q.name, type: 'A', ttl: 0, class: 'IN', data: '127.0.0.1' });
    if (q.type === 'A' && q.name.startsWith(`${MARKER}-refused`)) answers.push({ name: q.name, type: 'A', ttl: 0, class: 'IN', data: '127.0.0.2' });
    ctx.udp.send(dnsPacket.encode({ type: 'response', id: query.id, flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE, questions: query.questions, answers }), remote.port, remote.address);
  });
  await new Promise<void>((resolve) => ctx.udp.bind(0, '127.0.0.1', () => resolve()));
  ctx.port = ctx.udp.address().port;
});

test.after(async (ctx) => {
  await new Promise<void>((resolve) => ctx.udp.close(() => resolve()));
  await ctx.sink.close();
});

const message = (to: string): OutgoingMessage => ({
  emailId: 'em_pool', envelope: { mailFrom: 'b@bounce.example.test', recipients: [to] }, raw: Buffer.from('Subject: s\r\n\r\nhi\r\n'), messageId: 'm@example.test',
});

/** Mail to `count` "ok" and as many "refused" domains, from `first` on; the outcomes (naming the hosts) are not kept. */
async function sendBatch(mx: MxTransport, first: number, count: number): Promise<void> {
  const sends = Array.from({ length: count }, (_, j) => [mx.send(message(`user@ok${first + j}.pool.test`)), mx.send(message(`user@refused${first + j}.pool.test`))]).flat();
  for (const outcome of await Promise.all(sends)) {
    const [recipient] = outcome.recipients;
    if (recipient.address.includes('@ok')) assert.is(recipient.result, 'delivered', recipient.response);
    else assert.match(recipient.response, /ECONNREFUSED/, `${recipient.address}: ${recipient.result} ${recipient.response}`);
  }
}

/** The marked MX hosts some string in the heap names, by kind ("ok", "refused"). */
async function markedHostsInHeap(): Promise<Record<string, number>> {
  const chunks: Buffer[] = [];
  for await (const chunk of getHeapSnapshot()) chunks.push(chunk as Buffer);
  const { strings } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { strings: string[] };
  const hosts = { ok: new Set<string>(), refused: new Set<string>() };
  for (const s of strings) {
    const m = new RegExp(`${MARKER}-(ok|refused)(\\d+)\\.mx\\.test`).exec(s);
    if (m) hosts[m[1] as 'ok' | 'refused'].add(m[2]);
  }
  return { ok: hosts.ok.size, refused: hosts.refused.size };
}

test('once every connection to 200 distinct MX hosts has closed or failed, the transport no longer holds their names', async (ctx) => {
  const mx = new MxTransport({
    dnsServers: [`127.0.0.1:${ctx.port}`], heloName: 'relay.example.test', port: ctx.sink.port, allowAddresses: new Set(['127.0.0.1', '127.0.0.2']),
    idleTimeoutMs: 20, dnsTimeoutMs: 1000, connectTimeoutMs: 2000, commandTimeoutMs: 2000,
  });
  try {
    assert.equal(await markedHostsInHeap(), { ok: 0, refused: 0 }, 'no marked name before any delivery');
    for (let i = 0; i < HOSTS / 2; i += 20) await sendBatch(mx, i, 20);
    // Every pooled connection closes after its 20 ms idle time (a refused one never opened).
    await waitUntil(() => ctx.sink.closed === ctx.sink.connections, 'every connection to the sink closed');
    assert.is(ctx.sink.connections, HOSTS / 2, 'one connection per host that accepted');
    assert.equal(await markedHostsInHeap(), { ok: 0, refused: 0 }, 'MX host names still held in the heap after every connection to them closed');
  } finally {
    await mx.close();
  }
});

test.run();
