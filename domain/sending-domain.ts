// Sending-domain rules: which DNS records a sender must publish before Relay will send as
// that domain, and whether what DNS actually answers satisfies them. No I/O here: the
// resolver adapter (infra/dns/resolver.ts) gathers the answers, this module judges them.
//
// Invalid input throws SendingDomainInputError; `field` names the offending input so an
// HTTP layer can map it to a 422 on that property.
import { asciiDomainName, canonicalHost, labelProblem } from './dns-names.ts';
import { isSpf, spfPassMechanisms, walkSpf, type SpfDns, type SpfEquivalents, type SpfQuestion } from './spf.ts';

export { SPF_LOOKUP_LIMIT, SPF_VOID_LOOKUP_LIMIT } from './spf.ts';

export class SendingDomainInputError extends Error {
  readonly field: string;
  constructor(field: string, message: string) {
    super(message);
    this.name = 'SendingDomainInputError';
    this.field = field;
  }
}

const MAX_NAME_LENGTH = 253;

function checkLabels(labels: string[], field: string, shown: string): void {
  for (const label of labels) {
    const problem = labelProblem(label);
    if (problem) throw new SendingDomainInputError(field, `${shown}: ${problem.message}`);
  }
}

/**
 * Canonical ASCII form of a DNS host name: trimmed, lower-cased, without a trailing dot,
 * Unicode labels converted to punycode (IDNA via the WHATWG URL rules). Requires at least
 * two labels and a non-numeric top-level label, which keeps out bare hosts and IP addresses.
 */
export function normalizeDomainName(input: string, field = 'domain'): string {
  if (typeof input !== 'string') throw new SendingDomainInputError(field, `${field} must be a string`);
  let name = input.trim().toLowerCase();
  if (name.endsWith('.')) name = name.slice(0, -1);
  if (name.length === 0) throw new SendingDomainInputError(field, `${field} is empty`);
  if (/[^\x20-\x7e]/.test(name)) {
    const ascii = asciiDomainName(name);
    if (ascii === null) throw new SendingDomainInputError(field, `${field} "${input.trim()}" is not a valid internationalised domain name`);
    name = ascii;
  }
  if (name.length > MAX_NAME_LENGTH) throw new SendingDomainInputError(field, `${field} is longer than ${MAX_NAME_LENGTH} characters`);
  const labels = name.split('.');
  checkLabels(labels, field, `${field} "${name}"`);
  if (labels.length < 2) throw new SendingDomainInputError(field, `${field} "${name}" needs at least two labels (like example.com)`);
  if (/^\d+$/.test(labels[labels.length - 1])) {
    throw new SendingDomainInputError(field, `${field} "${name}" looks like an IP address, not a domain name`);
  }
  return name;
}

/** One or more labels to sit in front of the domain (a DKIM selector, the MAIL FROM prefix). */
function normalizeLabels(input: string, field: string): string {
  if (typeof input !== 'string') throw new SendingDomainInputError(field, `${field} must be a string`);
  const name = input.trim().toLowerCase();
  if (name.length === 0) throw new SendingDomainInputError(field, `${field} is empty`);
  checkLabels(name.split('.'), field, `${field} "${name}"`);
  return name;
}

/** A DKIM selector: one or more DNS labels, lower-cased (what requiredRecords accepts). */
export function normalizeDkimSelector(input: string, field = 'dkimSelector'): string {
  return normalizeLabels(input, field);
}

export type DnsRecordType = 'TXT' | 'MX';
export type RecordPurpose = 'dkim' | 'mail_from_mx' | 'mail_from_spf' | 'dmarc';

export interface DnsRecord {
  /** Fully qualified, lower case, no trailing dot. */
  name: string;
  type: DnsRecordType;
  /** TXT: the full text (publish it split in 255-char strings, see splitTxtValue). MX: the exchange host. */
  value: string;
  /** MX only. */
  priority?: number;
  purpose: RecordPurpose;
  /** False for records we recommend but do not wait for. */
  required: boolean;
}

