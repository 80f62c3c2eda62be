// What every pool of SMTP sessions does with a connection it keeps (infra/mail/smtp-transport.ts,
// infra/mail/mx-connections.ts): check an idle one with RSET before reuse, and close one politely.
import type SMTPConnection from 'nodemailer/lib/smtp-connection/index.js';

/** A pooled connection: `ended` settles when its socket closed, whoever closed it. */
export interface PooledSession {
  conn: SMTPConnection;
  ended: Promise<void>;
}

/** How long a QUIT may wait for its reply before the socket is closed anyway. */
const QUIT_GRACE_MS = 1000;

/** True when the connection answered RSET; false when it failed or the server had dropped it. */
export function reset(session: PooledSession): Promise<boolean> {
  if (session.conn.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    // A connection the server dropped while idle may never answer: its end settles this.
    session.ended.then(() => resolve(false));
    session.conn.reset((error) => resolve(!error));
  });
}

/**
 * Calls `then` once nodemailer has taken up the replies already read after a transaction's last
 * one: it takes each on a turn of its own, and one no command waits for (a broken server that
 * answers the dot twice) closes the connection. A pool that kept the connection at once would
 * give that reply to the next transaction's first command, and every reply after it to the
 * wrong one: a message the server took would then be answered 354, not 250.
 */
export function afterPendingReplies(then: () => void): void {
  setImmediate(then);
}

/**
 * Gives the reply to the end of data `ms` at most, however it trickles in: nodemailer's socket
 * timeout measures silence, which a server sending its reply a byte at a time never lets run
 * out, holding the connection and its slot for hours. Past the deadline the transaction ends
 * with a timeout (`expire`: the message's fate is unknown) and the connection is closed.
 * Returns the stop, for when the reply is in.
 */
export function replyDeadline(conn: SMTPConnection, ms: number, expire: (error: Error & { code: string }) => void): () => void {
  const timer = setTimeout(() => {
    expire(Object.assign(new Error(`no complete reply to the end of data within ${ms} ms`), { code: 'ETIMEDOUT' }));
    // close() forgets the send in flight: its callback is not called, hence `expire`.
    conn.close();
  }, ms);
  return () => clearTimeout(timer);
}

/** QUIT, and the socket closed after QUIT_GRACE_MS if the server does not close it first. */
export function quit(session: PooledSession): void {
  if (session.conn.destroyed) return;
  const timer = setTimeout(() => session.conn.close(), QUIT_GRACE_MS);
  session.ended.then(() => clearTimeout(timer));
  try {
    session.conn.quit();
  } catch {
    session.conn.close();
  }
}
