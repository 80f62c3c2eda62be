// `Expect: 100-continue` (curl sends it on its own for bodies over 1 MiB; Go's net/http and
// Java's HttpClient when asked) on a request whose refusal depends only on its request line and
// headers: the refusal is the first and only answer, before any `100 Continue`, so the client
// never uploads the body. On POST /v1/emails: an `Idempotency-Key` that is not 1 to 128
// printable ASCII characters, an `Idempotency-Key` field sent twice, an unknown query parameter
// (`?dry_run=1`), each `400 validation_error` with the message it has when the body is sent in
// full. On every other route that takes a body, the route's path parameters and query alike
// (the template send `POST /v1/templates/{id}/test`, a management write): they are checked before
// the body is read (checkRequestTarget, apps/api/connection-limits.ts), after the key or session.
//
// RFC 9110 10.1.1: a client asks for 100 so as not to upload a body the server refuses on "the
// method, target URI, and header fields"; INTERFACE-DECISIONS.md (Error codes, 417) promises
// that `100 Continue` is sent only once the headers passed every check. A valid send still gets
// its 100 and is admitted.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { workspaceOwner, type Caller } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const run = promisify(execFile);
const missing = await run('curl', ['--version']).then(() => undefined, () => 'curl is not installed');

interface Fixture { t: TestApp; tenant: DeliveryTenant; owner: Caller; dir: string; file: string; templateTest: string; workspace: string }

const test = skippableSuite<Fixture>('100 Continue and refusals on the headers', missing);

test.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.tenant = await deliveryTenant(f.t);
  f.owner = await workspaceOwner(f.t, f.tenant.workspaceId, 'owner@expect-continue.test');
  f.dir = mkdtempSync(join(tmpdir(), 'relay-expect-'));
  f.file = join(f.dir, 'send.json');
  // 2 MiB: a valid send (the same file is admitted below), large enough that curl asks for 100.
  writeFileSync(f.file, JSON.stringify({
    from: `news@${f.tenant.domain}`, to: ['reader@example.com'], subject: 'Newsletter', html: `<p>${'x'.repeat(2 * 1024 * 1024)}</p>`,
  }));
  // Bodies the other routes take (a template send, a workspace): only their target is wrong.
  f.templateTest = join(f.dir, 'template-test.json');
  writeFileSync(f.templateTest, JSON.stringify({ from: `news@${f.tenant.domain}`, to: 'reader@example.com' }));
  f.workspace = join(f.dir, 'workspace.json');
  writeFileSync(f.workspace, JSON.stringify({ name: 'Acme' }));
});

test.after(async (f) => {
  await f.t?.close();
  if (f.dir) rmSync(f.dir, { recursive: true, force: true });
});

/** curl's own account (-v) of the status lines it received, and the final answer's body. */
async function curlPost(f: Fixture, path: string, headers: string[], file = f.file): Promise<{ statusLines: string[]; body: string }> {
  const { stdout, stderr } = await run('curl', [
    '-sS', '-v', '--max-time', '30', '-o', '-',
    '-H', 'Content-Type: application/json', '-H', 'Expect: 100-continue',
    ...headers.flatMap((h) => ['-H', h]),
    '--data-binary', `@${file}`, `${f.t.url}${path}`,
  ], { maxBuffer: 4 * 1024 * 1024 });
  const statusLines = stderr.split('\n').filter((line) => /^< HTTP\/1\.[01] \d{3}/.test(line)).map((line) => line.slice(2).trim());
  return { statusLines, body: stdout };
}

const curlSend = (f: Fixture, query: string, headers: string[]) => curlPost(f, `/v1/emails${query}`, [`Authorization: Bearer ${f.tenant.key}`, ...headers]);

test('a send refused on its Idempotency-Key or its query is refused before 100 Continue, not after its body is uploaded', async (f) => {
  // The file itself is a send the API admits, with 100 Continue.
  const admitted = await curlSend(f, '', []);
  assert.equal(admitted.statusLines.map((l) => l.split(' ')[1]), ['100', '202'], admitted.body);

  const cases: Array<[string, string, string[]]> = [
    ['an Idempotency-Key of 129 characters', '', [`Idempotency-Key: ${'k'.repeat(129)}`]],
    ['an Idempotency-Key sent twice', '', ['Idempotency-Key: order-1', 'Idempotency-Key: order-2']],
    ['an unknown query parameter', '?dry_run=1', []],
  ];
  const failures: string[] = [];
  for (const [label, query, headers] of cases) {
    const { statusLines, body } = await curlSend(f, query, headers);
    const statuses = statusLines.map((l) => l.split(' ')[1]);
    if (statuses.join(' ') !== '400') failures.push(`${label}: curl saw ${statusLines.join(' then ')} (expected 400 alone), ${body}`);
  }
  assert.equal(failures, []);
});

test('the template send and a management write refused on their path or query are refused before 100 Continue, with the route\'s own message', async (f) => {
  const session = `Cookie: ${f.owner.cookie}`;
  const project = f.tenant.projectId;
  const cases: Array<[string, string, string, RegExp]> = [
    ['a template send with an unknown query parameter', `/v1/templates/tpl_none/test?projectId=${project}&dry_run=1`, f.templateTest, /^query\.dry_run: /],
    ['a template send without its projectId', '/v1/templates/tpl_none/test', f.templateTest, /^query\.projectId: /],
    ['a template send whose template id is malformed', `/v1/templates/not.an.id/test?projectId=${project}`, f.templateTest, /^path\.id: /],
    ['a workspace created with a query parameter', '/v1/workspaces?name=Acme', f.workspace, /^query\.name: /],
  ];
  const failures: string[] = [];
  for (const [label, path, file, message] of cases) {
    const { statusLines, body } = await curlPost(f, path, [session], file);
    const statuses = statusLines.map((l) => l.split(' ')[1]).join(' ');
    const error = (() => { try { return (JSON.parse(body) as { error: { code: string; message: string } }).error; } catch { return null; } })();
    if (statuses !== '400' || error?.code !== 'validation_error' || !message.test(error.message)) {
      failures.push(`${label}: curl saw ${statusLines.join(' then ')} (expected 400 alone, validation_error, ${message}), ${body}`);
    }
  }
  // Without a session the answer stays the 401: the target is checked after the session.
  const anonymous = await curlPost(f, `/v1/templates/tpl_none/test?projectId=${project}&dry_run=1`, [], f.templateTest);
  if (anonymous.statusLines.map((l) => l.split(' ')[1]).join(' ') !== '401') failures.push(`no session: curl saw ${anonymous.statusLines.join(' then ')} (expected 401 alone)`);
  assert.equal(failures, []);
});

test.run();
