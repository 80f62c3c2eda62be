// The dashboard's modules and stylesheet are revalidated on every page load (`Cache-Control:
// no-cache` + ETag, docs/dashboard.md), and If-None-Match is compared weakly and read as a list or
// `*` (RFC 9110 13.1.2). Behind nginx with gzip on (`gzip_proxied any`, in most operators'
// configs), the proxy turns the ETag weak (`W/"…"`), and a strong comparison sent all ~28 assets
// again on every load. Real TLS and HTTP/2 from the client to a private nginx, which proxies to
// the real API; and the comparison straight to Relay.
import * as assert from 'uvu/assert';
import { connect, type ClientHttp2Session } from 'node:http2';
import { gunzipSync } from 'node:zlib';
import { skippableSuite } from './support/skippable-suite.ts';
import { makeTestCa, type TestCa } from './support/https-receiver.ts';
import { nginxMissing, startNginx, type NginxInstance } from './support/nginx.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { freePort } from './support/free-port.ts';

const HOST = 'relay.example.test';
const ASSET = '/assets/main.ts';

interface Answer { status: number; headers: Record<string, string>; body: Buffer }

function get(session: ClientHttp2Session, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':method': 'GET', ':path': path, 'accept-encoding': 'gzip', ...headers });
    const chunks: Buffer[] = [];
    let head: Record<string, string> = {};
    stream.on('response', (h) => { head = Object.fromEntries(Object.entries(h).map(([k, v]) => [k, String(v)])); });
    stream.on('data', (d: Buffer) => chunks.push(d));
    stream.on('end', () => resolve({ status: Number(head[':status']), headers: head, body: Buffer.concat(chunks) }));
    stream.on('error', reject);
    stream.end();
  });
}

const test = skippableSuite<{ t: TestApp; ca: TestCa; nginx: NginxInstance; session: ClientHttp2Session }>('dashboard assets behind a gzip proxy', nginxMissing());

test.before(async (ctx) => {
  ctx.ca = makeTestCa();
  const port = await freePort();
  // The public origin is the proxy's; its port is known only once it listens, and the asset routes do not depend on it.
  ctx.t = await startTestApp({ PORT: String(port), RELAY_DASHBOARD_ORIGIN: `https://${HOST}` }, { listen: true, port });
  ctx.nginx = await startNginx({
    upstreamPort: port,
    tls: ctx.ca.issue([HOST]),
    httpExtra: 'gzip on; gzip_proxied any; gzip_types text/css text/javascript application/javascript application/json;',
  });
  ctx.session = connect(`https://127.0.0.1:${ctx.nginx.port}`, { ca: ctx.ca.ca, servername: HOST });
});

test.after(async (ctx) => {
  ctx.session?.close();
  await ctx.nginx?.stop();
  await ctx.t?.close();
  ctx.ca?.remove();
});

test('a module revalidated through the proxy with the weak tag the proxy gave is answered 304, not sent again', async ({ session }) => {
  const first = await get(session, ASSET);
  assert.is(first.status, 200);
  assert.is(first.headers['content-encoding'], 'gzip', 'the proxy compressed the module');
  assert.ok(gunzipSync(first.body).toString('utf8').includes('import'), 'the module itself');
  const tag = first.headers.etag;
  assert.match(tag, /^W\/"/, 'the proxy made the tag weak, as a content coding may (RFC 9110 8.8.1)');
  // What the browser sends on the next load: the tag it was given.
  const again = await get(session, ASSET, { 'if-none-match': tag });
  assert.is(again.status, 304, `revalidated with ${tag}: answered ${again.status} with ${again.body.length} bytes again`);
});

test('If-None-Match is compared weakly and read as a list (RFC 9110 13.1.2), straight to Relay too', async ({ t }) => {
  const strong = (await fetch(`${t.url}${ASSET}`)).headers.get('etag')!;
  assert.match(strong, /^"/);
  for (const condition of [`W/${strong}`, `"somethingelse", ${strong}`, '*']) {
    const response = await fetch(`${t.url}${ASSET}`, { headers: { 'if-none-match': condition } });
    await response.arrayBuffer();
    assert.is(response.status, 304, `If-None-Match: ${condition}`);
  }
});

test.run();
