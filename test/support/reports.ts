// Reports as real MTAs and feedback loops write them, for the inbound server's tests:
// RFC 3464 delivery status notifications and RFC 5965 abuse reports, and a real SMTP client
// to deliver them.
import nodemailer from 'nodemailer';

/** Delivers a report to a return path at the feedback server on `port`, as a remote MTA would. */
export async function deliverReport(port: number, to: string, raw: string): Promise<void> {
  const client = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true });
  try {
    await client.sendMail({ envelope: { from: 'MAILER-DAEMON@mx.example.org', to }, raw });
  } finally {
    client.close();
  }
}

/** Delivers reports one after another to one return path, a few connections' worth of transactions each (as a busy MTA would). */
export async function deliverReports(port: number, to: string, raws: string[]): Promise<void> {
  const client = nodemailer.createTransport({ host: '127.0.0.1', port, secure: false, ignoreTLS: true, pool: true, maxConnections: 1, maxMessages: 100 });
  try {
    for (const raw of raws) await client.sendMail({ envelope: { from: 'MAILER-DAEMON@mx.example.org', to }, raw });
  } finally {
    client.close();
  }
}

const CRLF = '\r\n';
const lines = (...parts: string[]) => parts.join(CRLF);

export interface DsnOptions {
  /** The original recipient (Final-Recipient). */
  recipient: string;
  action: 'failed' | 'delayed' | 'delivered' | 'relayed' | 'expanded';
  status: string;
  diagnostic?: string;
  /** The Original-Envelope-Id Relay set (ENVID = the email id). */
  envelopeId?: string;
  originalMessageId?: string;
  /** The report's own Message-ID (its identity). */
  messageId?: string;
  reportingMta?: string;
}

let reports = 0;

export function dsn(options: DsnOptions): string {
  const boundary = `dsn-boundary-${++reports}`;
  const mta = options.reportingMta ?? 'mx.example.org';
  return lines(
    `From: Mail Delivery System <MAILER-DAEMON@${mta}>`,
    'To: <bounces@relay.test>',
    `Subject: ${options.action === 'failed' ? 'Undelivered Mail Returned to Sender' : options.action === 'delayed' ? 'Delayed Mail (still being retried)' : 'Successful Mail Delivery Report'}`,
    `Message-ID: <${options.messageId ?? `dsn.${reports}.${Date.now()}@${mta}`}>`,
    'Date: Mon, 23 Nov 2026 10:00:00 +0000',
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=delivery-status; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=us-ascii',
    '',
    `This is the mail system at host ${mta}.`,
    '',
    `<${options.recipient}>: ${options.diagnostic ?? options.status}`,
    '',
    `--${boundary}`,
    'Content-Type: message/delivery-status',
    '',
    `Reporting-MTA: dns; ${mta}`,
    ...(options.envelopeId ? [`Original-Envelope-Id: ${options.envelopeId}`] : []),
    'Arrival-Date: Mon, 23 Nov 2026 09:59:58 +0000',
    '',
    `Final-Recipient: rfc822; ${options.recipient}`,
    `Original-Recipient: rfc822;${options.recipient}`,
    `Action: ${options.action}`,
    `Status: ${options.status}`,
    ...(options.diagnostic ? [`Diagnostic-Code: smtp; ${options.diagnostic}`] : []),
    '',
    `--${boundary}`,
    'Content-Type: text/rfc822-headers',
    '',
    `Message-ID: <${options.originalMessageId ?? 'original@example.test'}>`,
    `To: ${options.recipient}`,
    'Subject: the original',
    '',
    `--${boundary}--`,
    '',
  );
}

export interface ArfOptions {
  recipient: string | null;
  feedbackType?: string;
  messageId?: string;
  originalMessageId?: string;
}

export function arf(options: ArfOptions): string {
  const boundary = `arf-boundary-${++reports}`;
  return lines(
    'From: <feedback@isp.example.org>',
    'To: <bounces@relay.test>',
    'Subject: FW: complaint',
    `Message-ID: <${options.messageId ?? `arf.${reports}.${Date.now()}@isp.example.org`}>`,
    'Date: Mon, 23 Nov 2026 10:00:00 +0000',
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=feedback-report; boundary="${boundary}"`,
    '',
    `--${boundary}`,
    'Content-Type: text/plain; charset=us-ascii',
    '',
    'This is an email abuse report for an email message received from IP 192.0.2.1.',
    '',
    `--${boundary}`,
    'Content-Type: message/feedback-report',
    '',
    `Feedback-Type: ${options.feedbackType ?? 'abuse'}`,
    'User-Agent: SomeGenerator/1.0',
    'Version: 1',
    ...(options.recipient ? [`Original-Rcpt-To: <${options.recipient}>`] : []),
    'Arrival-Date: Mon, 23 Nov 2026 09:00:00 +0000',
    '',
    `--${boundary}`,
    'Content-Type: message/rfc822',
    '',
    'From: <hello@example.test>',
    `To: ${options.recipient ?? 'redacted@isp.example.org'}`,
    'Subject: the original',
    `Message-ID: <${options.originalMessageId ?? 'original@example.test'}>`,
    '',
    'the original body',
    '',
    `--${boundary}--`,
    '',
  );
}
