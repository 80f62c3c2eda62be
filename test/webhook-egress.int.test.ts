// Webhook egress against a real HTTPS server on loopback, with certificates from a test CA
// made by openssl and names served by the test DNS server (test/support/dns-server.ts).
// Loopback is reachable only through the allow list (RELAY_WEBHOOK_ALLOW's `host:port`),
// as in a test deployment. Every outgoing TCP connection in this process is watched: one to
// anything other than 127.0.0.1 or ::1 is recorded and cut before it leaves, so the public
// address used for the rebinding case (8.8.8.8) is never contacted, whatever the code does.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { checkResolvesPublic, DEFAULT_USER_AGENT, postWebhook, resolveDestination } from '../infra/http/webhook-egress.ts';
import type { WebhookPost } from '../infra/http/webhook-egress.ts';
import { startDnsServer } from './support/dns-server.ts';
import type { TestDnsServer } from './support/dns-server.ts';

const HOOKS = 'hooks.relay.test';
const LOOPBACK = new Set(['127.0.0.1', '::1']);

// ---- the connection watch -------------------------------------------------------------
interface Dial { host: string; port: number }
const dials: Dial[] = [];
const forbiddenDials: Dial[] = [];
const originalConnect = net.Socket.prototype.connect;
function watchConnections(): void {
  net.Socket.prototype.connect = function (this: net.Socket, ...args: unknown[]) {
    const first = Array.isArray(args[0]) ? args[0][0] : args[0];
    const dial: Dial = typeof first === 'object' && first !== null
      ? { host: String((first as { host?: unknown }).host ?? 'localhost'), port: Number((first as { port?: unknown }).port) }
      : { host: String(args[1] ?? 'localhost'), port: Number(first) };
    dials.push(dial);
    if (!LOOPBACK.has(dial.host)) {
      forbiddenDials.push(dial);
      queueMicrotask(() => this.destroy(new Error(`test guard: refused a connection to ${dial.host}:${dial.port}`)));
      return this;
    }
    return (originalConnect as (...a: unknown[]) => net.Socket).apply(this, args);
  } as typeof net.Socket.prototype.connect;
}
function unwatchConnections(): void {
  net.Socket.prototype.connect = originalConnect;
}

// ---- certificates -----------------------------------------------------------------------
interface Pki { ca: string; hooks: { key: string; cert: string }; other: { key: string; cert: string }; localhost: { key: string; cert: string } }

function makePki(dir: string): Pki {
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-subj', '/CN=Relay Test CA', '-days', '2',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  const leaf = (name: string, altNames = `DNS:${name}`) => {
    writeFileSync(join(dir, `${name}.ext`), `subjectAltName=${altNames}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n`);
    openssl('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
    openssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-set_serial', `0x${Date.now().toString(16)}${name.length}`,
      '-days', '2', '-extfile', `${name}.ext`, '-out', `${name}.crt`);
    return { key: readFileSync(join(dir, `${name}.key`), 'utf8'), cert: readFileSync(join(dir, `${name}.crt`), 'utf8') };
  };
  return {
    ca: readFileSync(join(dir, 'ca.crt'), 'utf8'), hooks: leaf(HOOKS), other: leaf('other.relay.test'),
    localhost: leaf('localhost', 'DNS:localhost,IP:127.0.0.1'),
  };
}

// ---- servers ----------------------------------------------------------------------------
interface Seen { method: string; url: string; headers: Record<string, string | string[] | undefined>; body: string }

interface Context {
  dir: string;
  pki: Pki;
  dns: TestDnsServer;
  hooks: https.Server;
  hooksPort: number;
  hooks6?: https.Server;
  hooks6Port?: number;
  seen: Seen[];
  connections: number;
  local: https.Server;
  localPort: number;
  wrongName: https.Server;
  wrongNamePort: number;
  silent: net.Server;
  silentPort: number;
  silentSockets: Set<net.Socket>;
  closedPort: number;
}

function listen(server: net.Server, host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve((server.address() as net.AddressInfo).port));
  });
}

function close(server: net.Server): Promise<void> {
  (server as https.Server).closeAllConnections?.();
  return new Promise((resolve) => server.close(() => resolve()));
}

