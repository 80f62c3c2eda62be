// A send within the spec's 10 MiB limit made with an invalid (or revoked) API key from Python's
// standard library (urllib.request, http.client: they write the whole body before they read any
// answer) gets its `401 invalid_api_key`, not `BrokenPipeError` / "Connection reset by peer".
// Relay answers 401 as soon as the headers are in; on a route that takes a body it then reads
// and discards the body up to that route's own limit (10 MiB for a send), within the linger time
// (lingerOf in apps/api/connection-limits.ts), so a body larger than what the kernel's buffers
// absorb (an HTML newsletter with inline images) does not leave the client blocked in sendall
// until a reset. The spec says "Missing, invalid or revoked key returns 401 invalid_api_key", and
// a developer whose key was revoked must read that answer, not a transport error an integration
// would retry forever. (A caller that stops sending is still cut after 1 s without a byte:
// test/api-connection-limits.int.test.ts.)
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const run = promisify(execFile);
const missing = await run('python3', ['--version']).then(() => undefined, () => 'python3 is not installed');

interface Fixture { t: TestApp; tenant: DeliveryTenant; dir: string; script: string }

const test = skippableSuite<Fixture>('401 to a large send from Python', missing);

/** 9 MiB of HTML: within the spec's 10 MiB request limit. */
const HTML_CHARACTERS = 9 * 1024 * 1024;

test.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.tenant = await deliveryTenant(f.t);
  f.dir = mkdtempSync(join(tmpdir(), 'relay-python-401-'));
  f.script = join(f.dir, 'send.py');
  // The ordinary way to call the API from Python without third-party packages.
  writeFileSync(f.script, [
    'import json, sys, urllib.request, urllib.error',
    'url, key, sender, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])',
    'body = json.dumps({"from": sender, "to": ["reader@example.com"], "subject": "Newsletter", "html": "<p>" + "x" * size + "</p>"}).encode("utf-8")',
    'request = urllib.request.Request(url, data=body, method="POST", headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})',
    'try:',
    '    with urllib.request.urlopen(request, timeout=30) as response:',
    '        result = {"status": response.status, "text": response.read().decode("utf-8")}',
    'except urllib.error.HTTPError as error:',
    '    result = {"status": error.code, "text": error.read().decode("utf-8")}',
    'except Exception as error:',
    '    result = {"status": None, "text": repr(error)}',
    'print(json.dumps(result))',
  ].join('\n'));
});

test.after(async (f) => {
  await f.t?.close();
  if (f.dir) rmSync(f.dir, { recursive: true, force: true });
});

async function sendFromPython(f: Fixture, key: string): Promise<{ status: number | null; text: string }> {
  const { stdout } = await run('python3', [f.script, `${f.t.url}/v1/emails`, key, `news@${f.tenant.domain}`, String(HTML_CHARACTERS)], { maxBuffer: 1024 * 1024 });
  return JSON.parse(stdout);
}

test('a 9 MiB send with a revoked or invalid key reaches Python urllib as 401 invalid_api_key, not a broken pipe', async (f) => {
  // (The same send with the valid key is admitted: the body is one the API accepts.)
  const admitted = await sendFromPython(f, f.tenant.key);
  assert.is(admitted.status, 202, admitted.text);
  const refused = await sendFromPython(f, 'rr_live_thisKeyWasRevokedLongAgo0000000000000');
  assert.is(refused.status, 401, `Python's urllib got ${refused.text}`);
  assert.is((JSON.parse(refused.text) as { error: { code: string } }).error.code, 'invalid_api_key');
});

test.run();