export interface SendingDomainSettings {
  domain: string;
  dkimSelector: string;
  /** Base64 DER SubjectPublicKeyInfo (the DKIM p= tag). */
  dkimPublicKeyBase64: string;
  /** Label(s) put in front of the domain for the envelope sender, e.g. "bounce". */
  mailFromSubdomain: string;
  /** Host receiving bounces for the MAIL FROM domain. */
  mxHost: string;
  /**
   * Domain whose SPF record lists the sending IPs (`include:<spfInclude>`). When absent the
   * MAIL FROM SPF authorises the MX host's addresses (`a:<mxHost>`), which fits a
   * self-hosted Relay whose bounce host is also its sending host.
   */
  spfInclude?: string;
  /** What the SPF record says about everyone else. Default '~all' (soft fail). */
  spfAll?: '~all' | '-all';
}

export const MAIL_FROM_MX_PRIORITY = 10;
export const RECOMMENDED_DMARC = 'v=DMARC1; p=none;';

function normalizeDkimKey(input: string): string {
  const key = typeof input === 'string' ? input.replace(/\s+/g, '') : '';
  if (key.length === 0 || key.length % 4 !== 0 || !/^[A-Za-z0-9+/]+={0,2}$/.test(key)) {
    throw new SendingDomainInputError('dkimPublicKeyBase64', 'dkimPublicKeyBase64 must be non-empty standard base64');
  }
  return key;
}

function checkedName(name: string, field: string): string {
  if (name.length > MAX_NAME_LENGTH) throw new SendingDomainInputError(field, `${name} is longer than ${MAX_NAME_LENGTH} characters`);
  return name;
}

/**
 * The names of the records a domain needs, each a prefix in front of the domain:
 * `<selector>._domainkey`, `<mailFromSubdomain>` (MX and SPF) and `_dmarc` (requiredRecords).
 */
const recordPrefixes = (selector: string, mailFromSubdomain: string): string[] => [`${selector}._domainkey`, mailFromSubdomain, '_dmarc'];

/**
 * The longest a sending domain's name may be so that every record name built from it
 * (requiredRecords) stays within the 253 characters of a DNS name, given its DKIM selector and
 * MAIL FROM prefix. The domain alone may be 253; its records are longer.
 */
export function maxSendingDomainLength(dkimSelector: string, mailFromSubdomain: string): number {
  const longest = Math.max(...recordPrefixes(dkimSelector.trim().toLowerCase(), mailFromSubdomain.trim().toLowerCase()).map((p) => p.length));
  return MAX_NAME_LENGTH - longest - 1; // the dot between prefix and domain
}

/** Throws SendingDomainInputError when a record name built from `domain` (normalized) would be longer than a DNS name may be. */
export function checkRecordNamesFit(domain: string, dkimSelector: string, mailFromSubdomain: string, field = 'domain'): void {
  const max = maxSendingDomainLength(dkimSelector, mailFromSubdomain);
  if (domain.length > max) {
    throw new SendingDomainInputError(
      field,
      `${field} is ${domain.length} characters; a sending domain may have at most ${max}, so that the names of its DNS records ` +
        `(such as ${dkimSelector}._domainkey.<domain>) stay within the ${MAX_NAME_LENGTH} characters of a DNS name`,
    );
  }
}

/** The TXT record publishing one DKIM key: `<selector>._domainkey.<domain>`. */
export function dkimRecord(domainName: string, dkimSelector: string, dkimPublicKeyBase64: string): DnsRecord {
  const domain = normalizeDomainName(domainName, 'domain');
  const selector = normalizeLabels(dkimSelector, 'dkimSelector');
  const key = normalizeDkimKey(dkimPublicKeyBase64);
  return {
    name: checkedName(`${selector}._domainkey.${domain}`, 'dkimSelector'),
    type: 'TXT',
    value: `v=DKIM1; k=rsa; p=${key}`,
    purpose: 'dkim',
    required: true,
  };
}

