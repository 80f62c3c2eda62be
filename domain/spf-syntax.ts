// The syntax of one SPF term (RFC 7208 12's ABNF). A receiver that meets a syntax error anywhere
// in a record answers permerror without evaluating any of it (4.6), so a record with a typo
// (`ipv4:`), an address that is none (`ip4:192.0.2.300`) or a broken macro authorises nobody.
// Addresses are checked here rather than by node:net, which domain/ does not import. The
// record's owner writes the text: every check is linear in it.

const DIGITS = /^(?:0|[1-9][0-9]{0,2})$/;
const HEX_GROUP = /^[0-9a-f]{1,4}$/;
const MODIFIER = /^[a-z][a-z0-9_.-]*=/;
// Macro letters of a domain-spec; c, r and t only outside one (RFC 7208 7.2: in explanations).
const DOMAIN_MACRO_LETTERS = new Set(['s', 'l', 'o', 'd', 'i', 'p', 'h', 'v']);
const MACRO_LETTERS = new Set([...DOMAIN_MACRO_LETTERS, 'c', 'r', 't']);
const MACRO_DELIMITERS = new Set(['.', '-', '+', ',', '/', '_', '=']);

const isDigit = (c: string | undefined) => c !== undefined && c >= '0' && c <= '9';

/** A prefix length: digits without a leading zero, at most `max`. */
const prefixOk = (bits: string, max: number) => DIGITS.test(bits) && Number(bits) <= max;

/** dotted-quad of RFC 7208 12: four dec-octets, no leading zeros. */
function isIpv4(text: string): boolean {
  if (text.length > 15) return false;
  const parts = text.split('.');
  return parts.length === 4 && parts.every((part) => prefixOk(part, 255));
}

/** RFC 4291 2.2's text forms: eight groups, "::" once for a run of zeros, the last two as a dotted-quad. */
function isIpv6(text: string): boolean {
  if (text.length > 45) return false; // eight groups of four, or six and a dotted-quad
  const lastColon = text.lastIndexOf(':');
  if (lastColon < 0) return false;
  let groupsText = text;
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    if (!isIpv4(last)) return false;
    groupsText = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const halves = groupsText.split('::');
  if (halves.length > 2) return false;
  const groups = halves.flatMap((half) => (half === '' ? [] : half.split(':')));
  if (!groups.every((group) => HEX_GROUP.test(group))) return false;
  return halves.length === 2 ? groups.length <= 7 : groups.length === 8;
}

/** A macro-string's problem, and whether it ends with a macro-expand (a domain-end of its own). */
function scanMacroString(text: string, letters: ReadonlySet<string>): { problem: string | null; endsWithMacro: boolean } {
  let endsWithMacro = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    endsWithMacro = false;
    if (c < '!' || c > '~') return { problem: 'holds a character outside visible ASCII', endsWithMacro };
    if (c !== '%') continue;
    const next = text[i + 1];
    if (next === '%' || next === '_' || next === '-') {
      i++;
      endsWithMacro = true;
      continue;
    }
    if (next !== '{') return { problem: 'has a "%" that begins no macro', endsWithMacro };
    let j = i + 2;
    if (!letters.has(text[j])) return { problem: 'has a macro with an unknown letter', endsWithMacro };
    j++;
    while (isDigit(text[j])) j++;
    if (text[j] === 'r') j++;
    while (MACRO_DELIMITERS.has(text[j])) j++;
    if (text[j] !== '}') return { problem: 'has an unterminated macro', endsWithMacro };
    i = j;
    endsWithMacro = true;
  }
  return { problem: null, endsWithMacro };
}

/** toplabel: letters, digits and inner hyphens, not digits alone. */
function isTopLabel(label: string): boolean {
  if (label === '' || label.startsWith('-') || label.endsWith('-')) return false;
  let letterOrHyphen = false;
  for (const c of label) {
    if ((c >= 'a' && c <= 'z') || c === '-') letterOrHyphen = true;
    else if (!isDigit(c)) return false;
  }
  return letterOrHyphen;
}

/** domain-spec: a macro-string ending in a macro or in "." toplabel ["."]. */
function domainSpecProblem(spec: string): string | null {
  if (spec === '') return 'names no domain';
  const { problem, endsWithMacro } = scanMacroString(spec, DOMAIN_MACRO_LETTERS);
  if (problem) return problem;
  if (endsWithMacro) return null;
  const name = spec.endsWith('.') ? spec.slice(0, -1) : spec;
  const dot = name.lastIndexOf('.');
  return dot >= 0 && isTopLabel(name.slice(dot + 1)) ? null : 'names no valid domain';
}

/** `text` without a trailing "/<digits>", or null when it has none. */
function cutPrefix(text: string): { head: string; bits: string } | null {
  let i = text.length;
  while (i > 0 && isDigit(text[i - 1])) i--;
  if (i === text.length || i === 0 || text[i - 1] !== '/') return null;
  return { head: text.slice(0, i - 1), bits: text.slice(i) };
}

/** a and mx: [":" domain-spec] [ip4-cidr-length] ["//" ip6-cidr-length]. */
function hostMechanismProblem(rest: string): string | null {
  let head = rest;
  let cut = cutPrefix(head);
  if (cut && cut.head.endsWith('/')) {
    if (!prefixOk(cut.bits, 128)) return 'has an invalid IPv6 prefix length';
    head = cut.head.slice(0, -1);
    cut = cutPrefix(head);
  }
  if (cut) {
    if (!prefixOk(cut.bits, 32)) return 'has an invalid IPv4 prefix length';
    head = cut.head;
  }
  if (head === '') return null;
  return head.startsWith(':') ? domainSpecProblem(head.slice(1)) : 'is malformed';
}

/** ip4 and ip6: ":" address ["/" prefix length]. */
function networkProblem(rest: string, family: 4 | 6): string | null {
  if (!rest.startsWith(':')) return 'names no network';
  const value = rest.slice(1);
  const slash = value.indexOf('/');
  const address = slash < 0 ? value : value.slice(0, slash);
  if (!(family === 4 ? isIpv4(address) : isIpv6(address))) return `does not name an IPv${family} address`;
  return slash < 0 || prefixOk(value.slice(slash + 1), family === 4 ? 32 : 128) ? null : `has an invalid IPv${family} prefix length`;
}

/**
 * Why `term` (a term of an SPF record after "v=spf1", lower-cased) is no directive or modifier
 * of RFC 7208, or null when it is one.
 */
export function spfTermProblem(term: string): string | null {
  if (MODIFIER.test(term)) {
    const eq = term.indexOf('=');
    const name = term.slice(0, eq);
    const value = term.slice(eq + 1);
    if (name === 'redirect' || name === 'exp') return domainSpecProblem(value);
    return scanMacroString(value, MACRO_LETTERS).problem;
  }
  const bare = /^[+\-~?]/.test(term) ? term.slice(1) : term;
  const name = bare.split(/[:/]/, 1)[0];
  const rest = bare.slice(name.length);
  switch (name) {
    case 'all':
      return rest === '' ? null : 'is malformed';
    case 'include':
    case 'exists':
      return rest.startsWith(':') ? domainSpecProblem(rest.slice(1)) : 'names no domain';
    case 'a':
    case 'mx':
      return hostMechanismProblem(rest);
    case 'ptr':
      if (rest === '') return null;
      return rest.startsWith(':') ? domainSpecProblem(rest.slice(1)) : 'is malformed';
    case 'ip4':
      return networkProblem(rest, 4);
    case 'ip6':
      return networkProblem(rest, 6);
    default:
      return 'is no SPF mechanism or modifier';
  }
}
