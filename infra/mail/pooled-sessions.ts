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
