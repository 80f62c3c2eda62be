// A real smtp-server on 127.0.0.1 for the mail transport tests: records every connection and
// every message (exact bytes, envelope with its DSN parameters, TLS state) and lets a test
// answer MAIL FROM, RCPT TO and DATA as it likes.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SMTPServer } from 'smtp-server';
import type { SMTPServerAddress, SMTPServerDataStream, SMTPServerEnvelopeDSN, SMTPServerOptions, SMTPServerSession } from 'smtp-server';

export interface TestCert {
  key: Buffer;
  cert: Buffer;
}

/** A self-signed certificate for localhost / 127.0.0.1 and the given extra DNS names. */
export function makeTestCert(dnsNames: string[] = []): TestCert {
  const dir = mkdtempSync(join(tmpdir(), 'relay-cert-'));
  try {
    const san = ['DNS:localhost', 'IP:127.0.0.1', ...dnsNames.map((n) => `DNS:${n}`)].join(',');
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=localhost',
      '-addext', `subjectAltName=${san}`, '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
    ], { stdio: 'ignore' });
    return { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function smtpError(code: number, message: string): Error {
  return Object.assign(new Error(message), { responseCode: code });
}

export interface ReceivedMessage {
  raw: Buffer;
  mailFrom: SMTPServerAddress | false;
  rcptTo: SMTPServerAddress[];
  dsn: SMTPServerEnvelopeDSN | undefined;
  secure: boolean;
  heloName: string;
  servername: string | false | null | undefined;
  sessionId: string;
}

/** What DATA answers: an error (with responseCode), else 250 with the reply text; or 'drop': the connection closes without a reply. */
export type DataAnswer = { reply?: string; error?: Error; /** Runs right after the answer was handed to the socket. */ after?: () => void } | 'drop';

export interface SmtpSinkOptions {
  /** Listen on this port (to come back on the port a client knows); default any free port. */
  port?: number;
  cert?: TestCert;
  /** TLS from the first byte (smtps). */
  implicitTls?: boolean;
  /** Refuse the STARTTLS command and do not announce it. */
  noStartTls?: boolean;
  /** Require AUTH with these credentials; otherwise auth is optional. */
  auth?: { user: string; pass: string };
  onMailFrom?: (address: SMTPServerAddress, session: SMTPServerSession) => Error | void;
  onRcptTo?: (address: SMTPServerAddress, session: SMTPServerSession) => Error | void;
  /** A promise holds the answer back until it settles (a slow smarthost): the client waits after its end of data. */
  onData?: (raw: Buffer, session: SMTPServerSession) => DataAnswer | Promise<DataAnswer>;
}

export interface SmtpSink {
  port: number;
  messages: ReceivedMessage[];
  /** Connections accepted so far. */
  connections: number;
  /** Connections that have ended so far. */
  closed: number;
  /** Every RCPT TO seen, accepted or not, with its arguments. */
  rcptCommands: SMTPServerAddress[];
  mailFromCommands: SMTPServerAddress[];
  /** Cuts every open client connection without a word, as a server restart would. */
  dropConnections(): void;
  close(): Promise<void>;
}

type ServerConnections = { connections: Set<{ session: SMTPServerSession; _socket: { destroy(): void } }> };

export async function startSmtpSink(options: SmtpSinkOptions = {}): Promise<SmtpSink> {
  const sink: Omit<SmtpSink, 'port' | 'close' | 'dropConnections'> = { messages: [], connections: 0, closed: 0, rcptCommands: [], mailFromCommands: [] };
  const serverOptions: SMTPServerOptions = {
    secure: options.implicitTls ?? false,
    key: options.cert?.key,
    cert: options.cert?.cert,
    disabledCommands: options.noStartTls ? ['STARTTLS'] : [],
    authOptional: !options.auth,
    allowInsecureAuth: true,
    hideDSN: false,
    // Replies carry exactly the enhanced codes a test writes into its error messages.
    hideENHANCEDSTATUSCODES: true,
    disableReverseLookup: true,
    logger: false,
    closeTimeout: 200,
    onConnect(_session, callback) {
      sink.connections++;
      callback();
    },
    onClose() {
      sink.closed++;
    },
    onAuth(auth, _session, callback) {
      if (options.auth && auth.username === options.auth.user && auth.password === options.auth.pass) return callback(null, { user: auth.username });
      callback(smtpError(535, 'Authentication failed'));
    },
    onMailFrom(address, session, callback) {
      sink.mailFromCommands.push(address);
      callback(options.onMailFrom?.(address, session) ?? null);
    },
    onRcptTo(address, session, callback) {
      sink.rcptCommands.push(address);
      callback(options.onRcptTo?.(address, session) ?? null);
    },
    onData(stream: SMTPServerDataStream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', async () => {
        const raw = Buffer.concat(chunks);
        const answer = (await options.onData?.(raw, session)) ?? {};
        if (answer === 'drop') {
          for (const connection of (server as unknown as ServerConnections).connections) {
            if (connection.session.id === session.id) connection._socket.destroy();
          }
          return;
        }
        if (answer.error) return callback(answer.error);
        sink.messages.push({
          raw,
          mailFrom: session.envelope.mailFrom,
          rcptTo: [...session.envelope.rcptTo],
          dsn: session.envelope.dsn ? { ...session.envelope.dsn } : undefined,
          secure: session.secure,
          heloName: session.hostNameAppearsAs,
          servername: session.servername,
          sessionId: session.id,
        });
        callback(null, answer.reply);
        answer.after?.();
      });
    },
  };
  const server = new SMTPServer(serverOptions);
  server.on('error', () => {}); // a client dropping mid-session is part of some tests
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.server.address() as { port: number }).port;
  return Object.assign(sink, {
    port,
    dropConnections: () => {
      for (const connection of (server as unknown as ServerConnections).connections) connection._socket.destroy();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }) as SmtpSink;
}
