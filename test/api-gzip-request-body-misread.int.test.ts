// A request body in a content coding (`Content-Encoding: gzip`, what Go's gzip.Writer, Python's
// gzip.compress or `curl --data-binary @body.json.gz -H 'Content-Encoding: gzip'` produce when a
// developer compresses a large HTML email) is refused as what it is, an unsupported content
// coding, before its body is read: `415 unsupported_content_encoding` in the spec's envelope, the
// message naming Content-Encoding and what is accepted, with `Accept-Encoding: identity` (RFC
// 9110 8.4, 15.5.16). It is never read as the JSON text itself (gzip's bytes refused as "not
// UTF-8", which sends the developer looking for a charset problem). `Content-Encoding: identity`
// is the body as sent, and is read as any other.
//
// The clients here are the real ones a developer uses, in their default configurations.
import { execFile } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const run = promisify(execFile);
const missing = await Promise.all([run('curl', ['--version']), run('python3', ['--version'])]).then(() => undefined, () => 'curl or python3 is not installed');

interface Fixture { t: TestApp; tenant: DeliveryTenant; dir: string }

const test = skippableSuite<Fixture>('gzip request bodies', missing);

test.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.tenant = await deliveryTenant(f.t);
  f.dir = mkdtempSync(join(tmpdir(), 'relay-gzip-body-'));
});

test.after(async (f) => {
  await f.t?.close();
  if (f.dir) rmSync(f.dir, { recursive: true, force: true });
});

const sendBody = (tenant: DeliveryTenant, subject: string) => JSON.stringify({
  from: `news@${tenant.domain}`, to: ['reader@example.com'], subject, html: `<p>${'Hello, world. '.repeat(2_000)}</p>`,
});

/** What an answer to a gzip-encoded send must be: accepted (and read as the JSON that was compressed), or refused as an unsupported content coding. */
async function verdict(f: Fixture, status: number, text: string, subject: string): Promise<string> {
  if (status === 202) {
    const id = (JSON.parse(text) as { id: string }).id;
    const detail = await f.t.app.inject({ method: 'GET', url: `/v1/emails/${id}`, headers: { authorization: `Bearer ${f.tenant.key}` } });
    const seen = (detail.json() as { subject?: string }).subject;
    return seen === subject ? 'ok' : `accepted, but its subject reads ${JSON.stringify(seen)}`;
  }
  let parsed: { error?: { code?: unknown; message?: unknown } } = {};
  try {
    parsed = JSON.parse(text);
  } catch {
    return `${status} with a body that is not the envelope: ${text.slice(0, 200)}`;
  }
  const message = String(parsed.error?.message ?? '');
  if (status !== 415) return `${status} ${String(parsed.error?.code)}: ${message} (expected 415 naming Content-Encoding, or the send accepted)`;
  if (typeof parsed.error?.code !== 'string') return `415 without the envelope: ${text}`;
  return /content-encoding/i.test(message) ? 'ok' : `415 whose message does not name Content-Encoding: ${message}`;
}

test('curl --data-binary of a gzip file with Content-Encoding: gzip is decoded or refused as a content coding, never read as non-UTF-8 JSON', async (f) => {
  const subject = 'Compressed by curl';
  const file = join(f.dir, 'body.json.gz');
  writeFileSync(file, gzipSync(sendBody(f.tenant, subject)));
  const { stdout } = await run('curl', [
    '-sS', '--max-time', '30', '-o', '-', '-w', '\n%{http_code}',
    '-H', `Authorization: Bearer ${f.tenant.key}`, '-H', 'Content-Type: application/json', '-H', 'Content-Encoding: gzip',
    '--data-binary', `@${file}`, `${f.t.url}/v1/emails`,
  ]);
  const at = stdout.lastIndexOf('\n');
  assert.is(await verdict(f, Number(stdout.slice(at + 1)), stdout.slice(0, at), subject), 'ok');
});

test('Python urllib.request posting gzip.compress(json) with Content-Encoding: gzip gets the same clear answer', async (f) => {
  const subject = 'Compressed by Python';
  const script = join(f.dir, 'client.py');
  writeFileSync(script, [
    'import gzip, json, sys, urllib.request, urllib.error',
    'url, key, body = sys.argv[1], sys.argv[2], sys.argv[3].encode("utf-8")',
    'request = urllib.request.Request(url, data=gzip.compress(body), method="POST", headers={',
    '    "Authorization": "Bearer " + key, "Content-Type": "application/json", "Content-Encoding": "gzip"})',
    'try:',
    '    with urllib.request.urlopen(request, timeout=30) as response:',
    '        status, text = response.status, response.read().decode("utf-8")',
    'except urllib.error.HTTPError as error:',
    '    status, text = error.code, error.read().decode("utf-8")',
    'print(json.dumps({"status": status, "text": text}))',
  ].join('\n'));
  const { stdout } = await run('python3', [script, `${f.t.url}/v1/emails`, f.tenant.key, sendBody(f.tenant, subject)]);
  const { status, text } = JSON.parse(stdout) as { status: number; text: string };
  assert.is(await verdict(f, status, text, subject), 'ok');
});

/** One POST over a real socket; the answer's status, headers and body. */
function post(url: string, headers: Record<string, string>, body: Buffer): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers: { ...headers, 'content-length': String(body.length) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('the 415 names the coding and what is accepted, with Accept-Encoding: identity; an identity body is read as sent', async (f) => {
  const auth = { authorization: `Bearer ${f.tenant.key}`, 'content-type': 'application/json' };
  const refused = await post(`${f.t.url}/v1/emails`, { ...auth, 'content-encoding': 'gzip' }, gzipSync(sendBody(f.tenant, 'Refused')));
  assert.is(refused.status, 415, refused.text);
  assert.is(refused.headers['accept-encoding'], 'identity');
  const { error } = JSON.parse(refused.text) as { error: { code: string; message: string } };
  assert.is(error.code, 'unsupported_content_encoding');
  assert.match(error.message, /^header Content-Encoding: gzip is not accepted/);
  assert.match(error.message, /identity/);

  const subject = 'Sent as identity';
  const accepted = await post(`${f.t.url}/v1/emails`, { ...auth, 'content-encoding': 'identity' }, Buffer.from(sendBody(f.tenant, subject)));
  assert.is(await verdict(f, accepted.status, accepted.text, subject), 'ok');
});

test.run();
