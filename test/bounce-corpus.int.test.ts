// The report parser and its rules on real-world reports: the sample emails of the Sisimai project
// (test/fixtures/bounces/README.md says which, from where, under which licence), held against
// Sisimai's own hard/soft verdict for each of them.
//
// The figure: over the bounces in scope (every message Sisimai calls a bounce, i.e. not feedback,
// vacation or delivered, that is a DSN or a text bounce of a family the rules claim), the share
// of messages whose hard/soft labels equal Sisimai's hardbounce flags, recipient by recipient in
// order (or, where Sisimai and the parser count the recipients differently, as the same set of
// labels). hard_bounced is hard; soft_bounced and delayed are soft; anything else disagrees.
// Sisimai's undecided reasons (undefined, onhold) are soft by its own flag and count like any
// other. A DSN the parser leaves undetermined counts as a disagreement; a text bounce it leaves
// undetermined (no recipient found, or no cause read) is reported apart. Complaints,
// auto-replies and delivery reports are checked apart.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { parseReport, type ParsedReport } from '../infra/mail/report-parser.ts';

const DIR = fileURLToPath(new URL('./fixtures/bounces/', import.meta.url));
const MINIMUM_AGREEMENT = 0.95;

interface Expected {
  status: string | null;
  replyCode: string | null;
  reason: string;
  hardbounce: boolean;
  feedbackType?: string;
}

const { messages } = JSON.parse(readFileSync(join(DIR, 'expectations.json'), 'utf8')) as {
  messages: Record<string, { expectedBy: string; recipients: Expected[] }>;
};

/** The families whose text formats the rules claim to read (domain/feedback/classify.ts). */
const CLAIMED_TEXT_FAMILIES = [
  'rfc3464', 'lhost-postfix', 'lhost-sendmail', 'lhost-v5sendmail', 'lhost-exim', 'lhost-mailru', 'lhost-qmail', 'lhost-gmail',
  'lhost-yahoo', 'lhost-exchange2003', 'lhost-exchange2007', 'lhost-office365', 'lhost-outlook', 'lhost-opensmtpd', 'lhost-courier',
  'lhost-messagingserver', 'lhost-domino', 'rhost-google', 'rhost-gsuite', 'rhost-microsoft',
];
const NOT_BOUNCES = new Set(['feedback', 'vacation', 'delivered']);

const familyOf = (file: string) => file.replace(/-\d+\.eml$/, '');
const label = (outcome: string) => (outcome === 'hard_bounced' ? 'hard' : outcome === 'soft_bounced' || outcome === 'delayed' ? 'soft' : outcome);

/** Declared a delivery status report in its top-level header, whatever its MIME parts became. */
function declaredDsn(raw: Buffer): boolean {
  const header = raw.subarray(0, 64 * 1024).toString('latin1').split(/\r?\n\r?\n/, 1)[0];
  return /^content-type:[^\n]*(?:\n[ \t][^\n]*)*report-type\s*=\s*"?delivery-status/im.test(header.replace(/\r/g, ''));
}

function agrees(expected: Expected[], report: ParsedReport): boolean {
  const want: string[] = expected.map((e) => (e.hardbounce ? 'hard' : 'soft'));
  const got = report.recipients.map((r) => label(r.outcome));
  if (got.length === want.length) return got.every((g, i) => g === want[i]);
  return got.length > 0 && got.every((g) => want.includes(g)) && want.every((w) => got.includes(w));
}

interface Parsed {
  file: string;
  raw: Buffer;
  report: ParsedReport;
  expected: Expected[];
}

const parsed: Parsed[] = [];
const thrown: string[] = [];

const corpus = suite('Sisimai sample emails');

corpus.before(async () => {
  for (const [file, entry] of Object.entries(messages)) {
    const raw = readFileSync(join(DIR, 'emails', file));
    try {
      parsed.push({ file, raw, report: await parseReport(raw), expected: entry.recipients });
    } catch (error) {
      thrown.push(`${file}: ${(error as Error).message}`);
    }
  }
});

