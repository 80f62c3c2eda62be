// Sends each day's TLS reports (RFC 8460): for every recipient domain Relay had sessions with
// that day and that publishes `_smtp._tls` with a rua, one gzipped JSON report, by mail
// (multipart/report; report-type="tlsrpt", DKIM-signed) and/or HTTPS POST.
//
// Who sends: RELAY_TLSRPT_FROM, an address at a sending domain verified in Relay (the
// operator's own). The report is signed with that domain's DKIM key, as RFC 8460 5.3 asks,
// and goes straight to the process's mail transport: it is Relay's operational mail, not a
// customer's email, so it has no email stream, no timeline, no usage charge and no webhooks.
// Without RELAY_TLSRPT_FROM, mailto destinations are skipped (HTTPS ones are still posted).
// The mail does not honor the rua domain's MTA-STS or DANE (RFC 8460 5.3.1): its MX may be the
// very one whose TLS failures are being reported.
//
// Each (day, domain) report is claimed first (a unique document), so several sender instances
// send it once. Each hourly pass looks at the last REPORT_DAYS days, not only yesterday, so a
// report whose sending failed is tried again after the UTC day turns, up to MAX_ATTEMPTS times.
// Its document keeps which destinations have it: a failure at one destination is a delivery
// failure to that one (RFC 8460 5.5: retried), whoever else took the report, and a retry goes
// only to those that lack it. A day is reported once the session counts of every instance are
// in the store (COUNTS_SETTLE_MS after it ends).
// The claim is refreshed (compare-and-set) after each destination, so it is taken over as
// abandoned only when its holder stopped, and a holder whose claim was taken over stops sending.
// One instance runs one pass at a time, and a domain whose report throws is logged and left for
// the next pass without holding up the others.
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import MimeNode from 'nodemailer/lib/mime-node/index.js';
import { buildTlsReport, parseTlsRptRecord, reportFileName, type ReportIdentity, type TlsReport, type TlsReportDestinations } from '../../../domain/delivery/tls-report.ts';
import { parseAddress } from '../../../domain/mailbox.ts';
import type { SendingDomain } from '../../../domain/management.ts';
import type { DnsCache } from '../../../infra/dns/dns-cache.ts';
import { dkimSign } from '../../../infra/mail/dkim-sign.ts';
import { DuplicateKeyError, type DocumentStore, type Stored } from '../../../infra/ports/document-store.ts';
import type { HttpEgress } from '../../../infra/ports/http-egress.ts';
import type { MailTransport } from '../../../infra/ports/mail-transport.ts';
import type { SecretBox } from '../../../infra/secrets/secret-box.ts';
import { COLLECTIONS } from '../collections.ts';
import { dkimPrivateKeyOf } from '../dkim-key-vault.ts';
import { FLUSH_EVERY_MS, tlsSessionCounts, type TlsSessionCountDoc } from './session-counts.ts';

export interface TlsReportingDeps {
  documents: DocumentStore;
  /** For `_smtp._tls` lookups (the MX transport's cache). */
  dns: DnsCache;
  transport: MailTransport;
  secrets: SecretBox;
  /** RELAY_TLSRPT_FROM; null: no mailto reports. */
  from: string | null;
  /** For HTTPS destinations: the webhook egress (its address and URL rules) and its settings. */
  egress: HttpEgress;
  https: { dnsServers: string[]; allow: ReadonlySet<string>; ca?: string | Buffer | Array<string | Buffer> };
  now: () => Date;
  onError: (error: Error) => void;
  /** What went wrong without failing (a claim taken over, a pass skipped); default onError. */
  onWarning?: (message: string, fields: Record<string, unknown>) => void;
}

export interface TlsReportDoc {
  _id: string;
  day: string;
  domain: string;
  reportId: string;
  /** `partial`: some destinations have it, the others are tried again (as after `failed`). */
  status: 'sending' | 'sent' | 'partial' | 'failed' | 'no_destination';
  attempts: number;
  /** What each destination answered, on the latest attempt. */
  results: string[];
  /**
   * Each destination tried (an https URL, or `mailto:` and the address) and whether it has the
   * report. Absent from documents written before it was kept: none is known to have it.
   */
  destinations?: ReportDestination[];
  updatedAt: string;
}

export interface ReportDestination {
  to: string;
  delivered: boolean;
}