export function requiredRecords(settings: SendingDomainSettings): DnsRecord[] {
  const dkim = dkimRecord(settings.domain, settings.dkimSelector, settings.dkimPublicKeyBase64);
  const domain = normalizeDomainName(settings.domain, 'domain');
  const mailFrom = checkedName(`${normalizeLabels(settings.mailFromSubdomain, 'mailFromSubdomain')}.${domain}`, 'mailFromSubdomain');
  const mxHost = normalizeDomainName(settings.mxHost, 'mxHost');
  const mechanism = settings.spfInclude === undefined
    ? `a:${mxHost}`
    : `include:${normalizeDomainName(settings.spfInclude, 'spfInclude')}`;
  const all = settings.spfAll ?? '~all';
  if (all !== '~all' && all !== '-all') throw new SendingDomainInputError('spfAll', 'spfAll must be "~all" or "-all"');
  return [
    dkim,
    { name: mailFrom, type: 'MX', value: mxHost, priority: MAIL_FROM_MX_PRIORITY, purpose: 'mail_from_mx', required: true },
    { name: mailFrom, type: 'TXT', value: `v=spf1 ${mechanism} ${all}`, purpose: 'mail_from_spf', required: true },
    { name: `_dmarc.${domain}`, type: 'TXT', value: RECOMMENDED_DMARC, purpose: 'dmarc', required: false },
  ];
}

/** A TXT character-string holds at most 255 bytes, so longer values are published as several. */
export function splitTxtValue(value: string, size = 255): string[] {
  const chunks: string[] = [];
  for (let at = 0; at < value.length; at += size) chunks.push(value.slice(at, at + size));
  return chunks.length > 0 ? chunks : [''];
}

// ---------------------------------------------------------------------------------------
// Verification

/**
 * What verification asks DNS about: the records' own types, and the addresses (A, AAAA) and MX
 * records the a, mx and exists terms of an SPF record name (for the void lookup limit).
 */
export type DnsQuestionType = DnsRecordType | 'A' | 'AAAA';

export interface DnsQuestion {
  name: string;
  type: DnsQuestionType;
}

/** What a resolver said for one name and type. */
export type DnsAnswer =
  /** Each TXT record as the character-strings it was published in. */
  | { name: string; type: 'TXT'; kind: 'answer'; txt: string[][] }
  | { name: string; type: 'MX'; kind: 'answer'; mx: Array<{ exchange: string; priority: number }> }
  | { name: string; type: 'A' | 'AAAA'; kind: 'answer'; addresses: string[] }
  /** The name does not exist at all. */
  | { name: string; type: DnsQuestionType; kind: 'nxdomain' }
  /** The name exists but has no record of this type. */
  | { name: string; type: DnsQuestionType; kind: 'nodata' }
  /** No usable answer (timeout, SERVFAIL, refused…): says nothing about the records. */
  | { name: string; type: DnsQuestionType; kind: 'error'; code: string; message: string };

export type CheckStatus = 'ok' | 'missing' | 'mismatch' | 'error';

export interface RecordCheck {
  purpose: RecordPurpose;
  name: string;
  type: DnsRecordType;
  required: boolean;
  status: CheckStatus;
  expected: string;
  /** What DNS holds at that name and type (TXT strings joined, MX as "priority host"). */
  found: string[];
  message: string;
}

export interface VerificationResult {
  /** Every required record checked ok. */
  verified: boolean;
  checks: RecordCheck[];
}

type Judgement = Pick<RecordCheck, 'status' | 'message'>;

/** Tag list per RFC 6376 3.2; null when malformed (no '=', or a tag given twice). */
function parseTagList(text: string): Map<string, string> | null {
  const tags = new Map<string, string>();
  for (const spec of text.split(';')) {
    if (spec.trim() === '') continue;
    const eq = spec.indexOf('=');
    if (eq < 0) return null;
    const tag = spec.slice(0, eq).trim();
    if (tag === '' || tags.has(tag)) return null;
    // Whitespace inside a value is folding (and base64 ignores it), never meaning.
    tags.set(tag, spec.slice(eq + 1).replace(/\s+/g, ''));
  }
  return tags;
}

function dkimKeyMatches(expected: Map<string, string>, found: Map<string, string>): boolean {
  // Absent v= and k= take their RFC 6376 defaults.
  const v = found.get('v') ?? 'DKIM1';
  const k = (found.get('k') ?? 'rsa').toLowerCase();
  return v === expected.get('v') && k === (expected.get('k') ?? 'rsa').toLowerCase() && found.get('p') === expected.get('p');
}

const colonList = (value: string) => value.split(':').map((item) => item.trim().toLowerCase());

