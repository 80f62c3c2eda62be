// A report that arrived at a return path becomes events on the email's stream: one
// RecipientReported per recipient it is about. A report may only speak about the recipient its
// return path names, so no report can touch (or suppress) an address that was not that
// recipient of that email: a bounce's entry naming any other address is ignored, while a
// complaint is that recipient's whatever address it names (findingsFor).
//
// A report about a BCC recipient quotes its address as a rule (a DSN's Diagnostic-Code: "550
// 5.1.1 <bcc@…>: Recipient address rejected"; a complaint's Original-Rcpt-To), and a BCC
// recipient's address is in no event: its finding is recorded with every address in the
// diagnostic code and the reason masked ("<address>"), its status, outcome and format as reported.
//
// Reports about one email are recorded one after the other (`lanes`): each decides on the stream
// the one before appended to, so concurrent reports never meet a revision conflict in this
// process, and reports about other emails never wait for them.
import { createHash } from 'node:crypto';
import type { ReportedOutcome } from '../../../domain/email/events.ts';
import type { CommandOrigin } from '../../../domain/events/metadata.ts';
import { canonicalAddress } from '../../../domain/mailbox.ts';
import { complaintOutcome, complaintType } from '../../../domain/feedback/classify.ts';
import type { ParsedReport } from '../../../infra/mail/report-parser.ts';
import type { Emails } from '../email-stream.ts';
import { maskAddresses, maskAddressesInCut } from '../../../domain/addresses-in-text.ts';
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
  // A report names an address as its writer spelt it; a recipient's is in the canonical form
  // (`"ann"@d` is ann@d), so both are compared in it. A forwarded recipient's DSN names the
  // address it reached, and the one sent to as Original-Recipient.
  const wanted = target.address === null ? null : canonicalAddress(target.address);
  const isTarget = (address: string | undefined) => wanted !== null && address !== undefined && canonicalAddress(address) === wanted;
  const matching = named.filter((r) => isTarget(r.address) || isTarget(r.originalAddress));
  if (matching.length > 0) return matching.map((r) => ({ outcome: r.outcome, status: r.status, diagnosticCode: r.diagnosticCode, reason: r.reason }));
  // A bounce is the receiving system's word about the address it names: one about another
  // address is not about this copy. A BCC recipient whose address is gone (retention) cannot be
  // matched: nothing is recorded.
  if (parsed.kind !== 'arf' && named.length > 0) return [];
  if (parsed.complaint) return [complaintOfReturnPath(parsed.complaint, named)];
  return [{ outcome: 'undetermined', status: null, diagnosticCode: null, reason: 'the report names no recipient and could not be classified' }];
}

/**
 * A complaint that names none of this recipient's addresses is still about the copy its signed
 * return path came with (RFC 6449: a sender identifies the complainer by its own identifiers).
 * Feedback loops redact Original-Rcpt-To or put a placeholder or a hash there; the returned
 * copy's To header is every recipient's; a forwarded copy names the mailbox it reached. What
 * Original-Rcpt-To said is kept in the reason. A feedback report without RFC 5965's required
 * fields (User-Agent among them) is damaged, not a complaint.
 */
function complaintOfReturnPath(complaint: NonNullable<ParsedReport['complaint']>, named: ParsedReport['recipients']): Finding {
  if (complaint.userAgent === null) {
    return { outcome: 'undetermined', status: null, diagnosticCode: null, reason: 'a feedback report without its required fields could not be classified' };
  }
  const reported = named.filter((r) => !r.guessed).map((r) => r.address).slice(0, MAX_REPORTED_SHOWN);
  const reason = `complaint (${complaint.feedbackType})${reported.length > 0 ? `, Original-Rcpt-To ${reported.join(', ')}` : ''}`;
  return { outcome: complaintOutcome(complaint.feedbackType), status: null, diagnosticCode: null, reason };
}

/** Addresses of Original-Rcpt-To quoted in a complaint's reason. */
const MAX_REPORTED_SHOWN = 5;

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
  // The reason comes cut already (the parser's bounceReason): an address the cut went through is
  // masked with the word it left (maskAddressesInCut).
  const shown = (text: string): string => (target.bcc ? maskAddresses(text) : text);
  const shownReason = (text: string): string => (target.bcc ? maskAddressesInCut(text) : text);
  for (const [i, finding] of findingsFor(parsed, target).entries()) {
    const handled = await deps.emails.handle(target.emailId, {
      type: 'RecordReport',
      reportId: findingIdOf(report, finding, i),
      recipientIndex: target.recipientIndex,
      outcome: finding.outcome,
      format: parsed.kind,
      status: finding.status,
      diagnosticCode: finding.diagnosticCode === null ? null : shown(finding.diagnosticCode),
      reason: shownReason(finding.reason).slice(0, 1000),
      complaintType: finding.outcome === 'complained' ? complaintType(parsed.complaint?.feedbackType ?? 'abuse') : null,
      at: deps.now().toISOString(),
    }, { origin });
    const effect = handled.events.some((e) => e.type === 'RecipientReported') ? 'recorded'
      : handled.events.some((e) => e.type === 'RecipientReportRepeated') ? 'repeated' : 'duplicate';
    found.push({ outcome: finding.outcome, effect });
  }
  return found;
}