export const tlsReports = (documents: DocumentStore) => documents.collection<TlsReportDoc>(COLLECTIONS.tlsReports);

const STANDARD_LINES_PER_PAGE = 500;
/**
 * A claim not refreshed for this long whose report is not sent was left by a dead instance. Its
 * holder refreshes it after each destination, and one destination takes well under an hour (an
 * HTTPS post at most the egress's 15 s; a mail, through the mx transport, its DNS lookups, five
 * connection attempts of at most 60 s and a transaction of a few 5-minute reply timeouts): twice
 * that, so a holder still sending is never taken for dead.
 */
const CLAIM_STALE_MS = 2 * 60 * 60_000;
const MAX_ATTEMPTS = 48;
/**
 * The days each hourly pass looks at: yesterday and the two before. A report's MAX_ATTEMPTS, one
 * per pass, fit in the first two days after its own; the third takes over the claims an instance
 * that stopped on the second left (stale after CLAIM_STALE_MS), and catches up on a report whose
 * first passes did not run (every instance down) or could not look its domain up.
 */
const REPORT_DAYS = 3;
/**
 * How long after a day ends its report waits: each sender instance adds its session counts to
 * the store every FLUSH_EVERY_MS, and a flush of many lines, an instance under load and clocks a
 * few seconds apart all stretch that; a report sent before the last of them is short of
 * sessions for good. Many flush intervals, and still small beside the hourly passes.
 */
const COUNTS_SETTLE_MS = 30 * FLUSH_EVERY_MS;
/**
 * Destinations of one report at most (a rua's https ones first, then its mailto ones): each is a
 * POST or a mail recipient, and a record is the recipient domain's to write.
 */
const MAX_DESTINATIONS = 5;

/**
 * The destinations of a domain's `_smtp._tls` TXT records (RFC 8460 3): records that do not
 * begin with "v=TLSRPTv1;" are discarded, and unless exactly one is left the domain does not
 * implement TLSRPT. `note`: why there are none when the records say something.
 */
function destinationsOf(records: string[]): { destinations: TlsReportDestinations | null; note: string | null } {
  const candidates = records.filter((r) => /^v=TLSRPTv1[ \t]*;/.test(r));
  if (candidates.length > 1) return { destinations: null, note: `${candidates.length} v=TLSRPTv1 records: the domain does not implement TLSRPT (RFC 8460 3)` };
  return { destinations: candidates.length === 1 ? parseTlsRptRecord(candidates[0]) : null, note: null };
}

/** At most MAX_DESTINATIONS of them, and how many were left out. */
function capped(destinations: TlsReportDestinations): { https: string[]; mailto: string[]; leftOut: number } {
  const https = destinations.https.slice(0, MAX_DESTINATIONS);
  const mailto = destinations.mailto.slice(0, MAX_DESTINATIONS - https.length);
  return { https, mailto, leftOut: destinations.https.length + destinations.mailto.length - https.length - mailto.length };
}

/** The recipient domains with sessions on `day`, each once: only their names are read, as most of a past day's reports are settled. */
async function domainsOfDay(documents: DocumentStore, day: string): Promise<string[]> {
  const domains: string[] = [];
  let after: Record<string, string> | undefined;
  for (;;) {
    const page = await tlsSessionCounts(documents).find({ where: { day }, orderBy: [['domain', 'asc'], ['_id', 'asc']], limit: STANDARD_LINES_PER_PAGE, fields: ['domain'], ...(after ? { after } : {}) });
    for (const line of page) if (domains[domains.length - 1] !== line.domain) domains.push(line.domain);
    if (page.length < STANDARD_LINES_PER_PAGE) return domains;
    const last = page[page.length - 1];
    after = { domain: last.domain, _id: last._id };
  }
}

async function linesOf(documents: DocumentStore, day: string, domain: string): Promise<TlsSessionCountDoc[]> {
  const lines: TlsSessionCountDoc[] = [];
  let after: Record<string, string> | undefined;
  for (;;) {
    const page = await tlsSessionCounts(documents).find({ where: { day, domain }, orderBy: [['_id', 'asc']], limit: STANDARD_LINES_PER_PAGE, ...(after ? { after } : {}) });
    lines.push(...page);
    if (page.length < STANDARD_LINES_PER_PAGE) return lines;
    after = { _id: page[page.length - 1]._id };
  }
}

