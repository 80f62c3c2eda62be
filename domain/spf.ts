// SPF as a receiver evaluates it (RFC 7208), for one question: does the record published at a
// name authorise one of Relay's mechanisms (`include:<spfInclude>`, `a:<mxHost>`)? The terms are
// read in order, include: evaluated where it stands and redirect= at the end of a record without
// "all", within the lookup limit and the void lookup limit; every other term is taken not to
// match Relay's addresses, which Relay cannot know. Each record the walk opens is checked for
// syntax errors first, as a receiver does (RFC 7208 4.6: one anywhere is a permerror). No I/O:
// the caller says what DNS answered (SpfDns), and a walk that needs more says which questions.
import { canonicalHost } from './dns-names.ts';
import { spfTermProblem } from './spf-syntax.ts';

export function isSpf(text: string): boolean {
  // RFC 7208 4.5: exactly "v=spf1" followed by a space or the end, case-insensitively.
  return /^v=spf1(?: |$)/i.test(text);
}

/** Mechanisms that authorise senders, stopping at "all": anything after it is never evaluated (RFC 7208 5.1). */
export function spfPassMechanisms(text: string): string[] {
  const terms = text.trim().split(/\s+/).slice(1).map((t) => t.toLowerCase());
  const out: string[] = [];
  for (const term of terms) {
    const bare = term.replace(/^[+\-~?]/, '');
    if (bare === 'all') break;
    if (term.startsWith('+') || bare === term) out.push(bare.replace(/\.$/, ''));
  }
  return out;
}

/**
 * Terms a receiver may evaluate per SPF check that query DNS (include, a, mx, ptr, exists,
 * redirect=), nested records included; one more is a permerror (RFC 7208 4.6.4).
 */
export const SPF_LOOKUP_LIMIT = 10;

const SPF_LOOKUP_MECHANISMS = new Set(['include', 'a', 'mx', 'ptr', 'exists']);

/**
 * Void lookups (a DNS query answered NXDOMAIN or with no records) a receiver allows per SPF
 * check; one more is a permerror (RFC 7208 4.6.4).
 */
export const SPF_VOID_LOOKUP_LIMIT = 2;

/**
 * What DNS said at a name: the SPF records among its TXT records (none when the name or its TXT
 * records do not exist), a lookup that failed, or undefined when it was not looked up (yet).
 */
export type SpfAt = (name: string) => { spf: string[] } | { failed: { code: string; message: string } } | undefined;

/** The address and MX questions the a, mx and exists terms make. */
export type SpfHostQuestion = 'A' | 'AAAA' | 'MX';

/** One DNS question a walk needs answered to go on. */
export interface SpfQuestion {
  name: string;
  type: 'TXT' | SpfHostQuestion;
}

/**
 * What DNS said of one name and type an a, mx or exists term asks about: some records, none
 * (`void`: NXDOMAIN, or no record of the type), a lookup that failed, or undefined when it was
 * not looked up (yet).
 */
export type SpfHostAt = (name: string, type: SpfHostQuestion) => 'records' | 'void' | { failed: { code: string; message: string } } | undefined;

export interface SpfDns {
  spfAt: SpfAt;
  hostAt: SpfHostAt;
}

/**
 * How the evaluation of one record ends for Relay's addresses, taking every term other than
 * Relay's mechanism not to match them (Relay cannot know what they match). pass: Relay's
 * mechanism reached with a pass qualifier (`via`: the include:, redirect= or equivalent terms
 * followed to it); passAll: a pass "all" came first; noMatch: the record ends otherwise (a
 * non-pass "all" or qualifier on Relay's mechanism, or its end), so an include: of it does not
 * match; broken: receivers return permerror (`permerror`), or verification cannot follow the
 * record; failed: a lookup failed; needs: the answers to `questions` are needed to go on.
 */
export type SpfWalk =
  | { kind: 'pass'; via: string[] }
  | { kind: 'passAll' }
  | { kind: 'noMatch' }
  | { kind: 'broken'; reason: string; permerror: boolean }
  | { kind: 'failed'; name: string; type: SpfQuestion['type']; code: string; message: string; term: string }
  | { kind: 'needs'; questions: SpfQuestion[] };

/**
 * Terms (lower case, without qualifier or trailing dot) that authorise Relay's addresses as its
 * mechanism does: when the mechanism is `a:<mail host>` and the MX of the name the record is
 * published at is the mail host, `mx:<that name>` in any record the walk opens, and `mx` in
 * that record itself, where its <domain> is that name (RFC 7208 5.3, 5.4).
 */
