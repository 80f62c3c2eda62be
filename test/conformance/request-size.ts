// Spec: POST /v1/emails rule 6 and Limits — a complete JSON request of more than 10 MiB is
// 413 message_too_large, refused without reading it all; up to 10 MiB only the content rules
// decide.
import { connect } from 'node:net';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, expectError, type HarnessRef, type Tenant } from './harness.ts';

const MiB = 1024 * 1024;

/** A send body of exactly `bytes` bytes of JSON, padded in metadata (html keeps its own size). */
function bodyOfSize(t: Tenant, bytes: number, html: number): string {
  const base = basicSend(t, { html: 'h'.repeat(html), text: '' });
  const length = Buffer.byteLength(JSON.stringify(base));
  const padded = JSON.stringify({ ...base, text: 'p'.repeat(bytes - length) });
  assert.is(Buffer.byteLength(padded), bytes);
  return padded;
}

/** Writes a request by hand and resolves with the status line the server answers, and how much was written. */
function rawRequest(url: string, head: string, write: (socket: ReturnType<typeof connect>) => void): Promise<{ status: number; text: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within 10 s; got: ${text.slice(0, 200)}`));
    }, 10_000);
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // The server may close while we still write: the answer, if any, is already in.
      if (text) return;
      clearTimeout(timer);
      reject(error);
    });
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1');
      const match = /^HTTP\/1\.1 (\d{3})[^]*?\r\n\r\n([^]*)$/.exec(text);
      if (match && text.includes('}')) {
        clearTimeout(timer);
        socket.destroy();
        resolve({ status: Number(match[1]), text });
      }
    });
    socket.on('connect', () => {
      socket.write(head);
      write(socket);
    });
  });
}

export function requestSizeSuite(test: Test, ref: HarnessRef): void {
  test('a request of 10 MiB + 1 byte is 413 message_too_large', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectError(await h.request('POST', '/v1/emails', { key: t.key.secret, payload: bodyOfSize(t, 10 * MiB + 1, 10) }), 413, 'message_too_large');
  });

  test('a request of exactly 10 MiB is read and judged on its content only', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    // html one character over its own limit: a content error, not a size error.
    expectError(await h.request('POST', '/v1/emails', { key: t.key.secret, payload: bodyOfSize(t, 10 * MiB, 10_000_001) }), 400, 'validation_error', 'body.html');
  });

  test('html of exactly 10,000,000 characters in a request of exactly 10 MiB is accepted', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = expectAccepted(await h.request('POST', '/v1/emails', { key: t.key.secret, payload: bodyOfSize(t, 10 * MiB, 10_000_000) }));
    assert.is((await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret })).statusCode, 200);
    // Accepted means processed afterwards: the email goes through the log like any other.
    await h.projected([sent.id]);
  });

  test('a request announcing more than 10 MiB is refused at once, before its body is sent', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const head = [
      'POST /v1/emails HTTP/1.1', `Host: 127.0.0.1`, `Authorization: Bearer ${t.key.secret}`,
      'Content-Type: application/json', `Content-Length: ${11 * MiB}`, '', '',
    ].join('\r\n');
    // Only the first bytes of the body are ever sent: an answer proves nothing waited for the rest.
    const answer = await rawRequest(h.instances[0].url!, head, (socket) => socket.write('{"from":'));
    assert.is(answer.status, 413, answer.text.slice(0, 300));
    assert.match(answer.text, /"code":"message_too_large"/);
  });

  test('a streamed (chunked) request is cut off once it passes 10 MiB', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const head = [
      'POST /v1/emails HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${t.key.secret}`,
      'Content-Type: application/json', 'Transfer-Encoding: chunked', '', '',
    ].join('\r\n');
    let written = 0;
    const answer = await rawRequest(h.instances[0].url!, head, (socket) => {
      const chunk = Buffer.alloc(256 * 1024, 'a');
      const pump = () => {
        // Up to 20 MiB, never finished: the server must answer without waiting for an end.
        while (written < 20 * MiB && !socket.destroyed) {
          written += chunk.length;
          // Paced, so that the answer is read before the server closes a connection still being written.
          if (!socket.write(`${chunk.length.toString(16)}\r\n${chunk.toString('latin1')}\r\n`)) return void socket.once('drain', () => setTimeout(pump, 5));
        }
      };
      pump();
    });
    assert.is(answer.status, 413, answer.text.slice(0, 300));
    assert.match(answer.text, /"code":"message_too_large"/);
  });

  test('without a valid key, a huge request is answered 401 without its body', async () => {
    const h = await ref.get();
    const head = ['POST /v1/emails HTTP/1.1', 'Host: 127.0.0.1', 'Content-Type: application/json', `Content-Length: ${11 * MiB}`, '', ''].join('\r\n');
    const answer = await rawRequest(h.instances[0].url!, head, (socket) => socket.write('{'));
    assert.is(answer.status, 401, answer.text.slice(0, 300));
    assert.match(answer.text, /"code":"invalid_api_key"/);
  });
}
