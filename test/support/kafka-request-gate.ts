// A kafkajs socket factory that can stop Kafka requests of one API key on their way to the
// broker: what a broker restart does to a request in flight, on demand. kafkajs writes each
// request as one frame (int32 size, int16 API key, ...), so the key is read from each write.
import net from 'node:net';
import type { ISocketFactory } from 'kafkajs';

/** Kafka's API key of FindCoordinator. */
export const FIND_COORDINATOR = 10;

/**
 * pass: requests go through. cut: the socket writing one is destroyed with an error instead,
 * as a connection closed mid-request. hold: the request waits until release(). refuse: every
 * new connection fails, as to a broker that is down.
 */
export type GateMode = 'pass' | 'cut' | 'hold' | 'refuse';

export interface RequestGate {
  socketFactory: ISocketFactory;
  mode: GateMode;
  /** Requests cut so far. */
  readonly cut: number;
  /** Requests held now. */
  readonly held: number;
  /** Sockets the factory made so far. */
  readonly opened: number;
  /** How many of the sockets made after the first `from` are not closed yet. */
  openSince(from: number): number;
  /** Lets the held requests go, in order, and passes the following ones. */
  release(): void;
}

function apiKeyOf(chunk: unknown): number | null {
  if (!Buffer.isBuffer(chunk) || chunk.length < 6 || chunk.readInt32BE(0) !== chunk.length - 4) return null;
  return chunk.readInt16BE(4);
}

export function requestGate(apiKey: number): RequestGate {
  let cut = 0;
  let opened = 0;
  /** Open sockets, by the order they were made in. */
  const open = new Map<net.Socket, number>();
  const held: Array<() => void> = [];
  const gate: RequestGate = {
    mode: 'pass',
    get cut() {
      return cut;
    },
    get held() {
      return held.length;
    },
    get opened() {
      return opened;
    },
    openSince(from) {
      return [...open.values()].filter((index) => index >= from).length;
    },
    release() {
      gate.mode = 'pass';
      for (const send of held.splice(0)) send();
    },
    socketFactory: ({ host, port, ssl, onConnect }) => {
      if (ssl) throw new Error('the request gate speaks plain TCP only');
      const index = opened++;
      if (gate.mode === 'refuse') {
        const refused = new net.Socket();
        process.nextTick(() => refused.destroy(Object.assign(new Error('connection refused by the test'), { code: 'ECONNREFUSED' })));
        return refused;
      }
      const socket = net.connect({ host, port }, onConnect);
      open.set(socket, index);
      socket.on('close', () => open.delete(socket));
      const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
      socket.write = ((...args: unknown[]) => {
        if (apiKeyOf(args[0]) === apiKey) {
          if (gate.mode === 'cut') {
            cut++;
            socket.destroy(new Error(`request with API key ${apiKey} cut by the test`));
            return false;
          }
          if (gate.mode === 'hold') {
            held.push(() => void (socket.destroyed ? undefined : write(...args)));
            return true;
          }
        }
        return write(...args);
      }) as typeof socket.write;
      return socket;
    },
  };
  return gate;
}
