// DANE for SMTP (RFC 7672): does a session's certificate chain match the MX host's TLSA
// records? Only DANE-TA(2) and DANE-EE(3) are usable for SMTP (3.1.3); selectors full
// certificate (0) and SubjectPublicKeyInfo (1); matching types exact (0), SHA2-256 (1) and
// SHA2-512 (2).
// - DANE-EE: the leaf matches; its names and dates do not matter (3.1.1).
// - DANE-TA: a certificate the server sent matches, the leaf chains up to it (each one signed by
//   the next), the leaf is valid now and names the MX host (3.1.2, 3.2.2).
import { createHash, X509Certificate } from 'node:crypto';
import type { TlsaData } from 'dns-packet';
import { x509NamesHost } from './certificate-dns-ids.ts';

export function usableTlsa(records: TlsaData[]): TlsaData[] {
  return records.filter((r) => (r.usage === 2 || r.usage === 3) && (r.selector === 0 || r.selector === 1) && r.matchingType >= 0 && r.matchingType <= 2);
}

/** A record as the presentation form TLS-RPT's policy-string wants: "3 1 1 ab12…". */
export function tlsaText(record: TlsaData): string {
  return `${record.usage} ${record.selector} ${record.matchingType} ${record.certificate.toString('hex')}`;
}

function matches(cert: X509Certificate, record: TlsaData): boolean {
  const selected = record.selector === 0 ? cert.raw : cert.publicKey.export({ type: 'spki', format: 'der' });
  const data = record.matchingType === 0 ? selected : createHash(record.matchingType === 1 ? 'sha256' : 'sha512').update(selected).digest();
  return data.equals(record.certificate);
}

/** Null when the chain (leaf first, DER) satisfies one of `records` for `host`, else why not. */
export function daneMismatch(chain: Buffer[], records: TlsaData[], host: string, now = new Date()): string | null {
  let certs: X509Certificate[];
  try {
    certs = chain.map((der) => new X509Certificate(der));
  } catch (error) {
    return `the server's certificate could not be read (${(error as Error).message})`;
  }
  if (certs.length === 0) return 'the server sent no certificate';
  const [leaf] = certs;
  if (records.some((r) => r.usage === 3 && matches(leaf, r))) return null;
  for (const record of records.filter((r) => r.usage === 2)) {
    const anchor = certs.findIndex((cert) => matches(cert, record));
    if (anchor < 0) continue;
    let linked = true;
    for (let i = 0; i < anchor && linked; i++) linked = certs[i].checkIssued(certs[i + 1]) && certs[i].verify(certs[i + 1].publicKey);
    if (!linked) return 'the certificate chain does not lead to the TLSA trust anchor';
    if (Date.parse(leaf.validFrom) > now.getTime() || Date.parse(leaf.validTo) < now.getTime()) return 'the certificate is not valid now';
    // RFC 7672 3.2.3: the MX host by a DNS-ID (by the CN only when there is none), a wildcard
    // only as the whole leftmost label.
    if (!x509NamesHost(leaf, host, 'when no DNS-ID')) return `the certificate does not name ${host}`;
    return null;
  }
  return 'no TLSA record matches the server\'s certificate';
}
