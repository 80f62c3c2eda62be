// The stub resolver (infra/dns/stub-resolver.ts) accepts a UDP reply only from the resolver's
// address and port. An IPv6 resolver may be configured in any valid spelling
// (RELAY_DNS_SERVERS / RELAY_DNSSEC_RESOLVER: `[0:0:0:0:0:0:0:1]:53`, `[2001:DB8::53]`) while the
// kernel reports a reply's source in its compressed lower-case form (`::1`): the reply from the
// configured resolver is the answer, whichever spelling was configured.
// A real UDP DNS responder on ::1 that counts what it answered.
import dgram from 'node:dgram';
import dnsPacket from 'dns-packet';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { StubResolver } from '../infra/dns/stub-resolver.ts';

interface Context {
  socket: dgram.Socket;
  port: number;
  answered: number;
  /** Another socket on ::1 that, when `spoof` is set, answers each question first, with another address. */
  spoofer: dgram.Socket;
  spoof: boolean;
  forged: number;
}

const answer = (query: dnsPacket.DecodedPacket, data: string): Buffer => dnsPacket.encode({
  type: 'response', id: query.id, flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE, questions: query.questions,
  answers: [{ name: query.questions![0].name, type: 'A', class: 'IN', ttl: 60, data }],
});

const test = suite<Context>('stub resolver: an IPv6 resolver address not in canonical form');

test.before(async (ctx) => {
  ctx.answered = 0;
  ctx.forged = 0;
  ctx.spoof = false;
  ctx.socket = dgram.createSocket('udp6');
  ctx.spoofer = dgram.createSocket('udp6');
  ctx.socket.on('message', (message, remote) => {
    const query = dnsPacket.decode(message);
    const reply = () => ctx.socket.send(answer(query, '192.0.2.7'), remote.port, remote.address, () => { ctx.answered++; });
    if (!ctx.spoof) return reply();
    // The forged answer (right id, right question) is on its way before the real one.
    ctx.spoofer.send(answer(query, '198.51.100.66'), remote.port, remote.address, () => {
      ctx.forged++;
      reply();
    });
  });
  await new Promise<void>((resolve) => ctx.socket.bind(0, '::1', () => resolve()));
  await new Promise<void>((resolve) => ctx.spoofer.bind(0, '::1', () => resolve()));
  ctx.port = ctx.socket.address().port;
});

test.after((ctx) => {
  ctx.socket.close();
  ctx.spoofer.close();
});

test('control: [::1]:port gets the answer', async (ctx) => {
  const resolver = new StubResolver({ servers: [`[::1]:${ctx.port}`], timeoutMs: 1500, tries: 1 });
  const response = await resolver.query('mx.example.test', 'A');
  assert.equal(response.answers.map((a) => (a as { data?: unknown }).data), ['192.0.2.7']);
});

test('[0:0:0:0:0:0:0:1]:port, the same address written out, gets the answer too', async (ctx) => {
  const resolver = new StubResolver({ servers: [`[0:0:0:0:0:0:0:1]:${ctx.port}`], timeoutMs: 1500, tries: 1 });
  const before = ctx.answered;
  let outcome: string;
  try {
    const response = await resolver.query('mx.example.test', 'A');
    outcome = `answer ${response.answers.map((a) => (a as { data?: unknown }).data).join(',')}`;
  } catch (error) {
    outcome = `${(error as { code?: string }).code}: ${(error as Error).message}`;
  }
  assert.ok(ctx.answered > before, 'the server received the question and sent its answer');
  assert.is(outcome, 'answer 192.0.2.7');
});

test('an answer from another port of the same address is still ignored, however the address is written', async (ctx) => {
  ctx.spoof = true;
  try {
    const resolver = new StubResolver({ servers: [`[0:0:0:0:0:0:0:1]:${ctx.port}`], timeoutMs: 1500, tries: 1 });
    const forgedBefore = ctx.forged;
    const response = await resolver.query('mx.example.test', 'A');
    assert.ok(ctx.forged > forgedBefore, 'the forged answer was sent, ahead of the real one');
    assert.equal(response.answers.map((a) => (a as { data?: unknown }).data), ['192.0.2.7']);
  } finally {
    ctx.spoof = false;
  }
});

test.run();
