// Whether a certificate names a host, as MTA-STS asks: the policy host's certificate valid for
// `mta-sts.<domain>` (RFC 8461 3.3), an MX host's with "a subject alternative name (SAN) with a
// DNS-ID matching the host name" (4.2), by RFC 6125's rules: the host is matched against the
// certificate's DNS-IDs (subjectAltName dNSName entries) and nothing else. Under DANE-TA the
// leaf's names are matched the same way, but its Common Name counts when it has no DNS-ID
// (RFC 7672 3.2.3).
//
// Node's tls.checkServerIdentity is more lenient than that (checked against Node 24): a
// certificate without any dNSName (no subjectAltName, or IP addresses only) is matched through
// its subject's Common Name, and a wildcard may be part of the leftmost label (`m*.example.com`
// names `mx.example.com`). RFC 9525, which replaces RFC 6125, and the CA/Browser Forum allow a
// wildcard only as the whole leftmost label, standing for one label. OpenSSL's X509_check_host
// (X509Certificate.checkHost) does exactly that with the options below: the matching is
// OpenSSL's, not written again here. The chain (a trusted CA, dates) is the TLS stack's to
// check, before this: only the name is decided here.
import { X509Certificate } from 'node:crypto';
import net from 'node:net';
import { domainToASCII } from 'node:url';

/** What this module reads of a certificate: Node's PeerCertificate has both. */
export interface PresentedCertificate {
  /** The certificate, DER. */
  raw: Buffer;
  /** As Node writes it (`DNS:a.example, IP Address:192.0.2.1`): for messages only. */
  subjectaltname?: string;
}

const DNS_ID_ONLY = { subject: 'never', wildcards: true, partialWildcards: false, multiLabelWildcards: false, singleLabelSubdomains: false } as const;

/** The reference identity for `host`: its ASCII form (IDNA) without a final dot, or null for an IP address or a name with no ASCII form. */
function referenceOf(host: string): string | null {
  if (net.isIP(host)) return null;
  const ascii = domainToASCII(host.endsWith('.') ? host.slice(0, -1) : host);
  return ascii === '' ? null : ascii;
}

/**
 * Whether the parsed certificate names `host` by a DNS-ID; by its Common Name too when it has no
 * DNS-ID and `commonName` is 'when no DNS-ID' (DANE-TA: RFC 7672 3.2.3 considers the CN "only
 * ... when no DNS-IDs are present"; MTA-STS never does).
 */
export function x509NamesHost(cert: X509Certificate, host: string, commonName: 'never' | 'when no DNS-ID' = 'never'): boolean {
  const reference = referenceOf(host);
  const options = commonName === 'never' ? DNS_ID_ONLY : { ...DNS_ID_ONLY, subject: 'default' as const };
  return reference !== null && cert.checkHost(reference, options) !== undefined;
}

/** Whether the certificate names `host` by a DNS-ID (never by its Common Name). */
export function certificateNamesHost(cert: PresentedCertificate, host: string): boolean {
  let parsed: X509Certificate;
  try {
    parsed = new X509Certificate(cert.raw);
  } catch {
    // A certificate OpenSSL cannot read names nothing.
    return false;
  }
  return x509NamesHost(parsed, host);
}

/**
 * The same check in the shape of tls.checkServerIdentity (undefined: the certificate names the
 * host), for an HTTPS request: its error has Node's code for a name mismatch.
 */
export function dnsIdIdentityError(host: string, cert: PresentedCertificate): Error | undefined {
  if (certificateNamesHost(cert, host)) return undefined;
  const names = cert.subjectaltname ? `its subjectAltName is ${cert.subjectaltname}` : 'it has no subjectAltName (its Common Name does not count)';
  return Object.assign(new Error(`certificate does not name ${host}: ${names}`), { code: 'ERR_TLS_CERT_ALTNAME_INVALID', host });
}
