// What the sender tells operators of the outcomes it appends, outside the API: every outcome
// other than sent/delivered is a log line at warn (email id, its workspace and project, so a
// bounce wave can be grouped by tenant from the log alone; the recipient's domain, never the
// address; transport, attempt, the SMTP reply without the addresses it echoes); a transport
// that cannot be used at all (the smarthost refuses the connection, TLS or the credentials) is
// one line at error per distinct cause and minute, however many emails it holds up; and every
// outcome is counted on /metrics (relay_delivery_attempts_total, relay_delivery_latency_seconds:
// apps/relay-metrics.ts).
import type { RecipientResultReport } from '../../../domain/email/delivery.ts';
import type { AdmittedMessage, DeliveryAttempted, DeliveryFailed } from '../../../domain/email/events.ts';
import type { Status } from '../../../domain/email/status.ts';
import { peerTextForLog } from '../../../infra/mail/smtp-replies.ts';
import type { DeliveryMetrics, DeliveryOutcomeLabel, DeliveryTransportLabel } from '../../relay-metrics.ts';
import type { DeliveryObserver } from './attempt.ts';

type Log = (message: string, fields: Record<string, unknown>) => void;

export interface OutcomeReportDeps {
  metrics?: DeliveryMetrics;
  /** The transport this sender uses: its series start at 0, so the first unknown outcome is an increase an alert sees. */
  transport?: string;
  warn: Log;
  error: Log;
  now: () => Date;
}

/** A cause of an unusable transport is logged again after this long, with how often it recurred meanwhile. */
export const UNUSABLE_LOG_INTERVAL_MS = 60_000;

/** Stages at which a smarthost refuses us rather than a recipient: no email can go out while they fail. */
const TRANSPORT_STAGES: ReadonlySet<string> = new Set(['connection', 'tls']);

const DELIVERY_OUTCOMES: readonly DeliveryOutcomeLabel[] = ['sent', 'delivered', 'deferred', 'hard_bounced', 'soft_bounced', 'failed', 'unknown'];

/** Characters of a reply a log line keeps (an SMTP reply line is at most 512 octets). */
export const REPLY_LOG_CHARS = 512;

/**
 * A receiving server's reply as a log line may hold it. Servers echo addresses in their replies
 * (Postfix: "550 5.1.1 <bob@example.org>: Recipient address rejected"), BCC recipients' too, and
 * the log names the recipient's domain only: every address loses its local part ("…@example.org").
 * Control characters (a reply's line breaks, anything a server sends) become spaces, and the text
 * is bounded. The event keeps the reply whole.
 */
export function replyForLog(reply: string | null | undefined): string | null | undefined {
  if (reply === null || reply === undefined) return reply;
  // Addresses are taken out of the whole text before it is cut, so no cut leaves a local part behind.
  const withoutAddresses = reply
    .replace(/"[^"]{0,64}"@/g, '…@')
    .replace(/[^\s<>()[\]\\,;:"\u0000-\u001f\u007f-\u009f]+/g, (word) => {
      const at = word.lastIndexOf('@');
      return at > 0 ? `…${word.slice(at)}` : word;
    });
  return peerTextForLog(withoutAddresses, REPLY_LOG_CHARS - 1);
}

const domainOfAddress = (address: string | null): string | null => (address === null ? null : address.slice(address.lastIndexOf('@') + 1));

/** The metric outcome of a recipient's status after an attempt (`unknown`: the transport could not tell whether it went out). */
function outcomeLabel(status: Status, result: RecipientResultReport['result'] | undefined): DeliveryOutcomeLabel {
  switch (status) {
    case 'sent': return 'sent';
    case 'delivered': return 'delivered';
    case 'delayed': return 'deferred';
    // Apart: a soft bounce (a full mailbox, a policy refusal, a deferral past the retry window)
    // says nothing against the address, and the bounce rate providers watch counts hard ones.
    case 'hard_bounced': return 'hard_bounced';
    case 'soft_bounced': return 'soft_bounced';
    default: return result === 'unknown' ? 'unknown' : 'failed';
  }
}

/**
 * Whether an outcome says the transport itself cannot be used: only a relay's (smtp) refusals
 * at connection or TLS. For `mx` those concern one destination's servers, a warning each.
 */
