// A report that arrived at a return path becomes events on the email's stream: one
// RecipientReported per recipient it is about. A report may only speak about the recipient its
// return path names: an entry naming any other address is ignored, so no report can touch
// (or suppress) an address that was not that recipient of that email.
//
// Reports about one email are recorded one after the other (`lanes`): each decides on the stream
// the one before appended to, so concurrent reports never meet a revision conflict in this
// process, and reports about other emails never wait for them.
import { createHash } from 'node:crypto';
import type { ReportedOutcome } from '../../../domain/email/events.ts';
import type { CommandOrigin } from '../../../domain/events/metadata.ts';
import { complaintOutcome, complaintType } from '../../../domain/feedback/classify.ts';
import type { ParsedReport } from '../../../infra/mail/report-parser.ts';
import type { Emails } from '../email-stream.ts';
import type { SerialByKey } from '../serial-by-key.ts';
import type { ReportTarget } from './report-targets.ts';

export interface IngestDeps {
  /** The email streams (services.emails). */
  emails: Emails;
  now: () => Date;
  /** One lane per email id, shared by every report this process receives. */
  lanes: SerialByKey;
}

/** A report as the inbound server read it: parsed, and the digest of its bytes. */
export interface ReceivedReport {
  parsed: ParsedReport;
  /** SHA-256 (hex) of the report's bytes: its identity when it has no Message-ID. */
  sha256: string;
}

export interface IngestResult {
  format: ParsedReport['kind'];
  /** Per target: the outcomes recorded (empty when the report said nothing about it, or nothing new: domain/email/feedback.ts). */
  recorded: Array<{ emailId: string; recipientIndex: number; outcomes: ReportedOutcome[] }>;
  /**
   * Every finding and what it did: recorded (RecipientReported), repeated (it told nothing new
   * of its recipient: RecipientReportRepeated), duplicate (this very report was taken before).
   */
  findings: Array<{ outcome: ReportedOutcome; effect: 'recorded' | 'repeated' | 'duplicate' }>;
}

/**
 * A finding's identity: the report's Message-ID (else its bytes) and what it found, so the
 * same report twice is one finding, while a damaged copy that said nothing does not hide the
 * intact one.
 */
function findingIdOf({ parsed, sha256 }: ReceivedReport, finding: Finding, position: number): string {
  const report = parsed.reportMessageId ? `mid:${parsed.reportMessageId.toLowerCase()}` : `raw:${sha256}`;
  return createHash('sha256').update(`${report}\n${position}\n${finding.outcome}\n${finding.status ?? ''}`).digest('base64url').slice(0, 32);
}

interface Finding {
  outcome: ReportedOutcome;
  status: string | null;
  diagnosticCode: string | null;
  reason: string;
}

/** What the report says about this target, if anything. */
function findingsFor(parsed: ParsedReport, target: ReportTarget): Finding[] {
  const named = parsed.recipients.filter((r) => r.address !== '');
  // A forwarded recipient's DSN names the address it reached, and the one sent to as Original-Recipient.
  const matching = named.filter((r) => target.address !== null && (r.address === target.address || r.originalAddress === target.address));
  // A recipient guessed from the returned copy's To header does not say who complained: when
  // it is not this one, the return path does (below).
  if (matching.length > 0 || named.some((r) => !r.guessed)) {
    // A BCC recipient whose address is gone (retention) cannot be matched: nothing is recorded.
    return matching.map((r) => ({ outcome: r.outcome, status: r.status, diagnosticCode: r.diagnosticCode, reason: r.reason }));
  }
  // Feedback loops often redact the recipient; the return path still says who it was. A
  // feedback report without RFC 5965's required fields (User-Agent among them) is damaged,
  // not a complaint.
  if (parsed.complaint && parsed.complaint.userAgent !== null) {
    return [{ outcome: complaintOutcome(parsed.complaint.feedbackType), status: null, diagnosticCode: null, reason: `complaint (${parsed.complaint.feedbackType})` }];
  }
  return [{ outcome: 'undetermined', status: null, diagnosticCode: null, reason: 'the report names no recipient and could not be classified' }];
}

export async function ingestReport(deps: IngestDeps, targets: ReportTarget[], report: ReceivedReport, origin: CommandOrigin): Promise<IngestResult> {
  const recorded: IngestResult['recorded'] = [];
  const findings: IngestResult['findings'] = [];
  for (const target of targets) {
    const found = await deps.lanes.run(target.emailId, () => recordFindings(deps, target, report, origin));
    recorded.push({ emailId: target.emailId, recipientIndex: target.recipientIndex, outcomes: found.filter((f) => f.effect === 'recorded').map((f) => f.outcome) });
    findings.push(...found);
  }
  return { format: report.parsed.kind, recorded, findings };
}

async function recordFindings(deps: IngestDeps, target: ReportTarget, report: ReceivedReport, origin: CommandOrigin): Promise<IngestResult['findings']> {
  const { parsed } = report;
  const found: IngestResult['findings'] = [];
  for (const [i, finding] of findingsFor(parsed, target).entries()) {
    const handled = await deps.emails.handle(target.emailId, {
      type: 'RecordReport',
      reportId: findingIdOf(report, finding, i),
      recipientIndex: target.recipientIndex,
      outcome: finding.outcome,
      format: parsed.kind,
      status: finding.status,
      diagnosticCode: finding.diagnosticCode,
      reason: finding.reason.slice(0, 1000),
      complaintType: finding.outcome === 'complained' ? complaintType(parsed.complaint?.feedbackType ?? 'abuse') : null,
      at: deps.now().toISOString(),
    }, { origin });
    const effect = handled.events.some((e) => e.type === 'RecipientReported') ? 'recorded'
      : handled.events.some((e) => e.type === 'RecipientReportRepeated') ? 'repeated' : 'duplicate';
    found.push({ outcome: finding.outcome, effect });
  }
  return found;
}
