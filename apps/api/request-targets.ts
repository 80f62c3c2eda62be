// What each form of HTTP request target (RFC 9112 3.2) is routed as, and the answer to CONNECT:
// the server's rewriteUrl and 'connect' listener (./server.ts).
import { STATUS_CODES, type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { HOST_VALUE } from './connection-limits.ts';
import { envelope } from './error-registry.ts';
import { afterAnswersOwed } from './pipelining.ts';
import { endThenClose, stopReading } from './socket-closing.ts';

/** uri-host [":" port] (RFC 3986 3.2.2), as Host is checked, but never an empty host (RFC 9110 4.2.1). */
const validAuthority = (authority: string): boolean => authority !== '' && !authority.startsWith(':') && HOST_VALUE.test(authority);

/** scheme "://" authority, then the path, query (and a fragment, which is refused). */
const ABSOLUTE_FORM = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)(.*)$/s;

/**
 * Where a target no route may serve is routed: no route has this path (none is a wildcard or a
 * parameter at the root), so the not-found handler answers it, with the answer `rewrite` kept.
 */
const UNROUTED = '/\u0000';

type TargetAnswer = { allow: true } | { refused: string };

/**
 * What each form of request target is routed as. Node's parser takes an origin-form path, an
 * absolute-form URI, and anything that begins with `*`; fastify's router then routes `*` and
 * `*healthz` as if the `*` were the `/` (the dashboard's page, GET /healthz), and a fragment as
 * a query (`/v1/workspaces#limt=1` refused as an unknown parameter). Origin-form routes as it
 * is; absolute-form (which a server MUST accept, RFC 9112 3.2.2) as its path and query, its
 * authority checked as Host is (3.2.2: the URI's host stands for Host); `OPTIONS *` (3.2.4) is
 * about the server as a whole: 200 with the methods it serves. Every other target routes
 * nowhere and is answered 400, like a request Node's parser refuses, its connection closed.
 */
export function requestTargets() {
  const answers = new WeakMap<IncomingMessage, TargetAnswer>();
  const methods = new Set<string>(['OPTIONS']);
  const unrouted = (request: IncomingMessage, answer: TargetAnswer) => {
    answers.set(request, answer);
    return UNROUTED;
  };
  const refused = (request: IncomingMessage, message: string) => unrouted(request, { refused: `request: ${message}` });

  const rewrite = (request: IncomingMessage): string => {
    const url = request.url ?? '/';
    if (url === '*') return request.method === 'OPTIONS' ? unrouted(request, { allow: true }) : refused(request, 'the target * (asterisk-form) is only for OPTIONS');
    if (url.includes('#')) return refused(request, 'the target has a fragment (from #), which a client keeps: it sends the path and query alone');
    if (url.startsWith('/')) return url;
    const absolute = ABSOLUTE_FORM.exec(url);
    if (absolute === null) return refused(request, 'the target must be a path that begins with /, an absolute http URI, or * for OPTIONS');
    const [, scheme, authority, rest] = absolute;
    // Another scheme (ftp://…) is a resource this server does not have: no route, as before.
    if (!/^https?$/i.test(scheme)) return url;
    if (authority.includes('@')) return refused(request, 'the target URI has user information (user@host), which an http URI may not carry');
    if (!validAuthority(authority)) return refused(request, 'the target URI must name a host (a name or an address) with an optional port');
    // (What a proxy forwards as OPTIONS *, RFC 9112 3.2.4; to others an empty path is /.)
    if (rest === '' && request.method === 'OPTIONS') return unrouted(request, { allow: true });
    return rest === '' ? '/' : rest.startsWith('?') ? `/${rest}` : rest;
  };

  const answer = (request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined => {
    const known = answers.get(request.raw);
    if (known === undefined) return undefined;
    if ('refused' in known) return reply.status(400).send(envelope('validation_error', known.refused));
    return reply.status(200).header('allow', [...methods].sort().join(', ')).send();
  };

  return { rewrite, answer, methods };
}

/**
 * Answers a CONNECT after the answers owed to the requests before it (the 404 every method and
 * target no route serves gets), then closes the connection: what follows it is never read.
 */
export function refuseTunnel(request: IncomingMessage, socket: Socket, lingerMs: number): void {
  stopReading(socket);
  afterAnswersOwed(socket, () => {
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (!socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const body = JSON.stringify(envelope('not_found', `no route for CONNECT ${request.url ?? ''}: this server is no proxy and opens no tunnel`));
    const headers = [
      'HTTP/1.1 404 ' + STATUS_CODES[404],
      'Content-Type: application/json; charset=utf-8',
      `Content-Length: ${Buffer.byteLength(body)}`,
      `Date: ${new Date().toUTCString()}`,
      'Connection: close',
    ];
    socket.write(`${headers.join('\r\n')}\r\n\r\n${body}`);
    endThenClose(socket, lingerMs);
  });
}