export interface SpfEquivalents {
  anywhere: readonly string[];
  atTop: readonly string[];
  /** Why they authorise Relay, said when the walk passes through one. */
  because: string;
}

interface SpfWalkState {
  required: string;
  equivalents: SpfEquivalents;
  dns: SpfDns;
  lookups: number;
  /** The a, mx and exists terms evaluated whose lookups were void, in order. */
  voids: string[];
  /** Questions the walk met unanswered, by `type name`: all are asked before it says how it ends. */
  needs: Map<string, SpfQuestion>;
  /** The records being evaluated, outermost first: one of them included again is a loop. */
  open: string[];
}

/** The ip4-cidr-length and ip6-cidr-length that may end an a or mx term. */
const CIDR_LENGTHS = /(?:\/\d+)?(?:\/\/\d+)?$/;

const isPassQualifier = (qualifier: string) => qualifier === '' || qualifier === '+';

const permerror = (reason: string): SpfWalk => ({ kind: 'broken', reason, permerror: true });

const STOP: SpfWalk = { kind: 'needs', questions: [] };

function need(state: SpfWalkState, name: string, type: SpfQuestion['type']): void {
  state.needs.set(`${type} ${name}`, { name, type });
}

/** One more DNS-querying term evaluated; the permerror when that is one too many. */
function countLookup(state: SpfWalkState, term: string): SpfWalk | null {
  state.lookups++;
  return state.lookups > SPF_LOOKUP_LIMIT
    ? permerror(`evaluating it takes more than ${SPF_LOOKUP_LIMIT} DNS lookups (include, a, mx, ptr, exists, redirect=) by ${term}`)
    : null;
}

/**
 * The name an a, mx or exists term (`bare`: without its qualifier) makes its receiver look up:
 * its domain-spec, else the domain of the record it stands in (RFC 7208 5.3, 5.4, 5.7); null
 * when the name holds a macro, which expands per message.
 */
function hostOfTerm(state: SpfWalkState, mechanism: string, bare: string): string | null {
  // The syntax was checked: what follows the name is "" or ":" domain-spec, then a and mx's prefix lengths.
  const rest = bare.slice(mechanism.length).replace(CIDR_LENGTHS, '');
  if (rest === '') return state.open[state.open.length - 1];
  const spec = rest.slice(1);
  return spec.includes('%') ? null : canonicalHost(spec);
}

/**
 * The lookups an a, mx or exists term makes, counted as a receiver counts void ones (RFC 7208
 * 4.6.4): the permerror once they pass the limit, a failed lookup, or null. An a term is void
 * when the name has neither A nor AAAA records (Relay's mail may come over either, and a
 * receiver asks only for the client's), an mx term when it has no MX (its hosts' addresses are
 * not counted), an exists term when it has no A record. A question not answered yet is noted
 * (state.needs) and taken as not void meanwhile.
 */
function countVoidLookup(state: SpfWalkState, term: string, mechanism: 'a' | 'mx' | 'exists', bare: string): SpfWalk | null {
  const name = hostOfTerm(state, mechanism, bare);
  if (name === null) return null;
  const types: SpfHostQuestion[] = mechanism === 'a' ? ['A', 'AAAA'] : mechanism === 'mx' ? ['MX'] : ['A'];
  const answers = types.map((type) => ({ type, answer: state.dns.hostAt(name, type) }));
  if (answers.some(({ answer }) => answer === 'records')) return null;
  const unanswered = answers.filter(({ answer }) => answer === undefined);
  if (unanswered.length > 0) {
    for (const { type } of unanswered) need(state, name, type);
    return null;
  }
  for (const { type, answer } of answers) {
    if (typeof answer === 'object') return { kind: 'failed', name, type, ...answer.failed, term };
  }
  state.voids.push(term);
  return state.voids.length > SPF_VOID_LOOKUP_LIMIT
    ? permerror(`evaluating it makes more than ${SPF_VOID_LOOKUP_LIMIT} void DNS lookups (names without records: ${state.voids.join(', ')})`)
    : null;
}

/** Evaluates the record at `target`, reached through `term` (an include: or redirect=). */
function followSpf(state: SpfWalkState, term: string, target: string): SpfWalk {
  // Macros expand per message (sender, client address), so no one record stands behind them.
  if (target.includes('%')) return { kind: 'broken', reason: `${term} uses a macro, which verification cannot follow`, permerror: false };
  const tooMany = countLookup(state, term);
  if (tooMany) return tooMany;
  if (state.open.includes(target)) return permerror(`${term} loops back to a record that includes it`);
  const answer = state.dns.spfAt(target);
  if (!answer) {
    need(state, target, 'TXT');
    return STOP;
  }
  if ('failed' in answer) return { kind: 'failed', name: target, type: 'TXT', ...answer.failed, term };
  const { spf } = answer;
  if (spf.length === 0) return permerror(`${term}: no SPF record at ${target}`);
  if (spf.length > 1) return permerror(`${term}: ${spf.length} SPF records at ${target}`);
  state.open.push(target);
  const walk = walkSpfRecord(state, spf[0]);
  state.open.pop();
  return walk.kind === 'pass' ? { kind: 'pass', via: [term, ...walk.via] } : walk;
}