/** The verified sending domain of that name (RELAY_TLSRPT_FROM's), whichever workspace holds it. */
async function senderDomain(documents: DocumentStore, name: string): Promise<SendingDomain | null> {
  const [domain] = await documents.collection<SendingDomain>(COLLECTIONS.domains).find({ where: { name, status: 'verified' }, limit: 1 });
  return domain ?? null;
}

/**
 * The report message (RFC 8460 5.3): a human part and the gzipped JSON, DKIM-signed, and its
 * Message-ID (without angle brackets) for the transport.
 */
export async function reportMessage(
  report: TlsReport, gz: Buffer, identity: ReportIdentity, domain: string, day: string, from: string, to: string[], signing: SendingDomain, secrets: SecretBox, now: Date,
): Promise<{ raw: Buffer; messageId: string }> {
  const reportId = report['report-id'];
  // The report id is a msg-id's content already (`<day>.<hash>@<submitter>`): one more
  // "@<submitter>" would make it no msg-id (RFC 5322 3.6.4: id-left "@" id-right).
  const messageId = reportId;
  const root = new MimeNode('multipart/report; report-type="tlsrpt"');
  root.setHeader({
    From: from,
    // Address objects: a joined string would be parsed again, and could name others than RCPT TO.
    To: to.map((address) => ({ name: '', address })),
    Subject: `Report Domain: ${domain} Submitter: ${identity.submitter} Report-ID: <${reportId}>`,
    Date: now.toUTCString().replace('GMT', '+0000'),
    'Message-ID': `<${messageId}>`,
    'TLS-Report-Domain': domain,
    'TLS-Report-Submitter': identity.submitter,
  });
  root.createChild('text/plain; charset=utf-8').setContent(
    `This is an aggregate TLS report (RFC 8460) from ${identity.organizationName} for ${domain}, ${day} (UTC).\r\n`,
  );
  root.createChild('application/tlsrpt+gzip', { filename: reportFileName(identity, domain, day, reportId) })
    .setHeader('Content-Disposition', `attachment; filename="${reportFileName(identity, domain, day, reportId)}"`)
    .setContent(gz);
  const unsigned = await root.build();
  const raw = dkimSign(unsigned, {
    domainName: signing.name,
    keySelector: signing.dkimSelector,
    privateKey: dkimPrivateKeyOf(signing, secrets),
    headerFieldNames: ['From', 'To', 'Subject', 'Date', 'Message-ID', 'MIME-Version', 'Content-Type', 'TLS-Report-Domain', 'TLS-Report-Submitter'],
    oversigned: ['From', 'To', 'Subject', 'Date', 'Message-ID', 'TLS-Report-Domain', 'TLS-Report-Submitter'],
  });
  return { raw, messageId };
}

/**
 * Whether a report already claimed may be claimed again: it failed, or its holder stopped (the
 * claim went stale); either way at most MAX_ATTEMPTS claims in all.
 */
function due(report: TlsReportDoc, now: Date): boolean {
  if (report.attempts >= MAX_ATTEMPTS) return false;
  return report.status === 'failed' || report.status === 'partial' || (report.status === 'sending' && Date.parse(report.updatedAt) + CLAIM_STALE_MS < now.getTime());
}

async function claim(documents: DocumentStore, day: string, domain: string, reportId: string, now: Date): Promise<Stored<TlsReportDoc> | null> {
  const reports = tlsReports(documents);
  const _id = `${day}|${domain}`;
  const fresh: TlsReportDoc = { _id, day, domain, reportId, status: 'sending', attempts: 1, results: [], updatedAt: now.toISOString() };
  try {
    return await reports.insert(fresh);
  } catch (error) {
    if (!(error instanceof DuplicateKeyError)) throw error;
  }
  const current = await reports.get(_id);
  if (!current || !due(current, now)) return null;
  const { _v, ...rest } = current;
  return reports.replace({ ...rest, status: 'sending', attempts: current.attempts + 1, updatedAt: now.toISOString() }, _v);
}

interface PassContext {
  identity: ReportIdentity;
  submitter: string;
  /** RELAY_TLSRPT_FROM, its domain in ASCII form; null when unset. */
  sender: string | null;
  signing: SendingDomain | null;
}

const warn = (deps: TlsReportingDeps, message: string, fields: Record<string, unknown>) =>
  deps.onWarning ? deps.onWarning(message, fields) : deps.onError(new Error(`${message} ${JSON.stringify(fields)}`));