export const isTransportUnusable = (transport: string, report: Pick<RecipientResultReport, 'result' | 'stage'>): boolean =>
  transport === 'smtp' && report.result === 'deferred' && report.stage !== undefined && TRANSPORT_STAGES.has(report.stage);

/** Remembers causes for a minute: the first occurrence is logged, the rest counted into the next line. */
class CauseWindow {
  readonly #seen = new Map<string, { loggedAt: number; since: number }>();

  /** Null while `key` was logged within the interval; otherwise how many occurrences went unlogged before this one. */
  take(key: string, now: number): number | null {
    const known = this.#seen.get(key);
    if (known && now - known.loggedAt < UNUSABLE_LOG_INTERVAL_MS) {
      known.since++;
      return null;
    }
    for (const [other, entry] of this.#seen) if (now - entry.loggedAt >= UNUSABLE_LOG_INTERVAL_MS && other !== key) this.#seen.delete(other);
    this.#seen.set(key, { loggedAt: now, since: 0 });
    return known?.since ?? 0;
  }
}

export function deliveryOutcomeReport(deps: OutcomeReportDeps): DeliveryObserver {
  const causes = new CauseWindow();
  if (deps.transport) for (const outcome of DELIVERY_OUTCOMES) deps.metrics?.attempts(deps.transport as DeliveryTransportLabel, outcome);
  const count = (transport: string, outcome: DeliveryOutcomeLabel) => deps.metrics?.attempts(transport as DeliveryTransportLabel, outcome).inc();
  return {
    attempted(message: AdmittedMessage, outcome: DeliveryAttempted['data'], reports: readonly RecipientResultReport[], domainOf: (index: number) => string | null) {
      const { transport, attempt } = outcome;
      const byIndex = new Map(reports.map((r) => [r.index, r]));
      for (const recipient of outcome.recipients) {
        const report = byIndex.get(recipient.index);
        const label = outcomeLabel(recipient.status, report?.result);
        count(transport, label);
        if (label === 'sent' || label === 'delivered') {
          deps.metrics?.latency(transport as DeliveryTransportLabel).observe(Math.max(0, Date.parse(outcome.occurredAt) - Date.parse(message.occurredAt)) / 1000);
          continue;
        }
        deps.warn(`delivery ${recipient.status}`, {
          emailId: message.emailId,
          workspaceId: message.workspaceId,
          projectId: message.projectId,
          recipientDomain: domainOf(recipient.index) ?? domainOfAddress(recipient.address),
          transport,
          attempt,
          status: recipient.status,
          smtpCode: recipient.smtpCode,
          enhancedCode: recipient.enhancedCode,
          stage: report?.stage ?? null,
          reply: replyForLog(recipient.response),
          ...(outcome.nextAttemptAt ? { nextAttemptAt: outcome.nextAttemptAt } : {}),
          ...(outcome.failureCode ? { failureCode: outcome.failureCode } : {}),
        });
      }
      const now = deps.now().getTime();
      for (const report of reports) {
        if (!isTransportUnusable(transport, report)) continue;
        const repeated = causes.take(`${transport}\u001f${report.stage}\u001f${report.smtpCode}\u001f${report.response}`, now);
        if (repeated === null) continue;
        deps.error('the transport cannot be used: every email waits for a retry', {
          transport, stage: report.stage, smtpCode: report.smtpCode, enhancedCode: report.enhancedCode, reply: replyForLog(report.response),
          emailId: message.emailId, repeatedSinceLastLog: repeated,
        });
      }
    },
    failed(message: AdmittedMessage, failure: DeliveryFailed['data'], transport: string) {
      const label: DeliveryOutcomeLabel = failure.failureCode === 'delivery_unknown' ? 'unknown' : 'failed';
      for (const recipient of failure.recipients) {
        count(transport, label);
        deps.warn(failure.failureCode === 'delivery_unknown' ? 'delivery unknown' : 'delivery failed', {
          emailId: message.emailId,
          workspaceId: message.workspaceId,
          projectId: message.projectId,
          recipientDomain: domainOfAddress(recipient.address),
          transport,
          attempt: failure.attempt,
          status: 'failed',
          failureCode: failure.failureCode,
          reply: replyForLog(failure.reason),
        });
      }
    },
  };
}
