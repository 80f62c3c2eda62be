// `relay inbound`: the SMTP server behind every verified domain's MAIL FROM MX
// (bounce.<domain> → RELAY_MAIL_HOST). It accepts mail only for valid return paths of Relay's
// own emails (refused at RCPT otherwise: it never relays anything anywhere), reads each report
// up to a size limit, and records what it says about the recipient its return path names.
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';
import { MAX_REPORT_BYTES } from '../../infra/mail/report-parser.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import type { SecretBox } from '../../infra/secrets/secret-box.ts';
import type { Emails } from '../services/email-stream.ts';
import { ingestReport } from '../services/feedback/ingest-report.ts';
import { findReportTarget, type ReportTarget } from '../services/feedback/report-targets.ts';

const MAX_RECIPIENTS_PER_MESSAGE = 50;

export interface InboundOptions {
  host: string;
  port: number;
  /** The name in the greeting: RELAY_MAIL_HOST. */
  hostname: string;
  /** PEM files; with both, STARTTLS is offered. */
  tlsCertFile: string | null;
  tlsKeyFile: string | null;
  events: EventStore;
  /** The email streams (services.emails): reports are recorded through them. */
  emails: Emails;
  documents: DocumentStore;
  secrets: SecretBox;
  now: () => Date;
  onError: (error: Error) => void;
  onReport?: (summary: Record<string, unknown>) => void;
}

export interface InboundServer {
  port: number;
  stop(): Promise<void>;
}

const smtpError = (code: number, message: string) => Object.assign(new Error(message), { responseCode: code });

export async function startInbound(options: InboundOptions): Promise<InboundServer> {
  const targets = new Map<string, ReportTarget[]>();
  const deps = { events: options.events, emails: options.emails, documents: options.documents, secrets: options.secrets, now: options.now };
  const tls = options.tlsCertFile && options.tlsKeyFile
    ? { cert: readFileSync(options.tlsCertFile), key: readFileSync(options.tlsKeyFile) }
    : null;
  const server = new SMTPServer({
    name: options.hostname,
    banner: 'Relay feedback (bounces and complaints only)',
    size: MAX_REPORT_BYTES,
    authOptional: true,
    disabledCommands: tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    ...(tls ?? {}),
    hideSTARTTLS: !tls,
    disableReverseLookup: true,
    logger: false,
    maxClients: 200,
    socketTimeout: 60_000,
    closeTimeout: 1_000,
    onMailFrom(_address, session, callback) {
      // Reports come from anyone (usually with the null sender); what matters is the RCPT.
      targets.set(session.id, []);
      callback();
    },
    onRcptTo(address, session, callback) {
      const list = targets.get(session.id) ?? [];
      if (list.length >= MAX_RECIPIENTS_PER_MESSAGE) return callback(smtpError(452, '4.5.3 Too many recipients'));
      findReportTarget(deps, address.address).then((found) => {
        if (!found.ok) return callback(smtpError(550, `5.1.1 <${address.address.slice(0, 100)}>: no such mailbox here (this server takes only Relay's return paths)`));
        list.push(found.target);
        targets.set(session.id, list);
        callback();
      }, (error: Error) => {
        options.onError(error);
        callback(smtpError(451, '4.3.0 Temporary failure, try again later'));
      });
    },
    onData(stream: SMTPServerDataStream, session: SMTPServerSession, callback) {
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_REPORT_BYTES) chunks.push(chunk);
      });
      stream.on('end', () => {
        const recipients = targets.get(session.id) ?? [];
        targets.delete(session.id);
        if (stream.sizeExceeded) return callback(smtpError(552, '5.3.4 Report too large'));
        const origin = { correlationId: `inbound-${randomUUID()}`, causationId: `smtp-${session.id}` };
        ingestReport(deps, recipients, Buffer.concat(chunks), origin).then((result) => {
          options.onReport?.({ format: result.format, recorded: result.recorded });
          callback(null, 'Report received');
        }, (error: Error) => {
          options.onError(error);
          callback(smtpError(451, '4.3.0 Temporary failure, try again later'));
        });
      });
    },
    onClose(session) {
      targets.delete(session.id);
    },
  });
  server.on('error', (error) => options.onError(error));
  await new Promise<void>((resolve, reject) => {
    const refuse = (error: NodeJS.ErrnoException) => reject(new Error(
      `the feedback SMTP server cannot listen on ${options.host}:${options.port}: ${error.code ?? error.message}; choose another RELAY_INBOUND_SMTP_PORT or RELAY_INBOUND_SMTP_HOST`,
      { cause: error },
    ));
    server.server.once('error', refuse);
    server.listen(options.port, options.host, () => {
      server.server.off('error', refuse);
      resolve();
    });
  });
  const port = (server.server.address() as { port: number }).port;
  return {
    port,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