/** The first syntax error among `terms`, as the permerror it makes, or null. */
function syntaxError(terms: readonly string[]): SpfWalk | null {
  for (const term of terms) {
    const problem = spfTermProblem(term);
    if (problem) return permerror(`syntax error: ${term.length > 100 ? `${term.slice(0, 100)}…` : term} ${problem}`);
  }
  const redirects = terms.filter((t) => t.startsWith('redirect=')).length;
  if (redirects > 1) return permerror(`${redirects} redirect= modifiers in one record`);
  const explanations = terms.filter((t) => t.startsWith('exp=')).length;
  if (explanations > 1) return permerror(`${explanations} exp= modifiers in one record`);
  return null;
}

/** RFC 7208 4.6 and 5: the terms in order, an include: evaluated where it stands, redirect= only at the end of a record without "all". */
function walkSpfRecord(state: SpfWalkState, text: string): SpfWalk {
  const terms = text.trim().split(/\s+/).slice(1).map((t) => t.toLowerCase());
  const broken = syntaxError(terms);
  if (broken) return broken;
  const redirects = terms.filter((t) => t.startsWith('redirect='));
  for (const term of terms) {
    if (/^[a-z][a-z0-9_.-]*=/.test(term)) continue; // a modifier: redirect= is applied at the end, the others change nothing here
    const qualifier = /^[+\-~?]/.test(term) ? term[0] : '';
    const bare = term.slice(qualifier.length);
    const mechanism = bare.split(/[:/]/)[0];
    if (mechanism === 'all') return isPassQualifier(qualifier) ? { kind: 'passAll' } : { kind: 'noMatch' };
    const name = bare.replace(/\.$/, '');
    // Prefix lengths widen a match to the networks around the addresses, which stay matched.
    const { equivalents } = state;
    const spec = mechanism === 'mx' ? name.replace(CIDR_LENGTHS, '').replace(/\.$/, '') : name;
    const equivalent = equivalents.anywhere.includes(spec) || (state.open.length === 1 && equivalents.atTop.includes(spec));
    if (name === state.required || equivalent) {
      const tooMany = countLookup(state, term);
      if (tooMany) return tooMany;
      if (!isPassQualifier(qualifier)) return { kind: 'noMatch' };
      return { kind: 'pass', via: equivalent ? [`${term} (${equivalents.because})`] : [] };
    }
    if (mechanism === 'include') {
      const included = followSpf(state, term, canonicalHost(bare.slice('include:'.length)));
      if (included.kind === 'noMatch') continue;
      if (included.kind === 'pass' || included.kind === 'passAll') return isPassQualifier(qualifier) ? included : { kind: 'noMatch' };
      return included;
    }
    if (SPF_LOOKUP_MECHANISMS.has(mechanism)) {
      const tooMany = countLookup(state, term);
      if (tooMany) return tooMany;
    }
    if (mechanism === 'a' || mechanism === 'mx' || mechanism === 'exists') {
      const stopped = countVoidLookup(state, term, mechanism, bare);
      if (stopped) return stopped;
    }
  }
  return redirects.length === 1 ? followSpf(state, redirects[0], canonicalHost(redirects[0].slice('redirect='.length))) : { kind: 'noMatch' };
}

/**
 * How the SPF record `text` published at `name` ends for the mechanism `required` (e.g.
 * `include:spf.relay.example`). A permerror stands whatever the questions still unanswered say
 * (they could only add void lookups); any other end waits for every question the walk met.
 */
export function walkSpf(name: string, text: string, required: string, dns: SpfDns, equivalents: SpfEquivalents | null = null): SpfWalk {
  const state: SpfWalkState = {
    required,
    equivalents: equivalents ?? { anywhere: [], atTop: [], because: '' },
    dns,
    lookups: 0,
    voids: [],
    needs: new Map(),
    open: [canonicalHost(name)],
  };
  const walk = walkSpfRecord(state, text);
  if (walk.kind === 'broken' || state.needs.size === 0) return walk;
  return { kind: 'needs', questions: [...state.needs.values()] };
}
