// The chaos run's smarthost: a real smtp-server that accepts everything and keeps, instead of
// the messages, what the checks need: how often each recipient got each Message-ID, and every
// transaction a closed connection cut (MAIL FROM seen, DATA not answered). Only the senders
// connect here, and they close idle connections between transactions, so a cut transaction is
// one a SIGKILL of a sender interrupted: the transactions in flight at the sender kills.
import { SMTPServer, type SMTPServerSession } from 'smtp-server';

export interface CutTransaction {
  mailFrom: string;
  rcptTo: string[];
  /** When the connection closed (ms since the epoch). */
  at: number;
}

export interface Accepted {
  rcpt: string;
  mailFrom: string;
  messageId: string;
}

export interface CountingSink {
  port: number;
  /** "recipient messageId" → times the message was accepted for that recipient. */
  received: Map<string, number>;
  /** Recipients that received anything. */
  recipients: Set<string>;
  cut: CutTransaction[];
  /** Transactions begun (MAIL FROM) so far. */
  begun: number;
  close(): Promise<void>;
}

interface Transaction {
  mailFrom: string;
  rcptTo: string[];
}

const messageIdOf = (raw: Buffer): string => {
  const head = raw.subarray(0, raw.indexOf('\r\n\r\n') + 1 || raw.length).toString('latin1');
  return /^Message-ID:\s*(\S+)/im.exec(head)?.[1] ?? '(none)';
};

export async function startCountingSink(onAccepted: (message: Accepted) => void): Promise<CountingSink> {
  const open = new Map<string, Transaction>();
  const sink = { port: 0, received: new Map<string, number>(), recipients: new Set<string>(), cut: [] as CutTransaction[], begun: 0 };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    hideDSN: false,
    disableReverseLookup: true,
    logger: false,
    closeTimeout: 200,
    size: 1024 * 1024,
    onMailFrom(address, session, callback) {
      sink.begun++;
      // A transaction left by RSET was given up by the client, not cut.
      open.set(session.id, { mailFrom: address.address, rcptTo: [] });
      callback();
    },
    onRcptTo(address, session, callback) {
      open.get(session.id)?.rcptTo.push(address.address.toLowerCase());
      callback();
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        const transaction = open.get(session.id);
        open.delete(session.id);
        const messageId = messageIdOf(Buffer.concat(chunks));
        for (const rcpt of transaction?.rcptTo ?? []) {
          const key = `${rcpt} ${messageId}`;
          sink.received.set(key, (sink.received.get(key) ?? 0) + 1);
          sink.recipients.add(rcpt);
          onAccepted({ rcpt, mailFrom: transaction!.mailFrom, messageId });
        }
        callback(null, 'queued');
      });
    },
    onClose(session: SMTPServerSession) {
      const transaction = open.get(session.id);
      open.delete(session.id);
      if (transaction) sink.cut.push({ ...transaction, at: Date.now() });
    },
  });
  server.on('error', () => {}); // a killed sender drops its connections mid-session
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  sink.port = (server.server.address() as { port: number }).port;
  return Object.assign(sink, { close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
}