function hookServer(ctx: Context, pki: Pki): https.Server {
  const server = https.createServer({ key: pki.hooks.key, cert: pki.hooks.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      ctx.seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() });
      const port = (server.address() as net.AddressInfo).port;
      switch (req.url) {
        case '/ok': return void res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
        case '/no-content': return void res.writeHead(204).end();
        case '/fail': return void res.writeHead(500, { 'content-type': 'text/plain' }).end('internal trouble');
        case '/gone': return void res.writeHead(410).end('gone');
        case '/redirect': return void res.writeHead(302, { location: `https://${HOOKS}:${port}/elsewhere` }).end();
        case '/hang': return; // never answers
        case '/slow-body': return void res.writeHead(200, { 'content-type': 'text/plain' }).write('partial'); // never ends
        case '/big': {
          res.writeHead(200, { 'content-type': 'text/plain' });
          const block = Buffer.alloc(64 * 1024, 'x');
          for (let i = 0; i < 16; i++) res.write(block);
          return void res.end();
        }
        default: return void res.writeHead(404).end();
      }
    });
  });
  server.on('connection', () => ctx.connections++);
  return server;
}

const egress = suite<Context>('webhook egress');

egress.before(async (ctx) => {
  watchConnections();
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-webhook-egress-'));
  ctx.pki = makePki(ctx.dir);
  ctx.dns = await startDnsServer([]);
  ctx.seen = [];
  ctx.connections = 0;
  ctx.hooks = hookServer(ctx, ctx.pki);
  ctx.hooksPort = await listen(ctx.hooks);
  try {
    const hooks6 = hookServer(ctx, ctx.pki);
    ctx.hooks6Port = await listen(hooks6, '::1');
    ctx.hooks6 = hooks6;
  } catch {
    // No IPv6 loopback here: the AAAA-only case is skipped.
  }
  // A developer's receiver: a certificate for localhost, listening on loopback.
  ctx.local = https.createServer({ key: ctx.pki.localhost.key, cert: ctx.pki.localhost.cert }, (req, res) => {
    ctx.seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: '' });
    req.resume().on('end', () => res.writeHead(204).end());
  });
  ctx.localPort = await listen(ctx.local);
  ctx.wrongName = https.createServer({ key: ctx.pki.other.key, cert: ctx.pki.other.cert }, (_req, res) => res.end('wrong'));
  ctx.wrongNamePort = await listen(ctx.wrongName);
  ctx.silentSockets = new Set();
  ctx.silent = net.createServer((socket) => {
    ctx.silentSockets.add(socket);
    socket.on('close', () => ctx.silentSockets.delete(socket));
  });
  ctx.silentPort = await listen(ctx.silent);
  const probe = net.createServer();
  ctx.closedPort = await listen(probe);
  await close(probe);
});

egress.before.each((ctx) => {
  ctx.dns.setZone([{ name: HOOKS, type: 'A', data: '127.0.0.1' }]);
  ctx.dns.queries.length = 0;
  ctx.seen.length = 0;
  ctx.connections = 0;
  dials.length = 0;
});

egress.after(async (ctx) => {
  unwatchConnections();
  for (const socket of ctx.silentSockets) socket.destroy();
  await Promise.all([close(ctx.hooks), close(ctx.local), close(ctx.wrongName), close(ctx.silent), ctx.hooks6 ? close(ctx.hooks6) : undefined, ctx.dns.close()]);
  rmSync(ctx.dir, { recursive: true, force: true });
});

/** Every test also checks that nothing tried to leave loopback. */
function test(name: string, body: (ctx: Context) => Promise<void>): void {
  egress(name, async (ctx) => {
    await body(ctx);
    assert.equal(forbiddenDials, [], 'a connection to something other than loopback was attempted');
  });
}

function post(ctx: Context, path: string, overrides: Partial<WebhookPost> = {}) {
  return postWebhook({
    url: `https://${HOOKS}:${ctx.hooksPort}${path}`,
    body: Buffer.from(JSON.stringify({ type: 'email.delivered', id: 'evt_1' })),
    headers: { 'Content-Type': 'application/json', 'Relay-Signature': 't=1,v1=abc' },
    dnsServers: [ctx.dns.address],
    allow: new Set([`${HOOKS}:${ctx.hooksPort}`]),
    ca: ctx.pki.ca,
    connectTimeoutMs: 2000,
    totalTimeoutMs: 5000,
    ...overrides,
  });
}

const queriesFor = (ctx: Context, name: string) => ctx.dns.queries.filter((q) => q.name.toLowerCase() === name).map((q) => q.type).sort();

