// The suppression list's CSV export (GET /v1/workspaces/:id/suppressions/export) over real HTTP:
// a list of many pages comes out whole, in address order, as valid CSV; it is streamed, so a
// client that stops reading stops the server's reads of the store and one that goes away leaves
// the server healthy; a store failing part-way cuts the response short (a reset connection, so
// that over HTTP/1.0 too it cannot pass for the whole list) and is logged; HEAD reads nothing.
// And the suppression routes refuse query parameters they do not take.
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { buildApi } from '../apps/api/server.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { suppressionIdOf, type SuppressionEntry } from '../domain/management.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { call, errorCode, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

/**
 * The export reads the store 500 entries at a time: this list is 160 reads, about 23 MB of CSV.
 * Far more than the socket buffers of both ends of a loopback connection hold (some 5-7 MB on
 * Linux: a paused client lets the server read 35-50 pages), so a server that wrote without waiting
 * for its client would read every page.
 */
const PAGE = 500;
const PAGES = 160;

interface Ctx {
  t: TestApp;
  /** The API on the same stores, with the suppression reads counted (and failed on demand), listening. */
  api: FastifyInstance;
  url: string;
  owner: Caller;
  workspaceId: string;
  entries: SuppressionEntry[];
  reads: { count: number; failAt: number | null };
  logs: Array<Record<string, unknown>>;
}

const test = suite<Ctx>('suppression export: streamed CSV');

/** The suppressions collection's reads of one workspace go through `reads`: counted, and the `failAt`-th one throws. */
function counted(documents: DocumentStore, workspaceId: string, reads: Ctx['reads']): DocumentStore {
  return new Proxy(documents, {
    get(target, prop) {
      if (prop !== 'collection') {
        const value = Reflect.get(target, prop) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      }
      return (name: string) => {
        const collection = target.collection(name);
        if (name !== COLLECTIONS.suppressions) return collection;
        return new Proxy(collection, {
          get(c, p) {
            const value = Reflect.get(c, p) as unknown;
            if (p !== 'find') return typeof value === 'function' ? value.bind(c) : value;
            return async (options: { where?: Record<string, unknown> }) => {
              if (options?.where?.workspaceId === workspaceId) {
                reads.count++;
                if (reads.count === reads.failAt) throw new Error('document store unavailable (test)');
              }
              return c.find(options as never);
            };
          },
        });
      };
    },
  });
}

/** Addresses of about 235 characters (a line of about 285 bytes, 140 KB a page), in no particular order. */
function entriesOf(workspaceId: string): SuppressionEntry[] {
  const special = [
    '=cmd|\' /c calc\'!a0@formula.test', '+1@formula.test', '-2@formula.test', '@sum(a1)@formula.test',
    '"ann, x"@quoted.test', '"say ""hi"""@quoted.test', 'line\r\nbreak@stored-by-an-older-rule.test',
  ];
  const addresses = [...special];
  for (let i = 0; addresses.length < PAGE * PAGES - 17; i++) {
    const n = (i * 7919) % 1_000_003;
    addresses.push(`user-${String(n).padStart(7, '0')}-${'x'.repeat(200)}@domain-${n % 97}.example.test`);
  }
  const reasons: SuppressionEntry['reason'][] = ['manual', 'hard_bounce', 'complaint'];
  return addresses.map((address, i) => ({
    _id: suppressionIdOf(workspaceId, address), workspaceId, address, reason: reasons[i % 3],
    emailId: i % 3 === 0 ? null : `em_${i}`, createdAt: new Date(Date.UTC(2026, 0, 1) + i * 1000).toISOString(), lastEventId: null,
  }));
}

test.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.owner = await newCaller(ctx.t, 'owner@export.test');
  ({ workspaceId: ctx.workspaceId } = await workspaceWithProject(ctx.t, ctx.owner));
  ctx.entries = entriesOf(ctx.workspaceId);
  const collection = ctx.t.ctx.documents.collection<SuppressionEntry>(COLLECTIONS.suppressions);
  for (let i = 0; i < ctx.entries.length; i += 5000) {
    const { duplicates } = await collection.insertMany!(ctx.entries.slice(i, i + 5000));
    assert.equal(duplicates, []);
  }
  ctx.reads = { count: 0, failAt: null };
  ctx.logs = [];
  const sink = new Writable({ write(line, _encoding, done) { ctx.logs.push(JSON.parse(String(line))); done(); } });
  ctx.api = await buildApi({ ...ctx.t.ctx, documents: counted(ctx.t.ctx.documents, ctx.workspaceId, ctx.reads) }, { logger: pino({ level: 'info' }, sink) });
  ctx.url = await ctx.api.listen({ host: '127.0.0.1', port: 0 });
});
test.after(async (ctx) => {
  await ctx.api.close();
  await ctx.t.close();
});
test.before.each((ctx) => {
  ctx.reads.count = 0;
  ctx.reads.failAt = null;
});

