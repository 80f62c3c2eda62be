// Pipelined requests on one connection (apps/api/pipelining.ts): a client that reads its answers
// gets every one, in order, however many requests it sends together within the bound (16 handled
// at once, 64 more waiting; reading stops meanwhile); past the bound the rest is refused 503 after
// the answers owed and the connection closes. The metrics listener of its own has the same bound.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createRelayMetrics, listenForMetrics } from '../apps/relay-metrics.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { exchange, head } from './support/raw-http.ts';

interface Fixture { t: TestApp; port: number }

const test = suite<Fixture>('pipelined requests that are read');

test.before(async (f) => {
  f.t = await startTestApp({}, { listen: true });
  f.port = Number(new URL(f.t.url!).port);
});

test.after(async (f) => {
  await f.t.close();
});

interface Parsed { status: number; headers: Record<string, string>; body: string }

/** The complete responses at the start of `raw` (each with a Content-Length). */
function responsesIn(raw: string): Parsed[] {
  const out: Parsed[] = [];
  let rest = raw;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end === -1) return out;
    const [statusLine, ...lines] = rest.slice(0, end).split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) headers[line.slice(0, line.indexOf(':')).toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
    const length = Number(headers['content-length']);
    if (!Number.isSafeInteger(length) || rest.length < end + 4 + length) return out;
    out.push({ status: Number(statusLine.split(' ')[1]), headers, body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + length);
  }
}

test('80 requests pipelined in one write are all answered, in order, on a connection kept open', async (f) => {
  // /readyz asks the stores and answers later than /healthz: out of order, the bodies would not alternate.
  const paths = Array.from({ length: 80 }, (_, i) => (i % 2 === 0 ? '/readyz' : '/healthz'));
  const requests = paths.map((path) => head([`GET ${path} HTTP/1.1`, 'Host: x'])).join('');
  const { received, closed } = await exchange(f.port, requests, { waitMs: 10_000, enough: (r) => responsesIn(r).length >= paths.length });
  const answers = responsesIn(received);
  assert.is(answers.length, paths.length, `${answers.length} answers (closed: ${closed})`);
  answers.forEach((answer, i) => {
    assert.is(answer.status, 200, `answer ${i}: ${answer.status} ${answer.body.slice(0, 200)}`);
    assert.is(JSON.parse(answer.body).status, paths[i] === '/readyz' ? 'ready' : 'ok', `answer ${i} is not the one to ${paths[i]}`);
    assert.not.equal(answer.headers.connection, 'close');
  });
  assert.not.ok(closed);
});

test('the metrics listener: pipelined scrapes past the bound are refused 503 after the answers owed, and the connection closes', async () => {
  const listener = await listenForMetrics(createRelayMetrics(undefined, { process: false }), '127.0.0.1', 0);
  try {
    const port = Number(new URL(listener.url).port);
    const { received, closed } = await exchange(port, head(['GET /metrics HTTP/1.1', 'Host: x']).repeat(300), { waitMs: 10_000 });
    assert.ok(closed, 'the connection was kept open');
    const statuses = [...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    const ok = statuses.filter((status) => status === 200).length;
    assert.ok(ok <= 80, `${ok} scrapes answered on one connection`);
    assert.equal(statuses, [...Array(ok).fill(200), 503], statuses.join(' '));
  } finally {
    await listener.close();
  }
});

test.run();
