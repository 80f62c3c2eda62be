// The HTTP egress port: a webhook POST to a checked, pinned public address, and the same
// destination check without connecting (endpoint creation). infra/http/webhook-egress.ts is the
// implementation (resolve once, global addresses only, pinned connection, no redirects).

export type WebhookErrorCode =
  | 'timeout'
  | 'connection_refused'
  | 'connection_reset'
  | 'tls_error'
  | 'dns_failure'
  | 'unsafe_destination'
  | 'redirect'
  | 'http_error'
  | 'network_error';

export interface AttemptResult {
  /** The final response's status; null when no response arrived. */
  httpStatus: number | null;
  /** Null only for a 2xx. */
  errorCode: WebhookErrorCode | null;
  durationMs: number;
  /** The response body as read (at most maxResponseBytes), UTF-8 decoded; null when empty or none. */
  responseSnippet: string | null;
}

export interface WebhookPost {
  url: string | URL;
  body: Buffer;
  headers: Record<string, string>;
  dnsServers: string[];
  allow: ReadonlySet<string>;
  /** Trusted roots replacing the system's; for tests. */
  ca?: string | Buffer | Array<string | Buffer>;
  /** TCP connect plus TLS handshake. Default 5000. */
  connectTimeoutMs?: number;
  /** The whole attempt, DNS included. Default 15000. */
  totalTimeoutMs?: number;
  /** Default 64 KiB. */
  maxResponseBytes?: number;
}

export type DestinationCheck = { ok: true } | { ok: false; errorCode: 'unsafe_destination' | 'dns_failure'; message: string };

export interface HttpEgress {
  /** One attempt: an outcome for every case, never a throw. */
  post(post: WebhookPost): Promise<AttemptResult>;
  /** Whether `host` is a destination a post would be made to (`allow`: RELAY_WEBHOOK_ALLOW; `port` 443 unless given). */
  checkDestination(host: string, options: { dnsServers: string[]; allow: ReadonlySet<string>; port?: number }): Promise<DestinationCheck>;
}