const exportPath = (ctx: Ctx) => `/v1/workspaces/${ctx.workspaceId}/suppressions/export`;

/** Sends a GET and resolves with the response as soon as its headers are in; the body is left unread. */
function get(ctx: Ctx, path: string): Promise<{ response: IncomingMessage; abort(): void }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${ctx.url}${path}`, { headers: { cookie: ctx.owner.cookie } }, (response) => resolve({ response, abort: () => request.destroy() }));
    request.on('error', reject);
    request.end();
  });
}

/** The body read to its end; rejects if the response is cut short. */
function bodyOf(response: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    response.on('data', (chunk: Buffer) => chunks.push(chunk));
    response.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    response.on('error', reject);
    response.on('aborted', () => reject(new Error('response aborted')));
  });
}

const firstChunkOf = (response: IncomingMessage): Promise<Buffer> =>
  new Promise((resolve) => response.once('data', (chunk: Buffer) => { response.pause(); resolve(chunk); }));

/** Waits until the count of reads has not moved for `quietMs` (at most `timeoutMs`). */
async function readsSettled(ctx: Ctx, quietMs = 400, timeoutMs = 10_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let last = -1;
  let since = Date.now();
  while (Date.now() < deadline) {
    if (ctx.reads.count !== last) { last = ctx.reads.count; since = Date.now(); }
    if (Date.now() - since >= quietMs) return last;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`reads never settled (at ${ctx.reads.count})`);
}

/**
 * RFC 4180, strictly: fields separated by commas, every record ended by CRLF, a quoted field may
 * hold anything (a quote doubled); an unquoted one holds no quote, CR or LF.
 */
function parseCsv(text: string): string[][] {
  const field = /"((?:[^"]|"")*)"|([^",\r\n]*)/y;
  const records: string[][] = [];
  let record: string[] = [];
  let i = 0;
  while (i < text.length) {
    field.lastIndex = i;
    const match = field.exec(text)!;
    record.push(match[1] === undefined ? match[2] : match[1].replace(/""/g, '"'));
    i = field.lastIndex;
    if (text[i] === ',') { i++; continue; }
    if (!text.startsWith('\r\n', i)) throw new Error(`neither a comma nor CRLF after a field at ${i}: ${JSON.stringify(text.slice(i - 20, i + 20))}`);
    i += 2;
    records.push(record);
    record = [];
  }
  return records;
}

/** What a spreadsheet would run (a value beginning with = + - @ tab or CR) is exported behind a quote. */
const defused = (value: string) => (/^[=+\-@\t\r]/.test(value) ? `'${value}` : value);