/**
 * Why verifiers must ignore this key record for Relay's signatures (rsa-sha256, on mail), or
 * null: h= that leaves out sha256 (RFC 6376 6.1.2), s= that names neither email nor * (3.6.1).
 */
function keyRecordRestriction(found: Map<string, string>): string | null {
  const h = found.get('h');
  if (h !== undefined && !colonList(h).includes('sha256')) return `the record limits the key to h=${h}; Relay signs rsa-sha256`;
  const s = found.get('s');
  if (s !== undefined && !colonList(s).some((service) => service === 'email' || service === '*')) return `the record limits the key to s=${s}; receivers ignore it for email unless s= lists email or *`;
  return null;
}

function judgeDkim(record: DnsRecord, txt: string[]): Judgement {
  const expected = parseTagList(record.value);
  if (!expected) throw new Error(`unparseable expected DKIM record ${record.value}`);
  if (txt.length === 0) return { status: 'missing', message: `No TXT record at ${record.name}` };
  const parsed = txt.map(parseTagList);
  const holdingKey = parsed.filter((tags): tags is Map<string, string> => tags !== null && dkimKeyMatches(expected, tags));
  const matching = holdingKey.filter((tags) => keyRecordRestriction(tags) === null).length;
  // Verifiers pick one key record arbitrarily when there are several (RFC 6376 6.1.2), so a
  // stray second key (or the key again, restricted) makes signatures fail some of the time.
  const others = parsed.filter((tags) => tags === null || tags.has('p')).length - matching;
  if (matching > 0 && others === 0) return { status: 'ok', message: `DKIM key for selector published at ${record.name}` };
  if (matching > 0) return { status: 'mismatch', message: `${record.name} holds the expected DKIM key and ${others} other key record(s); remove the others` };
  if (holdingKey.length > 0) return { status: 'mismatch', message: `DKIM record at ${record.name} holds the expected public key, but ${keyRecordRestriction(holdingKey[0])}` };
  if (parsed.some((tags) => tags?.get('p') === '')) return { status: 'mismatch', message: `DKIM key at ${record.name} is revoked (empty p=)` };
  if (parsed.every((tags) => tags === null)) return { status: 'mismatch', message: `TXT at ${record.name} is not a valid DKIM key record` };
  return { status: 'mismatch', message: `DKIM record at ${record.name} does not hold the expected public key` };
}

/** The answers by `type name`. */
type AnswersByKey = ReadonlyMap<string, DnsAnswer>;

const answerKey = (type: DnsQuestionType, name: string) => `${type} ${canonicalHost(name)}`;

function answersByKey(answers: readonly DnsAnswer[]): AnswersByKey {
  const byKey = new Map<string, DnsAnswer>();
  for (const answer of answers) byKey.set(answerKey(answer.type, answer.name), answer);
  return byKey;
}

/** Whether an answer holds records of its type. */
function holdsRecords(answer: DnsAnswer): boolean {
  if (answer.kind !== 'answer') return false;
  if (answer.type === 'TXT') return answer.txt.length > 0;
  if (answer.type === 'MX') return answer.mx.length > 0;
  return answer.addresses.length > 0;
}

/** What the answers say, for the SPF walk. */
function spfDnsOf(byKey: AnswersByKey): SpfDns {
  return {
    spfAt: (name) => {
      const answer = byKey.get(answerKey('TXT', name));
      if (answer === undefined) return undefined;
      if (answer.kind === 'error') return { failed: { code: answer.code, message: answer.message } };
      return { spf: answer.kind === 'answer' && answer.type === 'TXT' ? answer.txt.map((strings) => strings.join('')).filter(isSpf) : [] };
    },
    hostAt: (name, type) => {
      const answer = byKey.get(answerKey(type, name));
      if (answer === undefined) return undefined;
      if (answer.kind === 'error') return { failed: { code: answer.code, message: answer.message } };
      return holdsRecords(answer) ? 'records' : 'void';
    },
  };
}

/** The MX hosts DNS answered at `name` (canonical), none when it was not asked or has none. */
function mxHostsAt(byKey: AnswersByKey, name: string): string[] {
  const answer = byKey.get(answerKey('MX', name));
  return answer?.kind === 'answer' && answer.type === 'MX' ? answer.mx.map((m) => canonicalHost(m.exchange)) : [];
}

