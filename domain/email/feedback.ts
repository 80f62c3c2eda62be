// The feedback decider: a report (bounce, delay, delivery notice, complaint) about one
// recipient of an email becomes a RecipientReported event when it tells something new about
// that recipient. The inbound server has already checked that the report came to that
// recipient's return path (VERP, with its MAC), and that a bounce names that recipient's address
// (a complaint counts for the return path's recipient whatever address it names: feedback loops
// hash or redact it). Anyone who holds a return path can send reports to it, as many as they like, so
// what one recipient's reports can add to the stream is bounded:
// - a report is recorded when it changes what is known of the recipient: an outcome not
//   reported before, or a delay after something else happened (an attempt, another outcome);
// - one that says nothing new is counted (RecipientReportRepeated: no timeline entry, no
//   webhook), up to MAX_REPEATED_REPORTS, then dropped;
// - past MAX_REPORTS_PER_RECIPIENT report events, nothing more is written;
// - the same report twice (same id) is nothing.
// A return path names the first of the recipients its copy was sent for: an address listed twice
// (To and CC, To and BCC) gets one copy (apps/services/delivery/attempt.ts), so a report about it
// is decided for each of those recipients, as the attempt's outcome was.
import type { RecipientReported, RecipientReportRepeated, ReportedOutcome } from './events.ts';
import { copyOf, reportKey, reportsAbout, type EmailState } from './state.ts';

/** Repeats counted per recipient; later ones change nothing and are not written. */
export const MAX_REPEATED_REPORTS = 10;
/**
 * Report events per recipient at most. What can be recorded is already bounded (each outcome
 * once, a delay again only after something else happened); this is the backstop.
 */
export const MAX_REPORTS_PER_RECIPIENT = 50;

export interface RecordReport {
  type: 'RecordReport';
  reportId: string;
  recipientIndex: number;
  outcome: ReportedOutcome;
  format: 'dsn' | 'arf' | 'text';
  status: string | null;
  diagnosticCode: string | null;
  reason: string;
  complaintType: string | null;
  at: string;
}

export function decideReport(command: RecordReport, state: EmailState): Array<RecipientReported | RecipientReportRepeated> {
  // Only an email that was accepted went out; a suppressed one never had a return path in use.
  if (state.admission?.status !== 'queued') return [];
  const index = command.recipientIndex;
  if (!Number.isInteger(index) || index < 0 || index >= state.delivery.recipients.length) return [];
  return copyOf(state.delivery, index).flatMap((sharing) => decideFor(sharing, command, state));
}

/** The report about recipient `index`: recorded, counted, or nothing. */
function decideFor(index: number, command: RecordReport, state: EmailState): Array<RecipientReported | RecipientReportRepeated> {
  if (state.reports.has(reportKey(command.reportId, index))) return [];
  const known = reportsAbout(state, index);
  if (known.events >= MAX_REPORTS_PER_RECIPIENT) return [];
  const address = state.visibleAddresses[index] ?? null;
  const news = !known.outcomes.includes(command.outcome) || (command.outcome === 'delayed' && !known.delayReportedLast);
  if (!news) {
    if (known.repeated >= MAX_REPEATED_REPORTS) return [];
    return [{ type: 'RecipientReportRepeated', data: { reportId: command.reportId, recipientIndex: index, address, outcome: command.outcome, occurredAt: command.at } }];
  }
  return [{
    type: 'RecipientReported',
    data: {
      reportId: command.reportId,
      recipientIndex: index,
      address,
      outcome: command.outcome,
      format: command.format,
      status: command.status,
      diagnosticCode: command.diagnosticCode,
      reason: command.reason,
      complaintType: command.complaintType,
      occurredAt: command.at,
    },
  }];
}
