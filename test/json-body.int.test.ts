// apps/api/json-body.ts: a JSON body whose numbers JSON.parse would change (1e-400 → 0, 1e400 →
// Infinity → null, 30-digit integers rounded) is refused with 400 naming the field, where
// fastify's own parser keeps the changed value without a word. Everything else parses exactly
// as fastify's parser does, but for keys named __proto__ and constructor, kept as data where
// fastify's default refuses them; on a bare fastify app with Relay's error handling.
import Fastify, { type FastifyInstance } from 'fastify';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { exactJsonParser, firstInexactNumber, isExactJsonNumber, scanJson } from '../apps/api/json-body.ts';
import { registerErrorHandling } from '../apps/api/error-registry.ts';
import { SEND_BODY_BOUNDS } from '../apps/api/plugins/emails.schemas.ts';
import { worstCaseSendBody } from './support/worst-case-send.ts';

const test = suite<{ exact: FastifyInstance; stock: FastifyInstance; bounded: FastifyInstance }>('exact JSON numbers');

async function echoApp(exact: boolean, bounded = false): Promise<FastifyInstance> {
  const app = Fastify({ logger: false, bodyLimit: 10 * 1024 * 1024 });
  registerErrorHandling(app);
  if (exact) app.addContentTypeParser('application/json', { parseAs: 'string' }, exactJsonParser(app, bounded ? SEND_BODY_BOUNDS : undefined));
  app.post('/echo', async (request) => ({ body: request.body }));
  await app.ready();
  return app;
}

test.before(async (ctx) => {
  ctx.exact = await echoApp(true);
  ctx.stock = await echoApp(false);
  ctx.bounded = await echoApp(true, true);
});
test.after(async (ctx) => {
  await ctx.exact.close();
  await ctx.stock.close();
  await ctx.bounded.close();
});

const post = (app: FastifyInstance, payload: string, contentType = 'application/json') =>
  app.inject({ method: 'POST', url: '/echo', headers: { 'content-type': contentType }, payload });

const INEXACT = ['1e-400', '1e400', '-1e400', '123456789012345678901234567890', '9007199254740993', '0.10000000000000000001', '1.00000000000000000001', '2.4703282292062328e-324', `1${'0'.repeat(400)}`, `0.${'0'.repeat(400)}1`];
const EXACT = ['0', '-0', '1', '-1', '1.0', '1.50', '1e2', '1E+2', '100e-2', '0.1', '0.3', '1.5e-7', '5e-324', '1.7976931348623157e308', '9007199254740991', '9007199254740992', '123456789012345', '0.000001', '12345678.87654321', '1e21', '1.2345678901234568e+29'];

test('which numbers are exact: those JSON.stringify writes back as the same decimal value', () => {
  for (const text of INEXACT) assert.not.ok(isExactJsonNumber(text), text);
  for (const text of EXACT) assert.ok(isExactJsonNumber(text), text);
});

test('the first inexact number is found with its path; strings that look like numbers are not numbers', () => {
  assert.equal(firstInexactNumber('{"metadata":{"a":1,"b":[2,{"c":1e-400}]}}'), { path: 'body.metadata.b[1].c', text: '1e-400' });
  assert.equal(firstInexactNumber('[1, 2, 123456789012345678901234567890]'), { path: 'body[2]', text: '123456789012345678901234567890' });
  assert.equal(firstInexactNumber('1e400'), { path: 'body', text: '1e400' });
  assert.equal(firstInexactNumber('{"a\\"b":{},"x\\\\":[{}],"k":{"1e-400":"1e-400 and 123456789012345678901234567890","n":1e999}}'), { path: 'body.k.n', text: '1e999' });
  assert.is(firstInexactNumber('{"text":"call 1234567890123456789 or 1e-400","n":[1.5,2e3,0.1]}'), null);
  assert.is(firstInexactNumber(`{"deep":${'['.repeat(50_000)}1.25e3${']'.repeat(50_000)}}`), null);
  assert.equal(firstInexactNumber(`{"deep":${'[{"k":'.repeat(10_000)}1e-400${'}]'.repeat(10_000)}}`)?.path.slice(0, 24), 'body.deep[0].k[0].k[0].k');
  const long = firstInexactNumber(`{"n":${'9'.repeat(1000)}}`);
  assert.is(long!.path, 'body.n');
  assert.ok(long!.text.length <= 41, 'the echoed number is cut');
});

