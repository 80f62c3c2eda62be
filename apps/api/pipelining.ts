// How many requests one connection may have outstanding. Node parses every request in what it
// reads from a socket and hands each to the server at once, and an answer built out of turn
// waits, whole, behind the ones before it: a client that pipelines thousands of requests and
// reads no answer would make the server build and hold every one. So a connection has at most
// `inProgress` requests handled at once; requests received past them wait their turn (no answer
// is built for them), and reading from the connection stops until answers are written. A client
// that reads its answers gets every one, in order (RFC 9112 9.3.2). One that sent more than
// `waiting` past those in what was already read is refused: the waiting requests and every later
// one are answered 503 (after the answers of those handled), and the connection closes.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { endThenClose, stopReading } from './socket-closing.ts';

export interface PipeliningLimits {
  /** Requests of one connection handled at once. */
  inProgress: number;
  /** Requests of one connection received past those, waiting their turn. */
  waiting: number;
  /** After the refusal: how long the client has to read its answers before the connection is cut. */
  closeMs: number;
}

type Handler = (request: IncomingMessage, response: ServerResponse) => void;

interface Connection {
  readonly socket: Socket;
  /** Responses of the requests handed to the handler, until they close. */
  readonly inProgress: Set<ServerResponse>;
  readonly waiting: Array<[IncomingMessage, ServerResponse]>;
  /** Every request received whose response has not closed (handled, waiting or refused). */
  readonly open: Map<ServerResponse, IncomingMessage>;
  newest: IncomingMessage | null;
  /** Reading is held back until answers drain. */
  held: boolean;
  refusing: boolean;
  checkScheduled: boolean;
  readonly whenAnswered: Array<() => void>;
}

const connections = new WeakMap<Socket, Connection>();

/** Requests received in full whose answer is not written yet. */
const owed = (connection: Connection): number => {
  let n = 0;
  for (const request of connection.open.values()) if (request.complete) n++;
  return n;
};

/**
 * Calls `callback` once every request received in full on `socket` has its answer written (or
 * its response closed): at once when none is owed. What is still arriving then is never handled:
 * the caller answers for it (a parser error, a timeout).
 */
export function afterAnswersOwed(socket: Socket, callback: () => void): void {
  const connection = connections.get(socket);
  if (!connection || owed(connection) === 0) return callback();
  for (let i = connection.waiting.length - 1; i >= 0; i--) {
    if (!connection.waiting[i][0].complete) connection.waiting.splice(i, 1);
  }
  connection.whenAnswered.push(callback);
}

/**
 * Puts the limits on `server`: its 'request' listeners (the handler) then see a request only
 * when its turn comes. `refuse` answers a request past the bound, with Connection: close.
 */
export function limitPipelining(server: Server, limits: PipeliningLimits, refuse: Handler): void {
  const handlers = server.listeners('request') as Handler[];
  server.removeAllListeners('request');
  const handle: Handler = (request, response) => {
    for (const handler of handlers) handler.call(server, request, response);
  };

  const start = (connection: Connection, request: IncomingMessage, response: ServerResponse) => {
    connection.inProgress.add(response);
    handle(request, response);
  };

  // Node parses the rest of what it read whatever is paused now, and a request's `complete`
  // is set after its 'request' event: so reading is judged once the chunk is parsed.
  const check = (connection: Connection) => {
    connection.checkScheduled = false;
    if (connection.refusing || connection.socket.destroyed) return;
    const full = connection.inProgress.size >= limits.inProgress || connection.waiting.length > 0;
    // A body still arriving is read on: its request can only finish with it.
    const hold = full && (connection.newest === null || connection.newest.complete);
    if (hold && !connection.held) {
      connection.held = true;
      connection.socket.pause();
    } else if (!hold && connection.held) {
      connection.held = false;
      connection.socket.resume();
    }
  };
  const scheduleCheck = (connection: Connection) => {
    if (connection.checkScheduled) return;
    connection.checkScheduled = true;
    process.nextTick(check, connection);
  };

  const settled = (connection: Connection, response: ServerResponse) => {
    connection.open.delete(response);
    connection.inProgress.delete(response);
    const at = connection.waiting.findIndex(([, waiting]) => waiting === response);
    if (at !== -1) connection.waiting.splice(at, 1);
    while (!connection.refusing && connection.inProgress.size < limits.inProgress && connection.waiting.length > 0) {
      const [request, next] = connection.waiting.shift()!;
      if (!next.destroyed) start(connection, request, next);
    }
    scheduleCheck(connection);
    if (connection.whenAnswered.length > 0 && owed(connection) === 0) {
      for (const callback of connection.whenAnswered.splice(0)) callback();
    }
  };

  const overflow = (connection: Connection, request: IncomingMessage, response: ServerResponse) => {
    connection.refusing = true;
    const { socket } = connection;
    stopReading(socket);
    // Node calls destroySoon once the first response with Connection: close is written; unread
    // requests would make that a reset, which can cost the client the answers before it.
    if (!Object.hasOwn(socket, 'destroySoon')) {
      (socket as Socket & { destroySoon: () => void }).destroySoon = () => endThenClose(socket, limits.closeMs);
    }
    for (const [waitingRequest, waitingResponse] of connection.waiting.splice(0)) refuse(waitingRequest, waitingResponse);
    refuse(request, response);
  };

  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const connection = connectionOf(request.socket);
    connection.open.set(response, request);
    connection.newest = request;
    response.once('close', () => settled(connection, response));
    if (connection.refusing) refuse(request, response);
    else if (connection.inProgress.size < limits.inProgress && connection.waiting.length === 0) start(connection, request, response);
    else if (connection.waiting.length < limits.waiting) connection.waiting.push([request, response]);
    else overflow(connection, request, response);
    scheduleCheck(connection);
  });
}

function connectionOf(socket: Socket): Connection {
  let connection = connections.get(socket);
  if (connection) return connection;
  const created: Connection = {
    socket, inProgress: new Set(), waiting: [], open: new Map(), newest: null,
    held: false, refusing: false, checkScheduled: false, whenAnswered: [],
  };
  connections.set(socket, created);
  // Node resumes the socket whenever a request is read or its own write backpressure eases.
  const resume = socket.resume;
  socket.resume = function (this: Socket) {
    return created.held ? this : resume.call(this);
  };
  return created;
}
