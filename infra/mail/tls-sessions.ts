// What the MX transport learns about each TLS session it opens, for TLS reporting (RFC 8460):
// which policy applied to the recipient domain and how the session measured up to it, in the
// RFC's own result types (4.3.2). The transport only tells a sink; counting and reporting
// happen elsewhere (apps/services/tls-reports/).
import type { PeerCertificate, TLSSocket } from 'node:tls';
import { certificateNamesHost } from './certificate-dns-ids.ts';

export type TlsFailureType =
  | 'starttls-not-supported'
  | 'certificate-host-mismatch'
  | 'certificate-expired'
  | 'certificate-not-trusted'
  | 'validation-failure'
  | 'tlsa-invalid'
  | 'dnssec-invalid'
  | 'dane-required'
  | 'sts-policy-fetch-error'
  | 'sts-policy-invalid'
  | 'sts-webpki-invalid';

export interface TlsPolicyApplied {
  type: 'sts' | 'tlsa' | 'no-policy-found';
  /** The recipient domain (sts), or the MX host the TLSA records belong to (tlsa). */
  domain: string;
  /** sts: the policy file's lines; tlsa: each record in presentation form. */
  strings: string[];
  /** sts: the policy's mx patterns. */
  mxHosts: string[];
}

export interface TlsSessionResult {
  /** The recipient domain the mail was for: reports go to its `_smtp._tls` rua. */
  recipientDomain: string;
  policy: TlsPolicyApplied;
  result: 'success' | TlsFailureType;
  /** The MX host and address connected to, when there was a connection. */
  mxHost?: string;
  receivingIp?: string;
  /** This end's address of the session, as the socket saw it. */
  sendingIp?: string;
  /** A short reason for failures (the library's or server's words, never message content). */
  detail?: string;
  at: Date;
}

export interface TlsSessionSink {
  record(session: TlsSessionResult): void;
}

/** What a session set up with opportunistic STARTTLS turned out to be. */
export interface TlsVerdict {
  encrypted: boolean;
  /** The problem a policy requiring authenticated TLS would have with it; null: none. */
  problem: TlsFailureType | null;
  detail: string;
  /** The peer's certificates, leaf first, DER (for DANE). */
  chain: Buffer[];
}

function chainOf(socket: TLSSocket): Buffer[] {
  const chain: Buffer[] = [];
  let cert: PeerCertificate | undefined = socket.getPeerCertificate(true);
  while (cert && cert.raw && chain.length < 10) {
    chain.push(cert.raw);
    const next: PeerCertificate | undefined = (cert as PeerCertificate & { issuerCertificate?: PeerCertificate }).issuerCertificate;
    if (!next || next === cert || !next.raw || next.raw.equals(cert.raw)) break;
    cert = next;
  }
  return chain;
}

/**
 * Judges a session against WebPKI rules for MX host `host`: a certificate chain to a trusted
 * CA (the system's, or those the transport was given), valid now, naming the host by a DNS-ID
 * (./certificate-dns-ids.ts; Node's own name check, whose verdict the socket also carries, is
 * more lenient and is not used).
 */
export function judgeTls(socket: TLSSocket | null, host: string): TlsVerdict {
  if (!socket || !socket.encrypted) return { encrypted: false, problem: 'starttls-not-supported', detail: 'the session is not encrypted (no STARTTLS, or it failed)', chain: [] };
  const chain = chainOf(socket);
  const error = socket.authorizationError as unknown as string | Error | null;
  const code = typeof error === 'string' ? error : (error as (Error & { code?: string }) | null)?.code ?? (error ? String(error) : null);
  if (code === 'CERT_HAS_EXPIRED') return { encrypted: true, problem: 'certificate-expired', detail: 'certificate has expired', chain };
  if (code && code !== 'ERR_TLS_CERT_ALTNAME_INVALID') return { encrypted: true, problem: 'certificate-not-trusted', detail: `certificate not trusted (${code})`, chain };
  if (!certificateNamesHost(socket.getPeerCertificate(), host)) return { encrypted: true, problem: 'certificate-host-mismatch', detail: `certificate does not name ${host}`, chain };
  return { encrypted: true, problem: null, detail: 'verified', chain };
}