test('given a 200, then the attempt succeeds and the server got one POST with the body, the headers and the name as Host', async (ctx) => {
  const result = await post(ctx, '/ok');
  assert.equal({ ...result, durationMs: 0 }, { httpStatus: 200, errorCode: null, durationMs: 0, responseSnippet: 'ok' });
  assert.ok(result.durationMs >= 0 && result.durationMs < 5000);
  assert.is(ctx.seen.length, 1);
  const [seen] = ctx.seen;
  assert.is(seen.method, 'POST');
  assert.is(seen.body, '{"type":"email.delivered","id":"evt_1"}');
  assert.is(seen.headers['content-type'], 'application/json');
  assert.is(seen.headers['relay-signature'], 't=1,v1=abc');
  assert.is(seen.headers['user-agent'], DEFAULT_USER_AGENT);
  assert.is(seen.headers.host, `${HOOKS}:${ctx.hooksPort}`);
});

test('given one attempt, then the name is resolved exactly once and the connection goes to the resolved address', async (ctx) => {
  await post(ctx, '/ok');
  assert.equal(queriesFor(ctx, HOOKS), ['A', 'AAAA']);
  assert.equal(dials, [{ host: '127.0.0.1', port: ctx.hooksPort }]);
});

test('given a caller User-Agent, then it is sent as is; a caller Host or Content-Length is replaced', async (ctx) => {
  await post(ctx, '/ok', { headers: { 'user-agent': 'Relay/2.3 (+https://relay.example)', Host: 'internal.example', 'content-length': '1' } });
  assert.is(ctx.seen[0].headers['user-agent'], 'Relay/2.3 (+https://relay.example)');
  assert.is(ctx.seen[0].headers.host, `${HOOKS}:${ctx.hooksPort}`);
  assert.is(ctx.seen[0].body, '{"type":"email.delivered","id":"evt_1"}');
});

test('given a 204, then the attempt succeeds with no snippet', async (ctx) => {
  assert.equal({ ...(await post(ctx, '/no-content')), durationMs: 0 }, { httpStatus: 204, errorCode: null, durationMs: 0, responseSnippet: null });
});

test('given a 500 or a 410, then http_error with the status and the body as snippet', async (ctx) => {
  assert.equal({ ...(await post(ctx, '/fail')), durationMs: 0 }, { httpStatus: 500, errorCode: 'http_error', durationMs: 0, responseSnippet: 'internal trouble' });
  assert.equal((await post(ctx, '/gone')).httpStatus, 410);
});

test('given a 302, then redirect with the status, and the Location is never requested', async (ctx) => {
  const result = await post(ctx, '/redirect');
  assert.is(result.httpStatus, 302);
  assert.is(result.errorCode, 'redirect');
  assert.equal(ctx.seen.map((s) => s.url), ['/redirect']);
  assert.is(ctx.connections, 1);
});

test('given a server that never answers, then timeout within the total limit', async (ctx) => {
  const result = await post(ctx, '/hang', { totalTimeoutMs: 300 });
  assert.is(result.errorCode, 'timeout');
  assert.is(result.httpStatus, null);
  assert.ok(result.durationMs >= 250 && result.durationMs < 2000, `took ${result.durationMs} ms`);
});

test('given a 200 whose body never ends, then the status is the outcome once the total limit cuts the body short', async (ctx) => {
  const result = await post(ctx, '/slow-body', { totalTimeoutMs: 300 });
  assert.equal({ ...result, durationMs: 0 }, { httpStatus: 200, errorCode: null, durationMs: 0, responseSnippet: 'partial' });
  assert.ok(result.durationMs >= 250 && result.durationMs < 2000, `took ${result.durationMs} ms`);
});

test('given a peer that accepts TCP but never completes TLS, then timeout after the connect limit', async (ctx) => {
  const result = await post(ctx, '/ok', { url: `https://${HOOKS}:${ctx.silentPort}/ok`, allow: new Set([`${HOOKS}:${ctx.silentPort}`]), connectTimeoutMs: 200, totalTimeoutMs: 5000 });
  assert.is(result.errorCode, 'timeout');
  assert.ok(result.durationMs >= 150 && result.durationMs < 2000, `took ${result.durationMs} ms`);
});

test('given nothing listening, then connection_refused', async (ctx) => {
  const result = await post(ctx, '/ok', { url: `https://${HOOKS}:${ctx.closedPort}/ok`, allow: new Set([`${HOOKS}:${ctx.closedPort}`]) });
  assert.equal({ ...result, durationMs: 0 }, { httpStatus: null, errorCode: 'connection_refused', durationMs: 0, responseSnippet: null });
});