/** Sends the reports of `day` that are due (not claimed yet, failed, or abandoned); returns what happened to each domain's. */
export async function sendTlsReports(deps: TlsReportingDeps, day: string): Promise<TlsReportDoc[]> {
  const domains = await domainsOfDay(deps.documents, day);
  // Read as a send's sender is (config.ts checked it is an address): a domain written in
  // Unicode is the ASCII form its sending domain is stored under, and goes so on the wire.
  const from = deps.from ? parseAddress(deps.from) : null;
  const sender = from?.ok ? from.address : deps.from;
  const submitter = from?.ok ? from.domain : 'relay';
  const signing = from?.ok ? await senderDomain(deps.documents, from.domain) : null;
  const identity: ReportIdentity = { organizationName: submitter, contactInfo: sender ?? `postmaster@${submitter}`, submitter };
  const done: TlsReportDoc[] = [];
  for (const domain of domains) {
    // One domain's failure (its store writes, its report, its mail) is its own: the rest are sent.
    try {
      // A report settled already costs no DNS lookup and no reading of its lines; claim() still
      // decides, by compare-and-set, between passes that find one due.
      const current = await tlsReports(deps.documents).get(`${day}|${domain}`);
      if (current && !due(current, deps.now())) continue;
      const saved = await sendDomainReport(deps, { identity, submitter, sender, signing }, day, domain, await linesOf(deps.documents, day, domain));
      if (saved) done.push(saved);
    } catch (error) {
      deps.onError(new Error(`TLS report for ${domain} (${day}): ${(error as Error).message}`, { cause: error }));
    }
  }
  return done;
}

/** Claims and sends one domain's report; null when it is not this pass's (claimed elsewhere, lookup failed, claim lost). */
async function sendDomainReport(deps: TlsReportingDeps, pass: PassContext, day: string, domain: string, domainLines: TlsSessionCountDoc[]): Promise<TlsReportDoc | null> {
  const { identity, submitter, sender, signing } = pass;
  let found: ReturnType<typeof destinationsOf>;
  try {
    const txt = await deps.dns.txt(`_smtp._tls.${domain}`);
    found = txt.kind === 'answer' ? destinationsOf(txt.records) : { destinations: null, note: null };
  } catch (error) {
    deps.onError(new Error(`TLS report for ${domain}: _smtp._tls lookup failed: ${(error as Error).message}`));
    return null; // asked again on the next pass
  }
  const { destinations } = found;
  const reportId = `${day}.${createHash('sha256').update(`${submitter} ${domain} ${day}`).digest('hex').slice(0, 16)}@${submitter}`;
  let claimed = await claim(deps.documents, day, domain, reportId, deps.now());
  if (!claimed) return null;
  const results: string[] = found.note ? [found.note] : [];
  // Which destinations have the report, as earlier attempts left it (a document from before this
  // was kept has none: each destination gets it).
  const reached = new Map((claimed.destinations ?? []).map((d) => [d.to, d.delivered]));
  const destinationList = (): ReportDestination[] => [...reached].map(([to, delivered]) => ({ to, delivered }));
  // After each destination: the claim stays this pass's, refreshed, or the pass stops (another
  // took it over as abandoned and sends the report itself).
  const refresh = async (): Promise<boolean> => {
    const { _v, ...rest } = claimed!;
    const next = await tlsReports(deps.documents).replace({ ...rest, results, destinations: destinationList(), updatedAt: deps.now().toISOString() }, _v);
    if (next) claimed = next;
    else warn(deps, 'TLS report claim taken over while sending: this pass stops sending it', { domain, day, results });
    return next !== null;
  };
  // The destinations this report is for: every one must have it for the report to be sent.
  const wanted: string[] = [];
  const statusNow = (): TlsReportDoc['status'] => {
    if (!destinations) return 'no_destination';
    const have = wanted.filter((to) => reached.get(to) === true).length;
    return have === 0 ? 'failed' : have < wanted.length ? 'partial' : 'sent';
  };
  try {
    if (destinations) {
      const { https, mailto, leftOut } = capped(destinations);
      if (leftOut > 0) results.push(`${leftOut} rua destinations past the first ${MAX_DESTINATIONS} not used`);
      const report = buildTlsReport(day, domain, domainLines, identity, reportId);
      const gz = gzipSync(Buffer.from(JSON.stringify(report)));
      for (const url of https) {
        wanted.push(url);
        if (reached.get(url)) {
          results.push(`${url}: has it (an earlier attempt)`);
          continue;
        }
        const outcome = await deps.egress.post({ url, body: gz, headers: { 'Content-Type': 'application/tlsrpt+gzip', 'User-Agent': 'Relay-TLSRPT/1.0' }, ...deps.https });
        results.push(`${url}: ${outcome.errorCode ?? `HTTP ${outcome.httpStatus}`}`);
        reached.set(url, outcome.errorCode === null);
        if (!(await refresh())) return null;
      }
      if (mailto.length > 0) {
        if (!sender || !signing) {
          results.push(`mailto skipped: ${sender ? `${submitter} is not a verified sending domain` : 'RELAY_TLSRPT_FROM is not set'}`);
        } else {
          wanted.push(...mailto.map((address) => `mailto:${address}`));
          const lacking = mailto.filter((address) => !reached.get(`mailto:${address}`));
          for (const address of mailto) if (!lacking.includes(address)) results.push(`mailto:${address}: has it (an earlier attempt)`);
          if (lacking.length > 0) {
            const { raw, messageId } = await reportMessage(report, gz, identity, domain, day, sender, lacking, signing, deps.secrets, deps.now());
            const outcome = await deps.transport.send({ emailId: `tlsrpt-${day}`, envelope: { mailFrom: sender, recipients: lacking }, raw, messageId }, { ignoreTlsPolicy: true });
            for (const r of outcome.recipients) {
              results.push(`mailto:${r.address}: ${r.result} ${r.response}`.slice(0, 300));
              reached.set(`mailto:${r.address}`, r.result === 'delivered' || r.result === 'accepted');
            }
            if (!(await refresh())) return null;
          }
        }
      }
    }
  } catch (error) {
    // Left due rather than `sending`: the next pass tries the destinations that lack it (within MAX_ATTEMPTS).
    const { _v, ...rest } = claimed;
    const status = statusNow() === 'partial' ? 'partial' : 'failed';
    await tlsReports(deps.documents).replace({ ...rest, status, results: [...results, `error: ${(error as Error).message}`.slice(0, 300)], destinations: destinationList(), updatedAt: deps.now().toISOString() }, _v).catch(() => null);
    throw error;
  }
  const { _v, ...rest } = claimed;
  return tlsReports(deps.documents).replace({ ...rest, status: statusNow(), results, destinations: destinationList(), updatedAt: deps.now().toISOString() }, _v);
}