corpus('every message parses without throwing', () => {
  assert.equal(thrown, []);
  assert.is(parsed.length, Object.keys(messages).length);
  assert.ok(parsed.length >= 200, `only ${parsed.length} messages`);
});

corpus(`agreement with Sisimai's hard/soft verdict is at least ${MINIMUM_AGREEMENT * 100} %`, () => {
  let inScope = 0;
  let agreeing = 0;
  let dsns = 0;
  let dsnsAgreeing = 0;
  const disagreements: string[] = [];
  const textUndetermined: string[] = [];
  const unclaimed: string[] = [];
  for (const { file, raw, report, expected } of parsed) {
    if (expected.some((e) => NOT_BOUNCES.has(e.reason))) continue;
    const summary = `${file} (${report.kind}): Sisimai ${expected.map((e) => `${e.reason}/${e.hardbounce ? 'hard' : 'soft'}`).join(', ')}; parser ${report.recipients.map((r) => r.outcome).join(', ') || 'no recipient'}`;
    const dsn = report.kind === 'dsn' || declaredDsn(raw);
    if (!dsn && !CLAIMED_TEXT_FAMILIES.includes(familyOf(file))) {
      unclaimed.push(summary);
      continue;
    }
    if (!dsn && report.recipients.every((r) => r.outcome === 'undetermined')) {
      textUndetermined.push(summary);
      continue;
    }
    inScope++;
    if (dsn) dsns++;
    if (agrees(expected, report)) {
      agreeing++;
      if (dsn) dsnsAgreeing++;
    } else {
      disagreements.push(summary);
    }
  }
  const agreement = agreeing / inScope;
  console.log(`\nSisimai corpus: ${agreeing}/${inScope} bounces agree on hard/soft = ${(100 * agreement).toFixed(1)} % (DSNs ${dsnsAgreeing}/${dsns}, text bounces ${agreeing - dsnsAgreeing}/${inScope - dsns})`);
  console.log(`  disagreements (${disagreements.length}):\n    ${disagreements.join('\n    ')}`);
  console.log(`  text bounces left undetermined, not counted (${textUndetermined.length}):\n    ${textUndetermined.join('\n    ')}`);
  if (unclaimed.length > 0) console.log(`  formats the rules do not claim, not counted (${unclaimed.length}):\n    ${unclaimed.join('\n    ')}`);
  assert.ok(inScope >= 200, `only ${inScope} bounces in scope`);
  assert.ok(agreement >= MINIMUM_AGREEMENT, `agreement ${(100 * agreement).toFixed(1)} % is below ${MINIMUM_AGREEMENT * 100} %`);
});

corpus('complaints: every ARF report is kind arf with its Feedback-Type, and its named recipients complained (but for auth-failure)', () => {
  const reports = parsed.filter(({ expected }) => expected.some((e) => e.reason === 'feedback'));
  let arf = 0;
  for (const { file, report, expected } of reports) {
    if (report.kind !== 'arf') continue; // Apple Mail's plain-text "unsubscribe" is no ARF report
    arf++;
    assert.ok(report.complaint, file);
    const type = expected[0].feedbackType!;
    assert.is(report.complaint!.feedbackType, type, file);
    for (const r of report.recipients) assert.is(r.outcome, type === 'auth-failure' ? 'undetermined' : 'complained', file);
  }
  assert.ok(arf >= 10, `only ${arf} ARF reports`);
});

corpus('auto-replies (RFC 3834) are no bounce: no recipient', () => {
  const replies = parsed.filter(({ expected }) => expected.some((e) => e.reason === 'vacation'));
  assert.ok(replies.length > 0);
  for (const { file, report } of replies) assert.equal(report.recipients, [], file);
});

corpus('delivery reports (Action: delivered, 2.x.x) are delivered', () => {
  const delivered = parsed.filter(({ expected }) => expected.every((e) => e.reason === 'delivered'));
  assert.ok(delivered.length > 0);
  for (const { file, report } of delivered) {
    assert.ok(report.recipients.length > 0, file);
    for (const r of report.recipients) assert.is(r.outcome, 'delivered', file);
  }
});

corpus.run();
