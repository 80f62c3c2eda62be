// Closing a connection without losing the answer just written to it.
import type { Socket } from 'node:net';

/** Stops reading from `socket` for good: what the client still sends stays in the kernel's buffers and pushes back on it. */
export function stopReading(socket: Socket): void {
  socket.pause();
  // Node's request machinery resumes consumed sockets when a request is read or dumped.
  socket.resume = () => socket;
}

/**
 * Closes `socket` without losing the answer just written. Destroying a socket that still
 * has unread bytes makes the kernel send a reset, and a client still writing its body may
 * then report EPIPE instead of our answer. So the write side is ended (FIN after the answer)
 * and the socket is destroyed when the client is done (it closes its side, or its request
 * ends), or after `ms` at the latest.
 */
export function endThenClose(socket: Socket, ms: number, onDone: (done: () => void) => void = () => {}): void {
  const done = () => {
    clearTimeout(timer);
    socket.destroy();
  };
  const timer = setTimeout(done, ms);
  socket.once('close', () => clearTimeout(timer));
  socket.once('end', done);
  onDone(done);
  socket.end();
}