/**
 * The UTC days a pass at `now` looks at: yesterday first, then the earlier ones of REPORT_DAYS;
 * yesterday only once COUNTS_SETTLE_MS have passed since it ended.
 */
function reportDays(now: Date): string[] {
  const days = Array.from({ length: REPORT_DAYS }, (_, i) => new Date(now.getTime() - (i + 1) * 86_400_000).toISOString().slice(0, 10));
  return days.filter((day) => Date.parse(`${day}T00:00:00Z`) + 86_400_000 + COUNTS_SETTLE_MS <= now.getTime());
}

/** Runs sendTlsReports for each of the last REPORT_DAYS days (UTC) now and then every hour, until stopped. */
export function startTlsReporting(deps: TlsReportingDeps, everyMs = 3_600_000): { stop(): Promise<void> } {
  let running: Promise<unknown> | null = null;
  const pass = () => {
    const days = reportDays(deps.now());
    // A pass still sending (slow destinations) is not joined by another: the next hour's takes
    // what is left.
    if (running) {
      warn(deps, 'TLS reports: the previous pass still runs, this one is skipped', { days });
      return;
    }
    running = (async () => {
      // One day's failure (its lines unreadable) leaves the other days to be sent.
      for (const day of days) {
        await sendTlsReports(deps, day).catch((error) => deps.onError(new Error(`TLS reports (${day}): ${(error as Error).message}`, { cause: error })));
      }
    })().finally(() => {
      running = null;
    });
  };
  const timer = setInterval(pass, everyMs);
  timer.unref();
  // The first pass waits a little: a process that starts is busy with other things.
  const first = setTimeout(pass, Math.min(everyMs, 60_000));
  first.unref();
  return {
    async stop() {
      clearInterval(timer);
      clearTimeout(first);
      await running;
    },
  };
}
