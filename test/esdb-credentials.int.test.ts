// The EventStoreDB client is handed the connection string without its user name and password
// (whatever it prints of the string then holds no password) and the credentials beside it: they
// still reach the server, as HTTP/2 basic authorization on each call, percent-decoded, a ":" in
// the password included (RFC 3986: only the first ":" of the user information separates). The
// server here is a stand-in on TLS, trusted through tlsCAFile (the client sends credentials only
// over TLS), that records each call and answers it UNIMPLEMENTED.
import { randomUUID } from 'node:crypto';
import { createSecureServer, type Http2SecureServer } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { EsdbEventStore } from '../infra/esdb/event-store.ts';
import { makeTestCa } from './support/https-receiver.ts';

test('the credentials of the connection string reach the server on each call, decoded, with a ":" in the password', async () => {
  const ca = makeTestCa();
  const calls: Array<{ path: string; authorization: string | undefined }> = [];
  const server: Http2SecureServer = createSecureServer({ ...ca.issue(['localhost']), ALPNProtocols: ['h2'] }, (request) => {
    calls.push({ path: request.url, authorization: request.headers.authorization });
    request.stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12' }, { endStream: true });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const store = EsdbEventStore.connect(`esdb://ad%40min:p:ss%2Fw@localhost:${port}?tls=true&tlsCAFile=${encodeURIComponent(ca.caFile)}`);
  try {
    const failure = await store.append('s-1', [{ id: randomUUID(), type: 't', data: {} }], { expectedRevision: 'any' }).then(() => null, (error: Error) => error);
    // Positive marker: the call reached the server (and was answered UNIMPLEMENTED).
    assert.match(String(failure?.message), /UNIMPLEMENTED/);
    const append = calls.find((call) => call.path.endsWith('.Streams/Append'));
    assert.ok(append, JSON.stringify(calls));
    assert.is(append.authorization, `Basic ${Buffer.from('ad@min:p:ss/w').toString('base64')}`);
  } finally {
    await store.close();
    await new Promise((resolve) => server.close(resolve));
    ca.remove();
  }
});

test.run();
