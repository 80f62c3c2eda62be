// The feedback decider: a report (bounce, delay, delivery notice, complaint) about one
// recipient of an email becomes a RecipientReported event, once. The inbound server has
// already checked that the report came to that recipient's return path (VERP, with its MAC)
// and that the address the report names is that recipient's.
import type { RecipientReported, ReportedOutcome } from './events.ts';
import { reportKey, type EmailState } from './state.ts';

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

export function decideReport(command: RecordReport, state: EmailState): RecipientReported[] {
  // Only an email that was accepted went out; a suppressed one never had a return path in use.
  if (state.admission?.status !== 'queued') return [];
  if (!Number.isInteger(command.recipientIndex) || command.recipientIndex < 0 || command.recipientIndex >= state.delivery.recipients.length) return [];
  if (state.reports.has(reportKey(command.reportId, command.recipientIndex))) return [];
  return [{
    type: 'RecipientReported',
    data: {
      reportId: command.reportId,
      recipientIndex: command.recipientIndex,
      address: state.visibleAddresses[command.recipientIndex] ?? null,
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
