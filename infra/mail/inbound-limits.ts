// The feedback SMTP server's limits (apps/inbound/inbound-server.ts), chosen as a Postfix
// operator would (docs/inbound.md gives each one's Postfix counterpart and the reply it causes).
// Only the per-client cap is configuration (RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT): behind a
// proxy or a NAT that hides the clients' addresses, every connection comes from one address.
const MiB = 1024 * 1024;

export interface InboundLimits {
  /** Open connections in all (smtp-server's maxClients); more are answered 421 at once. */
  maxConnections: number;
  /** Open connections per client network (an IPv4 address, an IPv6 /64); more are answered 421 4.7.0. */
  maxConnectionsPerClient: number;
  /** A session waiting this long for the client's next command or byte is closed (421). */
  idleMs: number;
  /** No session lasts longer, whatever it does (421 4.4.2). */
  sessionMs: number;
  /** A DATA transfer must end this long after it began (421 4.4.2). */
  dataMs: number;
  /**
   * What the reports being received or waiting for a parser may hold in all (their kept parts,
   * infra/mail/report-trim.ts); a report that would go past it is answered 452 4.3.1.
   */
  dataBytesInFlight: number;
  /** DATA bytes read per second, all sessions together; senders beyond it are read later (TCP flow control). */
  dataBytesPerSecond: number;
  /** Reports parsed at once, on threads of their own. */
  parseThreads: number;
  /** Wall time one report may take to parse once started (554 5.3.4 past it). */
  parseBudgetMs: number;
  /** Reports waiting for a parser thread; one more is answered 451 4.3.2. */
  parseWaiting: number;
}

export const INBOUND_LIMITS: InboundLimits = {
  maxConnections: 200,
  maxConnectionsPerClient: 20,
  idleMs: 60_000,
  sessionMs: 10 * 60_000,
  dataMs: 3 * 60_000,
  dataBytesInFlight: 32 * MiB,
  dataBytesPerSecond: 2 * MiB,
  parseThreads: 2,
  parseBudgetMs: 5_000,
  parseWaiting: 64,
};
