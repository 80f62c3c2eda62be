// SMTP TLS Reporting (RFC 8460): where a domain wants its reports (the `_smtp._tls` TXT
// record, section 3) and the aggregate report of one UTC day (the JSON of section 4), built
// from the session counts the MX transport recorded. Pure: the counts come in, the report goes
// out; apps/services/tls-reports/ stores counts and delivers reports.
import { parseMailbox } from '../mailbox.ts';

/** One line of counts: sessions of one day to one recipient domain with the same policy, outcome and MX. */
export interface TlsSessionCount {
  day: string;
  /** The recipient domain: the report's subject. */
  domain: string;
  policy: { type: 'sts' | 'tlsa' | 'no-policy-found'; domain: string; strings: string[]; mxHosts: string[] };
  /** 'success' or an RFC 8460 4.3 result type. */
  result: string;
  mxHost: string | null;
  receivingIp: string | null;
  sendingIp: string | null;
  /** The first failure's reason, for failure-reason-code. */
  detail: string | null;
  count: number;
}

export interface TlsReportDestinations {
  mailto: string[];
  https: string[];
}

/** Longer records name no destination: real ones name one or two, and the domain's owner writes it. */
export const MAX_TLSRPT_RECORD_LENGTH = 4096;
/** Longer rua entries are left out. */
export const MAX_TLSRPT_RUA_LENGTH = 1024;

/**
 * Reads a `_smtp._tls` TXT record (RFC 8460 3): `v=TLSRPTv1; rua=mailto:a@example.com,https://…`.
 * Null when it is not a TLSRPTv1 record or names no usable destination. The domain's owner
 * writes the record (one TXT record holds close to 64 KiB), so no pattern here may take a
 * character two ways: each matches in time linear in the text.
 */
export function parseTlsRptRecord(record: string): TlsReportDestinations | null {
  if (record.length > MAX_TLSRPT_RECORD_LENGTH) return null;
  const fields = record.split(';').map((f) => f.trim()).filter(Boolean);
  if (fields[0]?.replace(/\s+/g, '') !== 'v=TLSRPTv1') return null;
  const rua = fields.slice(1).find((f) => /^rua\s*=/i.test(f));
  if (!rua) return null;
  const destinations: TlsReportDestinations = { mailto: [], https: [] };
  for (const raw of rua.slice(rua.indexOf('=') + 1).split(',').map((u) => u.trim())) {
    if (raw.length > MAX_TLSRPT_RUA_LENGTH) continue;
    const mailto = /^mailto:([^?\s]+)$/i.exec(raw);
    if (mailto) {
      // An "@" with something either side, found without a pattern (one whose classes both
      // take "@" backtracks quadratically on a run of them).
      const at = mailto[1].lastIndexOf('@');
      if (at <= 0 || at === mailto[1].length - 1) continue;
      let address: string;
      try {
        address = decodeURIComponent(mailto[1]);
      } catch {
        continue;
      }
      // The decoded address goes to RCPT TO and the To field, so it must be a bare address as a
      // send's recipient is: `mailto:ops%2Cteam@…` decodes to none (its comma unquoted), nor
      // does `"a<b>"@…`, whose brackets nodemailer would drop from the To field. A domain in
      // Unicode goes in its ASCII form, as a send's does.
      const parsed = parseMailbox(address);
      if (parsed.ok && !/[\s<>]/.test(address)) destinations.mailto.push(parsed.value.address);
    } else if (/^https:\/\/[^\s]+$/i.test(raw)) destinations.https.push(raw);
  }
  return destinations.mailto.length + destinations.https.length > 0 ? destinations : null;
}

export interface ReportIdentity {
  organizationName: string;
  contactInfo: string;
  /** The submitter's domain (RFC 8460 5.3 file name and headers). */
  submitter: string;
}

interface FailureDetail {
  'result-type': string;
  'sending-mta-ip'?: string;
  'receiving-mx-hostname'?: string;
  'receiving-ip'?: string;
  'failed-session-count': number;
  'failure-reason-code'?: string;
}

export interface TlsReport {
  'organization-name': string;
  'date-range': { 'start-datetime': string; 'end-datetime': string };
  'contact-info': string;
  'report-id': string;
  policies: Array<{
    policy: { 'policy-type': string; 'policy-string'?: string[]; 'policy-domain': string; 'mx-host'?: string[] };
    summary: { 'total-successful-session-count': number; 'total-failure-session-count': number };
    'failure-details'?: FailureDetail[];
  }>;
}

const policyKey = (p: TlsSessionCount['policy']) => JSON.stringify([p.type, p.domain, p.strings, p.mxHosts]);

/** The report of `day` (YYYY-MM-DD, UTC) for `domain`, one policy entry per policy seen. */
export function buildTlsReport(day: string, domain: string, counts: TlsSessionCount[], identity: ReportIdentity, reportId: string): TlsReport {
  const byPolicy = new Map<string, TlsSessionCount[]>();
  for (const c of counts) {
    if (c.domain !== domain || c.day !== day) continue;
    const key = policyKey(c.policy);
    byPolicy.set(key, [...(byPolicy.get(key) ?? []), c]);
  }
  const policies = [...byPolicy.values()].map((lines) => {
    const { policy } = lines[0];
    const failures = new Map<string, FailureDetail>();
    let successes = 0;
    for (const line of lines) {
      if (line.result === 'success') {
        successes += line.count;
        continue;
      }
      const key = JSON.stringify([line.result, line.mxHost, line.receivingIp, line.sendingIp]);
      const known = failures.get(key);
      if (known) {
        known['failed-session-count'] += line.count;
        continue;
      }
      failures.set(key, {
        'result-type': line.result,
        ...(line.sendingIp ? { 'sending-mta-ip': line.sendingIp } : {}),
        ...(line.mxHost ? { 'receiving-mx-hostname': line.mxHost } : {}),
        ...(line.receivingIp ? { 'receiving-ip': line.receivingIp } : {}),
        'failed-session-count': line.count,
        ...(line.detail ? { 'failure-reason-code': line.detail.slice(0, 200) } : {}),
      });
    }
    const details = [...failures.values()];
    return {
      policy: {
        'policy-type': policy.type,
        ...(policy.strings.length > 0 ? { 'policy-string': policy.strings } : {}),
        'policy-domain': policy.domain,
        ...(policy.mxHosts.length > 0 ? { 'mx-host': policy.mxHosts } : {}),
      },
      summary: {
        'total-successful-session-count': successes,
        'total-failure-session-count': details.reduce((n, d) => n + d['failed-session-count'], 0),
      },
      ...(details.length > 0 ? { 'failure-details': details } : {}),
    };
  });
  return {
    'organization-name': identity.organizationName,
    'date-range': { 'start-datetime': `${day}T00:00:00Z`, 'end-datetime': `${day}T23:59:59Z` },
    'contact-info': identity.contactInfo,
    'report-id': reportId,
    policies,
  };
}

/** RFC 8460 5.3: `submitter!policy-domain!begin!end!id.json.gz`, times in epoch seconds, the unique id letters and digits only (`1*(ALPHA / DIGIT)`: the report id without its punctuation). */
export function reportFileName(identity: ReportIdentity, domain: string, day: string, reportId: string): string {
  const begin = Date.parse(`${day}T00:00:00Z`) / 1000;
  return `${identity.submitter}!${domain}!${begin}!${begin + 86_399}!${reportId.replace(/[^A-Za-z0-9]/g, '')}.json.gz`;
}