/**
 * The terms that authorise Relay as `required` does in the MAIL FROM record published at
 * `name`. RFC 7208 5.4: `mx` there (or `mx:<name>` anywhere) authorises the addresses of the
 * name's MX hosts; when Relay's mechanism is `a:<mail host>` (5.3: the mail host's addresses)
 * and the MX that verification checks points to the mail host, it authorises them too. A
 * receiver evaluates at most 10 MX hosts (4.6.4).
 */
function spfEquivalents(name: string, required: string, byKey: AnswersByKey): SpfEquivalents | null {
  if (!required.startsWith('a:')) return null;
  const host = canonicalHost(required.slice('a:'.length));
  const mx = mxHostsAt(byKey, name);
  if (!mx.includes(host) || mx.length > 10) return null;
  const at = canonicalHost(name);
  return { anywhere: [`mx:${at}`], atTop: ['mx'], because: `the MX of ${at} is ${host}` };
}

/**
 * The lookups verification needs beyond `answers` to evaluate the SPF records as receivers do:
 * the records their include: and redirect= terms lead to, and the names their a, mx and exists
 * terms ask about before Relay's mechanism (void lookups), as far as each walk gets. Looking
 * them up and asking again ends within SPF_LOOKUP_LIMIT rounds: each round's questions are new,
 * a round answers all a walk met up to the next record it has to open, and a walk opens at
 * most that many.
 */
export function spfLookupsNeeded(records: readonly DnsRecord[], answers: readonly DnsAnswer[]): DnsQuestion[] {
  const byKey = answersByKey(answers);
  const dns = spfDnsOf(byKey);
  const needed = new Map<string, SpfQuestion>();
  for (const record of records) {
    if (record.type !== 'TXT' || record.purpose !== 'mail_from_spf') continue;
    const answer = dns.spfAt(record.name);
    const spf = answer && 'spf' in answer ? answer.spf : [];
    if (spf.length !== 1) continue;
    for (const required of spfPassMechanisms(record.value)) {
      const walk = walkSpf(record.name, spf[0], required, dns, spfEquivalents(record.name, required, byKey));
      if (walk.kind === 'needs') for (const question of walk.questions) needed.set(`${question.type} ${question.name}`, question);
    }
  }
  return [...needed.values()];
}

function judgeSpf(record: DnsRecord, txt: string[], byKey: AnswersByKey): Judgement {
  const spf = txt.filter(isSpf);
  if (spf.length === 0) return { status: 'missing', message: `No SPF (v=spf1) record at ${record.name}` };
  if (spf.length > 1) return { status: 'mismatch', message: `${spf.length} SPF records at ${record.name}; receivers treat that as a permanent error (RFC 7208 4.5): keep one` };
  const reached: string[] = [];
  const lacking: string[] = [];
  const dns = spfDnsOf(byKey);
  for (const required of spfPassMechanisms(record.value)) {
    const walk = walkSpf(record.name, spf[0], required, dns, spfEquivalents(record.name, required, byKey));
    switch (walk.kind) {
      case 'pass':
        reached.push(walk.via.length === 0 ? required : `${required} through ${walk.via.join(', then ')}`);
        break;
      case 'passAll':
      case 'noMatch':
        lacking.push(required);
        break;
      case 'broken': {
        const why = walk.permerror ? ', which receivers answer with a permanent error (RFC 7208)' : `; authorise ${required} without it`;
        return { status: 'mismatch', message: `SPF record at ${record.name} does not authorise ${required}: ${walk.reason}${why}` };
      }
      case 'failed':
        return { status: 'error', message: `Looking up ${walk.type} ${walk.name} (for ${walk.term} in the SPF of ${record.name}) failed (${walk.code}): ${walk.message}` };
      case 'needs':
        return { status: 'error', message: `${walk.questions.map((q) => `${q.type} ${q.name}`).join(', ')} (in the SPF of ${record.name}) not looked up` };
    }
  }
  if (lacking.length > 0) return { status: 'mismatch', message: `SPF record at ${record.name} does not authorise ${lacking.join(' ')} (before any "all", following include: and redirect=)` };
  return { status: 'ok', message: `SPF at ${record.name} authorises ${reached.join(' ')}` };
}

