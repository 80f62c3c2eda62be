// apps/api/INTERFACE-DECISIONS.md (Error codes) promises
// "505 http_version_not_supported | a request that is not HTTP/1.0 or HTTP/1.1".
// Node's parser takes HTTP/0.9 and HTTP/2.0 request lines itself: the API refuses them too.
import { connect } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp } from './support/app.ts';
import { answerOf, head } from './support/raw-http.ts';

function send(port: number, raw: string): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const socket = connect(port, '127.0.0.1', () => socket.write(raw));
    socket.on('data', (chunk) => { got += chunk; });
    socket.on('close', () => resolve(got));
    socket.on('error', () => resolve(got));
    setTimeout(() => { socket.destroy(); resolve(got); }, 2_000).unref();
  });
}

test('a request line that is not HTTP/1.0 or HTTP/1.1 is answered 505 http_version_not_supported', async () => {
  const t = await startTestApp({}, { listen: true });
  try {
    const port = Number(new URL(t.url!).port);
    const wrong: string[] = [];
    for (const version of ['HTTP/2.0', 'HTTP/0.9', 'HTTP/3.7']) {
      const answer = answerOf(await send(port, head([`GET /healthz ${version}`, 'Host: x', 'Connection: close'])));
      const code = answer.status === 505 ? JSON.parse(answer.body).error.code : null;
      if (answer.status !== 505 || code !== 'http_version_not_supported') wrong.push(`${version}: ${answer.status} ${answer.body.slice(0, 80)}`);
    }
    assert.equal(wrong, []);
  } finally {
    await t.close();
  }
});

test.run();