test('a list of many pages: every entry once, in address order, as valid CSV with the usual headers', async (ctx) => {
  const { response } = await get(ctx, exportPath(ctx));
  assert.is(response.statusCode, 200);
  assert.is(response.headers['content-type'], 'text/csv; charset=utf-8');
  assert.is(response.headers['content-disposition'], `attachment; filename="suppressions-${ctx.workspaceId}.csv"`);
  assert.is(response.headers['cache-control'], 'private, no-store');
  const records = parseCsv(await bodyOf(response));
  assert.equal(records[0], ['address', 'reason', 'email_id', 'created_at']);
  const expected = [...ctx.entries]
    .sort((a, b) => (a._id < b._id ? -1 : a._id > b._id ? 1 : 0))
    .map((e) => [defused(e.address), e.reason, e.emailId ?? '', e.createdAt]);
  assert.is(records.length - 1, expected.length);
  for (let i = 0; i < expected.length; i++) assert.equal(records[i + 1], expected[i], `record ${i + 1}`);
  assert.ok(records.some((r) => r[0] === `'=cmd|' /c calc'!a0@formula.test`), 'a formula comes out defused');
  assert.ok(records.some((r) => r[0] === '"ann, x"@quoted.test'), 'commas and quotes survive quoting');
  assert.ok(records.some((r) => r[0] === 'line\r\nbreak@stored-by-an-older-rule.test'), 'a line break stays inside its field');
  assert.is(ctx.reads.count, PAGES, 'one read per page');
});

test('a client that stops reading after the first chunk: the server stops reading the store', async (ctx) => {
  const { response } = await get(ctx, exportPath(ctx));
  assert.is(response.statusCode, 200);
  const first = await firstChunkOf(response);
  assert.ok(first.toString('utf8').startsWith('address,reason,email_id,created_at\r\n'));
  const settled = await readsSettled(ctx);
  assert.ok(settled < PAGES / 2, `the server read ${settled} of ${PAGES} pages for a client that took one chunk`);
  // Taking the rest lets the reads go on to the end.
  response.resume();
  const rest = await bodyOf(response);
  assert.is((first.toString('utf8') + rest).split('\r\n').length - 1, ctx.entries.length + 2, 'every line (one entry holds a CRLF)');
  assert.is(ctx.reads.count, PAGES);
});

test('a client that goes away mid-export: the reads stop and the next request is answered', async (ctx) => {
  const { response, abort } = await get(ctx, exportPath(ctx));
  await firstChunkOf(response);
  abort();
  const settled = await readsSettled(ctx);
  assert.ok(settled < PAGES / 2, `the server read ${settled} of ${PAGES} pages for a client that went away`);
  const list = await get(ctx, `/v1/workspaces/${ctx.workspaceId}/suppressions?limit=3`);
  assert.is(list.response.statusCode, 200);
  assert.is(JSON.parse(await bodyOf(list.response)).suppressions.length, 3);
});

test('the store failing part-way: the response is cut short (its status already sent) and the failure logged', async (ctx) => {
  ctx.reads.failAt = 4;
  ctx.logs.length = 0;
  const { response } = await get(ctx, exportPath(ctx));
  assert.is(response.statusCode, 200);
  const outcome = await bodyOf(response).then(() => 'complete', (error: Error) => error.message);
  assert.is(outcome, 'response aborted');
  const logged = ctx.logs.find((l) => l.msg === 'suppression export failed part-way: response cut short');
  assert.ok(logged, JSON.stringify(ctx.logs));
  assert.match(String((logged.err as { message?: string })?.message), /document store unavailable \(test\)/);
  assert.is(logged.level, 50, 'logged as an error');
  ctx.reads.failAt = null;
  const list = await get(ctx, `/v1/workspaces/${ctx.workspaceId}/suppressions?limit=1`);
  assert.is(list.response.statusCode, 200);
});