// ---------------------------------------------------------------------------------------
// DMARC (RFC 7489)

/**
 * The organizational domain of a domain name (RFC 7489 3.2: the public suffix list's
 * registrable domain), or null when it has none. Given by the caller: the list is data
 * infra/ holds.
 */
export type OrganizationalDomainOf = (domain: string) => string | null;

export interface VerificationOptions {
  /** Without it, a domain without a DMARC record of its own is not looked up further. */
  organizationalDomain?: OrganizationalDomainOf;
}

const DMARC_POLICIES = new Set(['none', 'quarantine', 'reject']);
// RFC 7489 6.4: dmarc-version = "v" *WSP "=" *WSP %x44 %x4d %x41 %x52 %x43 %x31. A quoted ABNF
// string matches in any case (RFC 5234 2.3), so "V=DMARC1" is a DMARC record; the hex "DMARC1"
// only as written.
const DMARC_VERSION = /^[vV][ \t]*=[ \t]*DMARC1[ \t]*(?:;|$)/;
// RFC 7489 6.4 dmarc-uri: an RFC 3986 URI (a scheme, ":" and URI characters; "," and "!" are
// separators there), with an optional "!" size.
const REPORTING_URI = /^[a-z][a-z0-9+.-]*:(?:[a-z0-9\-._~:/?#[\]@$&'()*+;=]|%[0-9a-f]{2})*(?:![0-9]+[kmgt]?)?$/i;

const isDmarcRecord = (text: string) => DMARC_VERSION.test(text.trim());

/**
 * What receivers do with one DMARC record (RFC 7489 6.3, 6.4, 6.6.3). policy: they apply its p=
 * (for a subdomain, its sp= when it has one); reports: its p= is missing or invalid (or its sp=
 * invalid) but its rua= holds a reporting URI, so they apply it as p=none; ignored: the same
 * without a reporting URI, so they apply no policy; malformed: a tag given twice (RFC 6376 3.2,
 * whose tag-list DMARC's follows). A part that is no tag=value is skipped, as receivers skip it
 * (RFC 7489 6.3). Tag names match in any case, as the ABNF's quoted strings do, and so do the
 * policy values.
 */
type DmarcReading =
  | { kind: 'policy'; policy: string; tag: 'p' | 'sp' }
  | { kind: 'reports' | 'ignored' | 'malformed'; problem: string };

function readDmarc(text: string, forSubdomain: boolean): DmarcReading {
  const tags = new Map<string, string>();
  for (const spec of text.trim().split(';')) {
    if (spec.trim() === '') continue;
    const eq = spec.indexOf('=');
    const tag = spec.slice(0, Math.max(eq, 0)).trim().toLowerCase();
    // RFC 7489 6.3: syntax errors in the rest of the record are discarded; receivers (OpenDMARC,
    // mailauth) skip a part that is no tag=value and apply the policy the record does give.
    if (eq < 0 || tag === '') continue;
    if (tags.has(tag)) return { kind: 'malformed', problem: `${tag}= is given twice` };
    tags.set(tag, spec.slice(eq + 1).trim());
  }
  const p = tags.get('p');
  const sp = tags.get('sp');
  const valid = (value: string) => DMARC_POLICIES.has(value.toLowerCase());
  let problem: string;
  if (p === undefined) problem = 'has no p= tag';
  else if (!valid(p)) problem = `has p=${p}, which is no policy`;
  else if (sp !== undefined && !valid(sp)) problem = `has sp=${sp}, which is no policy`;
  else return forSubdomain && sp !== undefined ? { kind: 'policy', policy: sp.toLowerCase(), tag: 'sp' } : { kind: 'policy', policy: p.toLowerCase(), tag: 'p' };
  problem = `${problem} (none, quarantine or reject)`;
  const rua = tags.get('rua');
  const reports = rua !== undefined && rua.split(',').some((uri) => REPORTING_URI.test(uri.trim()));
  return { kind: reports ? 'reports' : 'ignored', problem };
}

/** What receivers do with a DMARC record that holds no valid policy, as a message says it of the record. */
function readingSaid(reading: Exclude<DmarcReading, { kind: 'policy' }>): string {
  switch (reading.kind) {
    case 'reports': return `${reading.problem}, and asks for aggregate reports (rua=), so receivers apply it as p=none (RFC 7489 6.6.3)`;
    case 'ignored': return `${reading.problem}, so receivers apply no DMARC policy with it (RFC 7489 6.6.3)`;
    case 'malformed': return `is malformed: ${reading.problem}; receivers that keep to RFC 7489 6.3 ignore it`;
  }
}

/** The name of the organizational domain's DMARC record for the record `name` (`_dmarc.<domain>`), or null when it is the same name or there is none. */
function organizationalDmarcName(name: string, options: VerificationOptions): string | null {
  const domain = canonicalHost(name).replace(/^_dmarc\./, '');
  const organizational = options.organizationalDomain?.(domain) ?? null;
  if (organizational === null) return null;
  const at = canonicalHost(organizational);
  return at === domain ? null : `_dmarc.${at}`;
}

/** The DMARC records among the TXT records of an answer. */
function dmarcRecordsIn(answer: DnsAnswer | undefined): string[] {
  return answer?.kind === 'answer' && answer.type === 'TXT' ? answer.txt.map((strings) => strings.join('')).filter(isDmarcRecord) : [];
}

/**
 * The TXT lookup of the organizational domain's DMARC record (RFC 7489 6.6.3) for each domain
 * whose own name answered none (NXDOMAIN, no TXT, or no DMARC record among them), when not
 * asked yet.
 */
export function dmarcLookupsNeeded(records: readonly DnsRecord[], answers: readonly DnsAnswer[], options: VerificationOptions): DnsQuestion[] {
  const byKey = answersByKey(answers);
  const needed: DnsQuestion[] = [];
  for (const record of records) {
    if (record.purpose !== 'dmarc') continue;
    const own = byKey.get(answerKey('TXT', record.name));
    if (own === undefined || own.kind === 'error' || dmarcRecordsIn(own).length > 0) continue;
    const organizational = organizationalDmarcName(record.name, options);
    if (organizational !== null && !byKey.has(answerKey('TXT', organizational))) needed.push({ name: organizational, type: 'TXT' });
  }
  return needed;
}

/** The DMARC policy the domain inherits from its organizational domain's record at `name`, when it has none of its own. */
function judgeOrganizationalDmarc(record: DnsRecord, name: string, answer: DnsAnswer | undefined): Judgement {
  const none = `No DMARC record at ${record.name}`;
  const theirs = `the organizational domain's ${name}`;
  if (answer === undefined) return { status: 'error', message: `${none}; TXT ${name} (the organizational domain's) was not looked up` };
  if (answer.kind === 'error') return { status: 'error', message: `${none}; looking up TXT ${name} (the organizational domain's) failed (${answer.code}): ${answer.message}` };
  const dmarc = dmarcRecordsIn(answer);
  if (dmarc.length === 0) return { status: 'missing', message: `No DMARC policy at ${record.name}, nor at ${theirs} (recommended, not required): ${record.value}` };
  if (dmarc.length > 1) return { status: 'missing', message: `${none}, and ${dmarc.length} at ${theirs}; receivers ignore them all. Recommended: ${record.value}` };
  const reading = readDmarc(dmarc[0], true);
  const domain = canonicalHost(record.name).replace(/^_dmarc\./, '');
  const applied = `receivers apply it to ${domain}, which has no DMARC record of its own (RFC 7489 6.6.3). Nothing to publish at ${record.name}: a record there would replace it`;
  if (reading.kind === 'policy') return { status: 'ok', message: `DMARC policy ${reading.tag}=${reading.policy} inherited from ${theirs}: ${applied}` };
  if (reading.kind === 'reports') return { status: 'ok', message: `DMARC policy p=none inherited from ${theirs}, whose record ${readingSaid(reading)}: ${applied}` };
  return { status: 'mismatch', message: `${none}, and the record at ${theirs}, which receivers would apply instead, ${readingSaid(reading)}: correct it there, or publish ${record.value} at ${record.name}` };
}

function judgeDmarc(record: DnsRecord, answer: DnsAnswer, byKey: AnswersByKey, options: VerificationOptions): Judgement {
  const dmarc = dmarcRecordsIn(answer);
  if (dmarc.length === 1) {
    const reading = readDmarc(dmarc[0], false);
    if (reading.kind === 'policy') return { status: 'ok', message: `DMARC policy p=${reading.policy} published at ${record.name}` };
    if (reading.kind === 'reports') return { status: 'ok', message: `DMARC record at ${record.name} ${readingSaid(reading)}` };
    return { status: 'mismatch', message: `DMARC record at ${record.name} ${readingSaid(reading)}. Recommended: ${record.value}` };
  }
  // Receivers ignore every DMARC record when there are several (RFC 7489 6.6.3).
  if (dmarc.length > 1) return { status: 'missing', message: `${dmarc.length} DMARC records at ${record.name}; receivers ignore them all. Recommended: ${record.value}` };
  const organizational = organizationalDmarcName(record.name, options);
  if (organizational !== null) return judgeOrganizationalDmarc(record, organizational, byKey.get(answerKey('TXT', organizational)));
  return { status: 'missing', message: `No DMARC policy at ${record.name} (recommended, not required): ${record.value}` };
}

function judgeMx(record: DnsRecord, mx: Array<{ exchange: string; priority: number }>): Judgement {
  if (mx.length === 0) return { status: 'missing', message: `No MX record at ${record.name}` };
  const want = canonicalHost(record.value);
  if (mx.some((m) => canonicalHost(m.exchange) === want)) return { status: 'ok', message: `MX at ${record.name} points to ${want}` };
  return { status: 'mismatch', message: `MX at ${record.name} does not point to ${want}` };
}

function judge(record: DnsRecord, byKey: AnswersByKey, options: VerificationOptions): Judgement & { found: string[] } {
  const what = `${record.type} ${record.name}`;
  const answer = byKey.get(answerKey(record.type, record.name));
  if (!answer) return { status: 'error', found: [], message: `${what} was not looked up` };
  if (answer.kind === 'error') return { status: 'error', found: [], message: `Looking up ${what} failed (${answer.code}): ${answer.message}` };
  const judged = judgeAnswer(record, answer, byKey, options);
  return answer.kind === 'nxdomain' && judged.status !== 'ok' ? { ...judged, message: `${judged.message} (the name does not exist in DNS)` } : judged;
}

function judgeAnswer(record: DnsRecord, answer: DnsAnswer, byKey: AnswersByKey, options: VerificationOptions): Judgement & { found: string[] } {
  if (record.type === 'MX') {
    const mx = answer.kind === 'answer' && answer.type === 'MX' ? answer.mx : [];
    return { ...judgeMx(record, mx), found: mx.map((m) => `${m.priority} ${canonicalHost(m.exchange)}`) };
  }
  // A TXT record's character-strings are one value split for transport (RFC 7208 3.3, RFC 6376 3.6.2.2).
  const txt = answer.kind === 'answer' && answer.type === 'TXT' ? answer.txt.map((strings) => strings.join('')) : [];
  switch (record.purpose) {
    case 'dkim': return { ...judgeDkim(record, txt), found: txt };
    case 'dmarc': return { ...judgeDmarc(record, answer, byKey, options), found: txt };
    default: return { ...judgeSpf(record, txt, byKey), found: txt };
  }
}

/**
 * Compares the records a domain needs with what DNS returned for each of their names and types,
 * for the names the SPF record's terms lead to (spfLookupsNeeded), and for the organizational
 * domain's DMARC record (dmarcLookupsNeeded, with the same options).
 */
export function evaluateVerification(records: readonly DnsRecord[], answers: readonly DnsAnswer[], options: VerificationOptions = {}): VerificationResult {
  const byKey = answersByKey(answers);
  const checks = records.map((record): RecordCheck => {
    const judgement = judge(record, byKey, options);
    return {
      purpose: record.purpose,
      name: record.name,
      type: record.type,
      required: record.required,
      status: judgement.status,
      expected: record.type === 'MX' ? `${record.priority ?? MAIL_FROM_MX_PRIORITY} ${record.value}` : record.value,
      found: judgement.found,
      message: judgement.message,
    };
  });
  return { verified: checks.every((c) => !c.required || c.status === 'ok'), checks };
}