test('a body holding an inexact number is 400 validation_error naming the field; fastify alone changes it silently', async ({ exact, stock }) => {
  const cases: Array<[string, string, number | null]> = [
    ['{"metadata":{"tiny":1e-400}}', 'body.metadata.tiny', 0],
    ['{"metadata":{"id":123456789012345678901234567890}}', 'body.metadata.id', 1.2345678901234568e29],
    ['{"metadata":{"list":[1,1e400]}}', 'body.metadata.list[1]', null],
    ['{"to":"a@b.test","variables":{"price":0.10000000000000000001}}', 'body.variables.price', 0.1],
  ];
  for (const [payload, field, changed] of cases) {
    const refused = await post(exact, payload);
    assert.is(refused.statusCode, 400, refused.body);
    assert.is(refused.json().error.code, 'validation_error');
    assert.match(refused.json().error.message, new RegExp(`^${field.replace(/[.[\]]/g, '\\$&')}: the number `));
    // What the stock parser does with the same body: accepts and changes the number.
    const silent = await post(stock, payload);
    assert.is(silent.statusCode, 200);
    const leaf = field.split(/\.|\[/).slice(1).reduce((v: any, k) => v[k.replace(']', '')], silent.json().body);
    assert.is(leaf, changed);
  }
});

test('exact numbers and everything else parse as fastify parses them', async ({ exact, stock }) => {
  const payloads = [
    '{"a":1.0,"b":1e2,"c":-0,"d":0.1,"e":[5e-324,9007199254740991],"f":"123456789012345678901234567890 1e-400"}',
    JSON.stringify({ from: 'a@b.test', to: ['c@b.test'], subject: 'Hi', text: 'x'.repeat(100_000), metadata: { order: 42, nested: { ok: true } } }),
    '[]', '"text"', '12', 'null',
  ];
  for (const payload of payloads) {
    const a = await post(exact, payload);
    const b = await post(stock, payload);
    assert.is(a.statusCode, b.statusCode, payload.slice(0, 60));
    assert.equal(a.json(), b.json());
  }
  // Other answers are those of fastify's parser (malformed, empty, deeply nested).
  for (const payload of ['{"a":', '', `${'['.repeat(50_000)}${']'.repeat(50_000)}`]) {
    const a = await post(exact, payload);
    const b = await post(stock, payload);
    assert.is(a.statusCode, b.statusCode, payload.slice(0, 60));
    assert.is(a.body, b.body);
  }
  // Keys named __proto__ and constructor are data (a tag name, free-form metadata), where
  // fastify's default refuses them: kept as the own properties JSON.parse makes of them.
  for (const payload of ['{"__proto__":{"admin":true}}', '{"constructor":{"prototype":{"admin":true}}}', '{"a":[{"__proto__":1}]}']) {
    const a = await post(exact, payload);
    assert.is(a.statusCode, 200, a.body);
    assert.is(a.body, `{"body":${payload}}`);
  }
});

const manyKeys = (n: number, prefix: string, value: string) => `{${Array.from({ length: n }, (_, i) => `"${prefix}${i}":${value}`).join(',')}}`;

test('with the send bounds, a body past every limit is refused before JSON.parse, naming where', async ({ bounded }) => {
  const cases: Array<[string, string, RegExp]> = [
    [`{"metadata":${manyKeys(400_000, 'key', '"value"')}}`, 'body.metadata', /at most 1,333 keys and array items in all/],
    [`{"headers":${manyKeys(200_000, 'X-H', '"v"')}}`, 'body.headers', /at most 1,333 keys and array items/],
    [`{"metadata":{"list":[${Array.from({ length: 2_000 }, () => '0').join(',')}]}}`, 'body.metadata.list', /at most 1,333 keys and array items/],
    [`{"metadata":${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}}`, `body.metadata${'.a'.repeat(10)}`, /nests at most 11 levels/],
    [`{"metadata":{"a":${'['.repeat(1_000)}${']'.repeat(1_000)}}}`, `body.metadata.a${'[0]'.repeat(9)}`, /nests at most 11 levels/],
    [`${'['.repeat(50_000)}${']'.repeat(50_000)}`, `body${'[0]'.repeat(11)}`, /nests at most 11 levels/],
  ];
  for (const [payload, field, says] of cases) {
    const scan = scanJson(payload, SEND_BODY_BOUNDS);
    assert.is(scan.bound?.path, field);
    const refused = await post(bounded, payload);
    assert.is(refused.statusCode, 400, refused.body.slice(0, 200));
    assert.is(refused.json().error.code, 'validation_error');
    assert.ok(refused.json().error.message.startsWith(`${field}: `), refused.body.slice(0, 200));
    assert.match(refused.json().error.message, says);
  }
});

test('with the send bounds, the largest allowed send body passes the scan and parses as JSON.parse reads it', async ({ bounded }) => {
  const worst = worstCaseSendBody('acme.test').toString('utf8');
  assert.equal(scanJson(worst, SEND_BODY_BOUNDS), { inexact: null, bound: null });
  const response = await post(bounded, worst);
  assert.is(response.statusCode, 200);
  assert.equal(response.json().body, JSON.parse(worst));
});

test.run();