test('given a certificate for another name, then tls_error and no request is sent', async (ctx) => {
  const result = await post(ctx, '/ok', { url: `https://${HOOKS}:${ctx.wrongNamePort}/ok`, allow: new Set([`${HOOKS}:${ctx.wrongNamePort}`]) });
  assert.is(result.errorCode, 'tls_error');
  assert.is(result.httpStatus, null);
});

test('given a certificate from a CA the client does not trust, then tls_error', async (ctx) => {
  const result = await post(ctx, '/ok', { ca: undefined });
  assert.is(result.errorCode, 'tls_error');
  assert.is(ctx.seen.length, 0);
});

test('given a 1 MB response, then at most the cap is read and the attempt is still a 200', async (ctx) => {
  const result = await post(ctx, '/big', { maxResponseBytes: 1000 });
  assert.is(result.httpStatus, 200);
  assert.is(result.errorCode, null);
  assert.is(result.responseSnippet, 'x'.repeat(1000));
  const byDefault = await post(ctx, '/big');
  assert.is(byDefault.responseSnippet?.length, 64 * 1024);
});

test('given an AAAA-only name, then the connection goes to that IPv6 address', async (ctx) => {
  if (!ctx.hooks6Port) return console.log('  (skipped: no IPv6 loopback)');
  ctx.dns.setZone([{ name: HOOKS, type: 'AAAA', data: '::1' }]);
  const result = await post(ctx, '/ok', { url: `https://${HOOKS}:${ctx.hooks6Port}/ok`, allow: new Set([`${HOOKS}:${ctx.hooks6Port}`]) });
  assert.is(result.httpStatus, 200);
  assert.equal(dials, [{ host: '::1', port: ctx.hooks6Port }]);
});

test('given no allow entry, when the name resolves to 127.0.0.1, then unsafe_destination after the lookup and without any connection', async (ctx) => {
  const loopbackName = 'loopback.relay.test';
  ctx.dns.setZone([{ name: loopbackName, type: 'A', data: '127.0.0.1' }]);
  const result = await post(ctx, '/ok', { url: `https://${loopbackName}/ok`, allow: new Set() });
  assert.equal({ ...result, durationMs: 0 }, { httpStatus: null, errorCode: 'unsafe_destination', durationMs: 0, responseSnippet: null });
  assert.equal(queriesFor(ctx, loopbackName), ['A', 'AAAA'], 'refused on the answer, not on the URL');
  assert.equal(dials, []);
  const destination = await resolveDestination(loopbackName, { dnsServers: [ctx.dns.address], allow: new Set(), port: 443 });
  assert.equal(destination, { ok: false, errorCode: 'unsafe_destination', message: `${loopbackName} resolves to an address in loopback (127.0.0.0/8); webhooks are only delivered to public addresses.` });
  assert.not.match(destination.ok ? '' : destination.message, '127.0.0.1', 'the address itself is not revealed');
});

test('given an allow entry, then the range check is skipped but the name is still resolved', async (ctx) => {
  const destination = await resolveDestination(HOOKS, { dnsServers: [ctx.dns.address], allow: new Set([`${HOOKS}:${ctx.hooksPort}`]), port: ctx.hooksPort });
  assert.equal(destination, { ok: true, address: '127.0.0.1', family: 4 });
  assert.equal(queriesFor(ctx, HOOKS), ['A', 'AAAA']);
  const otherPort = await resolveDestination(HOOKS, { dnsServers: [ctx.dns.address], allow: new Set([`${HOOKS}:${ctx.hooksPort}`]), port: 443 });
  assert.is(otherPort.ok ? 'ok' : otherPort.errorCode, 'unsafe_destination', 'the entry covers that port only');
});

test('given DNS rebinding (public at creation, loopback at delivery), then the attempt is refused with no connection', async (ctx) => {
  const name = 'rebind.relay.test';
  ctx.dns.setZone([{ name, type: 'A', data: '8.8.8.8' }]);
  assert.equal(await checkResolvesPublic(name, { dnsServers: [ctx.dns.address], allow: new Set() }), { ok: true });
  ctx.dns.setZone([{ name, type: 'A', data: '127.0.0.1' }]);
  const result = await post(ctx, '/ok', { url: `https://${name}/hook`, allow: new Set() });
  assert.is(result.errorCode, 'unsafe_destination');
  assert.equal(dials, []);
  assert.is(ctx.connections, 0);
});

