// What every pool of SMTP sessions does with a connection it keeps (infra/mail/smtp-transport.ts,
// infra/mail/mx-connections.ts): send a message on it, keep it only once its pending replies are
// taken up, check an idle one with RSET before reuse, and close one politely.
import { PassThrough, type Readable, type Writable } from 'node:stream';
import type SMTPConnection from 'nodemailer/lib/smtp-connection/index.js';
import { asNodemailerError, type NodemailerError } from './smtp-replies.ts';

/** A pooled connection: `ended` settles when its socket closed, whoever closed it. */
export interface PooledSession {
  conn: SMTPConnection;
  ended: Promise<void>;
}

/** How long a QUIT may wait for its reply before the socket is closed anyway. */
const QUIT_GRACE_MS = 1000;

/** Where a pool tells of a connection it gave up on: the process's logger (pino's warn fits), or a test's. */
export interface SessionLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

/**
 * Null when the connection answered RSET within `replyMs`; else why it did not: it failed, the
 * server had dropped it, or its reply took longer however it trickled in (the connection is then
 * closed). Either way the pool closes it rather than reuse it.
 */
export function reset(session: PooledSession, replyMs: number): Promise<string | null> {
  if (session.conn.destroyed) return Promise.resolve('the connection was already closed');
  return new Promise((resolve) => {
    const settle = (failure: string | null) => {
      clearDeadline();
      resolve(failure);
    };
    const clearDeadline = deadline(session.conn, replyMs, 'no complete reply to RSET', (error) => settle(error.message));
    // A connection the server dropped while idle may never answer: its end settles this.
    session.ended.then(() => settle('the connection closed before the reply to RSET'));
    session.conn.reset((error) => settle(error ? error.message : null));
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

/**
 * The slowest a server may read a message body, in bytes a second: a message of n bytes has
 * bodyDeadlineMs to go out, counted from the 354 to its last byte handed to the kernel.
 * nodemailer's socket timeout measures silence, and every write the server takes up (a few bytes
 * at a time, however slowly) breaks it, so without an overall bound a server reading the body at
 * a trickle would hold the connection and its slot for as long as it likes. 32 KiB/s is far
 * below any link a receiving MTA works over, and fast enough that a 10 MiB message (the API's
 * request limit) goes out within about 5.5 minutes: with the smarthost's 2-minute envelope and
 * end-of-data deadlines, its transaction ends well inside the 20 minutes a begun one has before
 * the delivery decider calls its recipients unknown (claimGraceMs, domain/email/delivery.ts). The
 * floor of the command timeout keeps small messages on the footing of every other exchange.
 */
export const MIN_BODY_BYTES_PER_SECOND = 32 * 1024;

/** How long a body of `bytes` may take to go out: max(replyMs, bytes at minBytesPerSecond). */
export function bodyDeadlineMs(bytes: number, replyMs: number, minBytesPerSecond: number): number {
  return Math.max(replyMs, Math.ceil((bytes / minBytesPerSecond) * 1000));
}

/**
 * The size of the writes the body goes out in: the socket timeout then measures the silence
 * between writes the server takes up, as Postfix's smtp_data_xfer_timeout does, rather than the
 * time the whole message takes as one write.
 */
const BODY_CHUNK_BYTES = 16 * 1024;

/** What bounds one transaction's exchanges (see transact). */
export interface TransactionLimits {
  /** Longest wait for a reply, however it trickles in. */
  replyMs: number;
  /** See MIN_BODY_BYTES_PER_SECOND. */
  minBodyBytesPerSecond: number;
}

/**
 * The longest one transaction of a message of `bytes` may take, each of its deadlines run out
 * (see transact): the envelope, the body, the reply to the dot.
 */
export function transactionDeadlineMs(bytes: number, limits: TransactionLimits): number {
  return limits.replyMs + bodyDeadlineMs(bytes, limits.replyMs, limits.minBodyBytesPerSecond) + limits.replyMs;
}

/**
 * What one transaction on a connection came to. `bodyBegan`: DATA was answered and the body
 * started to go out (before that, nothing of the message reached the server); `bodySent`: every
 * byte and the dot went out.
 */
export interface Transacted {
  error: NodemailerError | null;
  info?: SMTPConnection.SentMessageInfo;
  bodyBegan: boolean;
  bodySent: boolean;
}

/** The connection's internals this module reads: the socket and the stream the body goes through. */
interface ConnectionInternals {
  _socket?: Writable;
  _currentDataStream?: Readable | false;
}

/**
 * Calls `then` once the body's every byte and the end-of-data dot were handed to the kernel,
 * which is as far as a sender can know they went out; never when the connection is lost first.
 * The connection pipes the body, dot-stuffed, through a stream of its own into the socket; once
 * that stream has ended, an empty write completes only after every write before it did.
 */
function whenBodyLeft(conn: SMTPConnection, then: () => void): void {
  const internals = conn as unknown as ConnectionInternals;
  const dataStream = internals._currentDataStream;
  if (!dataStream) return;
  dataStream.once('end', () => {
    const socket = internals._socket;
    if (!socket || socket.destroyed || socket.writableEnded) return;
    socket.write(Buffer.alloc(0), (error) => {
      if (!error) then();
    });
  });
}

/**
 * Sends one message on the connection. The message's fate on a lost connection turns on whether
 * its every byte and the end-of-data dot went out: before that it is `deferred`, after it
 * `unknown`. Each exchange has a deadline however the server trickles it: the envelope (MAIL
 * FROM, RCPT TO, DATA) `replyMs` until the 354, the body bodyDeadlineMs until it went out, the
 * reply to the dot `replyMs`. nodemailer's socket timeout measures silence, which a server
 * sending its replies (or reading the body) a byte at a time never lets run out, holding the
 * connection and its slot for hours. Past a deadline the transaction ends with a timeout (before
 * the dot went out: deferred; after: the message's fate unknown) and the connection is closed.
 */
export function transact(conn: SMTPConnection, envelope: SMTPConnection.Envelope, raw: Buffer, limits: TransactionLimits): Promise<Transacted> {
  return new Promise((resolve) => {
    const body = new PassThrough();
    let bodyBegan = false;
    let bodySent = false;
    let settled = false;
    const done = (error: NodemailerError | null, info?: SMTPConnection.SentMessageInfo) => {
      if (settled) return;
      settled = true;
      clearDeadline();
      resolve({ error, info, bodyBegan, bodySent });
    };
    const cutOff = (awaited: string) => deadline(conn, limits.replyMs, `no complete reply to ${awaited}`, done);
    let clearDeadline = cutOff('the envelope (MAIL FROM, RCPT TO, DATA)');
    // The connection pipes the body once DATA was accepted.
    body.once('resume', () => {
      if (settled) return;
      bodyBegan = true;
      clearDeadline();
      const bodyMs = bodyDeadlineMs(raw.length, limits.replyMs, limits.minBodyBytesPerSecond);
      // A failure at DATA: recipients RCPT TO refused keep their refusal (mx-transport.ts).
      clearDeadline = deadline(conn, bodyMs, `the message body (${raw.length} bytes) not all sent`, (error) => done(Object.assign(error, { command: 'DATA' })));
      whenBodyLeft(conn, () => {
        // A deadline started after the transaction settled would close a connection back in its pool.
        if (settled) return;
        bodySent = true;
        clearDeadline();
        clearDeadline = cutOff('the end of data');
      });
    });
    for (let at = 0; at < raw.length; at += BODY_CHUNK_BYTES) body.write(raw.subarray(at, at + BODY_CHUNK_BYTES));
    body.end();
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
