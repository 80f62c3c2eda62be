// What every pool of SMTP sessions does with a connection it keeps (infra/mail/smtp-transport.ts,
// infra/mail/mx-connections.ts): send a message on it, keep it only once its pending replies are
// taken up, check an idle one with RSET before reuse, and close one politely.
import { PassThrough } from 'node:stream';
import type SMTPConnection from 'nodemailer/lib/smtp-connection/index.js';
import { asNodemailerError, type NodemailerError } from './smtp-replies.ts';

/** A pooled connection: `ended` settles when its socket closed, whoever closed it. */
export interface PooledSession {
  conn: SMTPConnection;
  ended: Promise<void>;
}

/** How long a QUIT may wait for its reply before the socket is closed anyway. */
const QUIT_GRACE_MS = 1000;

/**
 * True when the connection answered RSET within `replyMs`; false when it failed, the server had
 * dropped it, or its reply took longer however it trickled in (the connection is then closed).
 */
export function reset(session: PooledSession, replyMs: number): Promise<boolean> {
  if (session.conn.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const settle = (answered: boolean) => {
      clearDeadline();
      resolve(answered);
    };
    const clearDeadline = deadline(session.conn, replyMs, 'no complete reply to RSET', () => settle(false));
    // A connection the server dropped while idle may never answer: its end settles this.
    session.ended.then(() => settle(false));
    session.conn.reset((error) => settle(!error));
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
 * Bounds one exchange on the connection as a whole: nodemailer's socket timeout measures
 * silence, so a server that drips its replies a byte at a time would hold the connection and the
 * host's slot for as long as it likes. Past `ms` the exchange fails with a timeout (a temporary
 * failure: `${unmet} within ${ms} ms`) and the connection is closed, which forgets any callback
 * still waiting on it. Returns what clears the deadline once the exchange settled.
 */
function deadline(conn: SMTPConnection, ms: number, unmet: string, fail: (error: Error) => void): () => void {
  const timer = setTimeout(() => {
    fail(Object.assign(new Error(`${unmet} within ${ms} ms`), { code: 'ETIMEDOUT' }));
    conn.close();
  }, ms);
  return () => clearTimeout(timer);
}

/**
 * Bounds a session's setup (connection, greeting, EHLO, STARTTLS and EHLO again, AUTH) as a
 * whole (see deadline). Returns what clears the deadline once the setup settled.
 */
export function setupDeadline(conn: SMTPConnection, ms: number, fail: (error: Error) => void): () => void {
  return deadline(conn, ms, 'session setup (greeting, EHLO, STARTTLS, AUTH) not complete', fail);
}

/** What one transaction on a connection came to; `bodySent`: every byte and the dot went out. */
export interface Transacted {
  error: NodemailerError | null;
  info?: SMTPConnection.SentMessageInfo;
  bodySent: boolean;
}

/**
 * Sends one message on the connection. The connection reads the body only after DATA was
 * accepted, so the body's end means every byte and the end-of-data dot went out: the line
 * between `deferred` and `unknown` for a lost connection. Each side of that line has `replyMs`
 * at most, however the replies trickle in: the envelope (MAIL FROM, RCPT TO, DATA) until the
 * body is taken, and the reply to the dot. nodemailer's socket timeout measures silence, which
 * a server sending its replies a byte at a time never lets run out, holding the connection and
 * its slot for hours. Past a deadline the transaction ends with a timeout (before the body:
 * deferred; after the dot: the message's fate unknown) and the connection is closed.
 */
export function transact(conn: SMTPConnection, envelope: SMTPConnection.Envelope, raw: Buffer, replyMs: number): Promise<Transacted> {
  return new Promise((resolve) => {
    const body = new PassThrough();
    let bodySent = false;
    const done = (error: NodemailerError | null, info?: SMTPConnection.SentMessageInfo) => {
      clearDeadline();
      resolve({ error, info, bodySent });
    };
    const cutOff = (awaited: string) => deadline(conn, replyMs, `no complete reply to ${awaited}`, done);
    let clearDeadline = cutOff('the envelope (MAIL FROM, RCPT TO, DATA)');
    // The connection pipes the body once DATA was accepted.
    body.once('resume', () => clearDeadline());
    body.once('end', () => {
      bodySent = true;
      clearDeadline = cutOff('the end of data');
    });
    body.end(raw);
    conn.send(envelope, body, (err, info) => done(err ? asNodemailerError(err) : null, info));
  });
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