test('given a name mixing public and private answers, then it is refused at creation and at delivery', async (ctx) => {
  const name = 'mixed.relay.test';
  for (const zone of [
    [{ name, type: 'A' as const, data: '8.8.8.8' }, { name, type: 'A' as const, data: '10.0.0.1' }],
    [{ name, type: 'A' as const, data: '8.8.8.8' }, { name, type: 'AAAA' as const, data: '::1' }],
    [{ name, type: 'AAAA' as const, data: '2606:4700:4700::1111' }, { name, type: 'AAAA' as const, data: 'fd00::1' }],
  ]) {
    ctx.dns.setZone(zone);
    const check = await checkResolvesPublic(name, { dnsServers: [ctx.dns.address], allow: new Set() });
    assert.is(check.ok ? 'ok' : check.errorCode, 'unsafe_destination', JSON.stringify(zone));
    const result = await post(ctx, '/ok', { url: `https://${name}/hook`, allow: new Set() });
    assert.is(result.errorCode, 'unsafe_destination', JSON.stringify(zone));
  }
  assert.equal(dials, []);
});

test('given a name that does not exist, has no address or whose server fails, then dns_failure', async (ctx) => {
  ctx.dns.setZone([
    { name: 'txt-only.relay.test', type: 'TXT', data: 'v=spf1 -all' },
    { name: 'broken.relay.test', type: 'SERVFAIL' },
  ]);
  for (const name of ['missing.relay.test', 'txt-only.relay.test', 'broken.relay.test']) {
    const check = await checkResolvesPublic(name, { dnsServers: [ctx.dns.address], allow: new Set() });
    assert.is(check.ok ? 'ok' : check.errorCode, 'dns_failure', name);
    const result = await post(ctx, '/ok', { url: `https://${name}/hook`, allow: new Set() });
    assert.is(result.errorCode, 'dns_failure', name);
  }
  assert.equal(dials, []);
});

test('given a URL the rules refuse, then unsafe_destination before any lookup', async (ctx) => {
  for (const url of [`http://${HOOKS}:${ctx.hooksPort}/ok`, `https://127.0.0.1:${ctx.hooksPort}/ok`, `https://2130706433:${ctx.hooksPort}/ok`, `https://${HOOKS}:${ctx.hooksPort + 1}/ok`]) {
    const result = await post(ctx, '/ok', { url });
    assert.is(result.errorCode, 'unsafe_destination', url);
  }
  assert.equal(ctx.dns.queries, []);
  assert.equal(dials, []);
});

test('given an allow entry localhost:port, then https://localhost:port/ is resolved by the system (/etc/hosts), with or without DNS servers, and delivered', async (ctx) => {
  const allow = new Set([`localhost:${ctx.localPort}`]);
  const url = `https://localhost:${ctx.localPort}/hook`;
  for (const dnsServers of [[], [ctx.dns.address]]) {
    dials.length = 0;
    const result = await post(ctx, '/hook', { url, allow, dnsServers });
    assert.equal([result.httpStatus, result.errorCode], [204, null], `resolvers: ${JSON.stringify(dnsServers)}`);
    assert.equal(dials, [{ host: '127.0.0.1', port: ctx.localPort }], 'connected to the address the system gives for localhost');
  }
  assert.equal(queriesFor(ctx, 'localhost'), ['A', 'AAAA'], 'the configured DNS server was asked first; it does not know localhost');
  assert.equal(await checkResolvesPublic('localhost', { dnsServers: [], allow, port: ctx.localPort }), { ok: true });
});

test('given an allow entry for an address, then https://127.0.0.1:port/ is delivered with the certificate checked against that address', async (ctx) => {
  const result = await post(ctx, '/hook', { url: `https://127.0.0.1:${ctx.localPort}/hook`, allow: new Set([`127.0.0.1:${ctx.localPort}`]) });
  assert.equal([result.httpStatus, result.errorCode], [204, null]);
  assert.equal(ctx.dns.queries, [], 'an address needs no lookup');
});

test('given an allow entry localhost:port, then localhost on any other port is refused before any lookup or connection', async (ctx) => {
  const allow = new Set([`localhost:${ctx.localPort}`]);
  for (const url of [`https://localhost/hook`, `https://localhost:${ctx.localPort + 1}/hook`, `https://127.0.0.1:${ctx.localPort}/hook`]) {
    const result = await post(ctx, '/hook', { url, allow, dnsServers: [] });
    assert.is(result.errorCode, 'unsafe_destination', url);
  }
  assert.equal(dials, []);
  const unlisted = await resolveDestination('localhost', { dnsServers: [ctx.dns.address], allow, port: 443 });
  assert.is(unlisted.ok ? 'ok' : unlisted.errorCode, 'dns_failure', 'another port is not allowed: /etc/hosts is not consulted');
});

egress.run();
