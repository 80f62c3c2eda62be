// The organizational domain of a domain name (RFC 7489 3.2): its registrable domain by the
// public suffix list, as tldts (the list mailauth's DMARC evaluation uses, with the same
// options: ICANN and private suffixes) holds it. A name the list knows no suffix of takes its
// last label as one (the list's default rule). domain/ judges DMARC with it; the list is data
// shipped with the package, so no I/O.
import { getDomain } from 'tldts';

export function organizationalDomain(domain: string): string | null {
  return getDomain(domain, { allowIcannDomains: true, allowPrivateDomains: true });
}
