// Host names as DNS compares them, the label rules Relay holds every name to (sending domains,
// their records' prefixes, the domains of addresses), and the ASCII form of an internationalised
// name. node:url only for IDNA, which is computation, not I/O.
import { domainToASCII, domainToUnicode } from 'node:url';

/** A DNS name as names are compared: lower case, without the root's trailing dot. */
export function canonicalHost(name: string): string {
  return name.trim().toLowerCase().replace(/\.$/, '');
}

const LDH_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export type LabelProblem = { kind: 'empty' | 'length' | 'characters' | 'punycode'; message: string };

/** Why `label` (lower case, ASCII form) cannot be a label of a host name, or null. */
export function labelProblem(label: string): LabelProblem | null {
  if (label.length === 0) return { kind: 'empty', message: 'empty label (two dots in a row, or a leading dot)' };
  if (label.length > 63) return { kind: 'length', message: `label "${label.slice(0, 20)}…" is longer than 63 characters` };
  if (!LDH_LABEL.test(label)) return { kind: 'characters', message: `label "${label}" may only hold letters, digits and inner hyphens` };
  // A bogus A-label cannot be any real internationalised name; domainToUnicode hands back
  // the input unchanged when the punycode does not decode to a valid U-label.
  if (label.startsWith('xn--') && domainToUnicode(label) === label) return { kind: 'punycode', message: `label "${label}" is not valid punycode` };
  return null;
}

/**
 * The ASCII form of a domain name written with non-ASCII characters: its U-labels as A-labels
 * (IDNA as the WHATWG URL rules apply it, lower case), or null when it has none. The labels
 * of the result still need labelProblem's check (an A-label may be longer than 63).
 */
export function asciiDomainName(name: string): string | null {
  // domainToASCII reads its input as a URL's host: "/", "?", "#" and "\" would end the name
  // there (`bücher.example/x` would be `xn--bcher-kva.example`), "%" would be decoded and a tab
  // dropped, so the only ASCII characters let through are those a host name may hold.
  if (/[\x00-\x7f]/.test(name.replace(/[A-Za-z0-9.-]/g, ''))) return null;
  const ascii = domainToASCII(name);
  return ascii === '' ? null : ascii;
}
