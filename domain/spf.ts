// SPF as a receiver evaluates it (RFC 7208), for one question: does the record published at a
// name authorise one of Relay's mechanisms (`include:<spfInclude>`, `a:<mxHost>`)? The terms are
// read in order, include: evaluated where it stands and redirect= at the end of a record without
// "all", within the lookup limit; every other term is taken not to match Relay's addresses,
// which Relay cannot know. Each record the walk opens is checked for syntax errors first, as a
// receiver does (RFC 7208 4.6: one anywhere is a permerror). No I/O: the caller says what DNS
// answered at each name (SpfAt), and a walk that needs another name says so.
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
 * What DNS said at a name: the SPF records among its TXT records (none when the name or its TXT
 * records do not exist), a lookup that failed, or undefined when it was not looked up (yet).
 */
export type SpfAt = (name: string) => { spf: string[] } | { failed: { code: string; message: string } } | undefined;

/**
 * How the evaluation of one record ends for Relay's addresses, taking every term other than
 * Relay's mechanism not to match them (Relay cannot know what they match). pass: Relay's
 * mechanism reached with a pass qualifier (`via`: the include: and redirect= terms followed to
 * it); passAll: a pass "all" came first; noMatch: the record ends otherwise (a non-pass "all"
 * or qualifier on Relay's mechanism, or its end), so an include: of it does not match;
 * broken: receivers return permerror (`permerror`), or verification cannot follow the record;
 * failed: a lookup failed; needs: the TXT records at `name` are needed to go on.
 */
export type SpfWalk =
  | { kind: 'pass'; via: string[] }
  | { kind: 'passAll' }
  | { kind: 'noMatch' }
  | { kind: 'broken'; reason: string; permerror: boolean }
  | { kind: 'failed'; name: string; code: string; message: string; term: string }
  | { kind: 'needs'; name: string };

interface SpfWalkState {
  required: string;
  spfAt: SpfAt;
  lookups: number;
  /** The records being evaluated, outermost first: one of them included again is a loop. */
  open: string[];
}

const isPassQualifier = (qualifier: string) => qualifier === '' || qualifier === '+';

const permerror = (reason: string): SpfWalk => ({ kind: 'broken', reason, permerror: true });

/** One more DNS-querying term evaluated; the permerror when that is one too many. */
function countLookup(state: SpfWalkState, term: string): SpfWalk | null {
  state.lookups++;
  return state.lookups > SPF_LOOKUP_LIMIT
    ? permerror(`evaluating it takes more than ${SPF_LOOKUP_LIMIT} DNS lookups (include, a, mx, ptr, exists, redirect=) by ${term}`)
    : null;
}

/** Evaluates the record at `target`, reached through `term` (an include: or redirect=). */
function followSpf(state: SpfWalkState, term: string, target: string): SpfWalk {
  // Macros expand per message (sender, client address), so no one record stands behind them.
  if (target.includes('%')) return { kind: 'broken', reason: `${term} uses a macro, which verification cannot follow`, permerror: false };
  const tooMany = countLookup(state, term);
  if (tooMany) return tooMany;
  if (state.open.includes(target)) return permerror(`${term} loops back to a record that includes it`);
  const answer = state.spfAt(target);
  if (!answer) return { kind: 'needs', name: target };
  if ('failed' in answer) return { kind: 'failed', name: target, ...answer.failed, term };
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
    if (bare.replace(/\.$/, '') === state.required) {
      const tooMany = countLookup(state, term);
      if (tooMany) return tooMany;
      return isPassQualifier(qualifier) ? { kind: 'pass', via: [] } : { kind: 'noMatch' };
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
  }
  return redirects.length === 1 ? followSpf(state, redirects[0], canonicalHost(redirects[0].slice('redirect='.length))) : { kind: 'noMatch' };
}

/** How the SPF record `text` published at `name` ends for the mechanism `required` (e.g. `include:spf.relay.example`). */
export function walkSpf(name: string, text: string, required: string, spfAt: SpfAt): SpfWalk {
  return walkSpfRecord({ required, spfAt, lookups: 0, open: [canonicalHost(name)] }, text);
}