test('HTTP/1.0, the store failing part-way: the connection is reset, so the part sent cannot pass for the whole list', async (ctx) => {
  // HTTP/1.0 has no chunked encoding: the end of the connection is the end of the body, and a
  // reverse proxy (nginx by default) speaks it to the API.
  ctx.reads.failAt = 2;
  const { raw, how } = await new Promise<{ raw: string; how: string }>((resolve) => {
    let raw = '';
    const { port } = new URL(ctx.url);
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(
      `GET ${exportPath(ctx)} HTTP/1.0\r\nHost: relay.test\r\nCookie: ${ctx.owner.cookie}\r\n\r\n`,
    ));
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => { raw += chunk; });
    socket.on('error', (error: NodeJS.ErrnoException) => resolve({ raw, how: `error ${error.code}` }));
    socket.on('end', () => resolve({ raw, how: 'clean end' }));
    socket.on('close', () => resolve({ raw, how: 'closed' }));
  });
  const [head, body = ''] = raw.split(/\r\n\r\n(.*)/s);
  assert.match(head, /^HTTP\/1\.1 200/);
  assert.not.match(head, /content-length|transfer-encoding/i, 'the body is delimited by the end of the connection');
  // The status and some of the first page came (what the connection took before the reset) ...
  assert.ok(body.startsWith('address,reason,email_id,created_at\r\n'), body.slice(0, 200));
  // ... and the end of the connection tells the client that this is not the whole list.
  assert.is(how, 'error ECONNRESET');
});

test('the store failing on the first page: an error answer, nothing of the file', async (ctx) => {
  ctx.reads.failAt = 1;
  const { response } = await get(ctx, exportPath(ctx));
  assert.is(response.statusCode, 500);
  const body = JSON.parse(await bodyOf(response));
  assert.is(body.error.code, 'internal_error');
});

test('HEAD: the headers of the export, without reading the list', async (ctx) => {
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    const request = httpRequest(`${ctx.url}${exportPath(ctx)}`, { method: 'HEAD', headers: { cookie: ctx.owner.cookie } }, resolve);
    request.on('error', reject);
    request.end();
  });
  assert.is(response.statusCode, 200);
  assert.is(response.headers['content-type'], 'text/csv; charset=utf-8');
  assert.is(await bodyOf(response), '');
  // The next request on the same server is answered, and only then are the reads counted.
  const list = await get(ctx, `/v1/workspaces/${ctx.workspaceId}/suppressions?limit=1`);
  assert.is(list.response.statusCode, 200);
  await bodyOf(list.response);
  assert.is(ctx.reads.count, 1, 'only the listing read the list');
});

test('the suppression routes refuse query parameters they do not take', async (ctx) => {
  const base = `/v1/workspaces/${ctx.workspaceId}/suppressions`;
  const refusals: Array<[Awaited<ReturnType<typeof call>>, string]> = [
    [await call(ctx.t, 'GET', `${exportPath(ctx)}?format=json`, { as: ctx.owner }), 'format'],
    [await call(ctx.t, 'POST', `${base}?force=1`, { as: ctx.owner, body: { address: 'new@query.test' } }), 'force'],
    [await call(ctx.t, 'DELETE', `${base}/${encodeURIComponent('+1@formula.test')}?force=1`, { as: ctx.owner }), 'force'],
    [await call(ctx.t, 'GET', `${base}?limit=2&sort=desc`, { as: ctx.owner }), 'sort'],
  ];
  for (const [refused, name] of refusals) {
    assert.is(refused.statusCode, 400, refused.body.slice(0, 300));
    assert.is(errorCode(refused), 'validation_error');
    assert.match(refused.json().error.message, `query.${name}`);
  }
  // Nothing was changed by the refused requests.
  const entries = ctx.t.ctx.documents.collection<SuppressionEntry>(COLLECTIONS.suppressions);
  assert.is(await entries.get(suppressionIdOf(ctx.workspaceId, 'new@query.test')), null);
  assert.ok(await entries.get(suppressionIdOf(ctx.workspaceId, '+1@formula.test')));
  assert.is((await call(ctx.t, 'GET', `${base}?limit=2`, { as: ctx.owner })).statusCode, 200);
});

test.run();
