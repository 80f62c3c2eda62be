// HTTP/1.1 spoken by hand over a socket, for tests of what a server does with framing that
// ordinary clients never send (refused bodies, pipelining, junk).
import { connect } from 'node:net';
import * as assert from 'uvu/assert';

export interface Answer { status: number; headers: Record<string, string>; body: string }

/** A request head: the lines, then the blank line. */
export const head = (lines: string[]) => `${lines.join('\r\n')}\r\n\r\n`;

/** The first HTTP response in `raw`, its body cut at Content-Length. */
export function answerOf(raw: string): Answer {
  const end = raw.indexOf('\r\n\r\n');
  assert.ok(end > 0, `no complete HTTP response in ${JSON.stringify(raw.slice(0, 300))}`);
  const [statusLine, ...lines] = raw.slice(0, end).split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3}) /.exec(statusLine)?.[1]);
  assert.ok(status >= 100, `not a status line: ${statusLine}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const at = line.indexOf(':');
    headers[line.slice(0, at).trim().toLowerCase()] = line.slice(at + 1).trim();
  }
  const length = Number(headers['content-length']);
  const body = Number.isFinite(length) ? raw.slice(end + 4, end + 4 + length) : raw.slice(end + 4);
  return { status, headers, body };
}

/** What a raw exchange collected, and whether the server closed the connection (a timeout or `enough` did not). */
export interface Exchange { received: string; closed: boolean }

/**
 * Writes `raw` to the server on `port` and collects what it sends (as latin1) until the server
 * closes the connection, `enough` says the answer is complete, or `waitMs` passes.
 */
export function exchange(port: number, raw: string, options: { waitMs?: number; enough?: (received: string) => boolean } = {}): Promise<Exchange> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(raw));
    let received = '';
    let settled = false;
    const finish = (closed: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ received, closed });
    };
    const timer = setTimeout(() => finish(false), options.waitMs ?? 5_000);
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      received += d;
      if (options.enough?.(received)) finish(false);
    });
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('error', () => finish(true));
  });
}
