// The long-lived collaborators of a process (caches in front of the shared stores, network
// adapters, Relay's secret), made once by apps/runtime.ts and handed to the API and the
// processors.
import type { DnsLookup } from '../../infra/dns/verify-domain.ts';
import type { Compose } from '../../infra/mail/compose-pool.ts';
import type { MailTransport } from '../../infra/ports/mail-transport.ts';
import type { SecretBox } from '../../infra/secrets/secret-box.ts';
import type { RateLimiter } from './rate-limits.ts';
import type { SendRateGate } from './send-rate.ts';
import type { UsageLedger } from './usage-ledger.ts';

export interface Services {
  rateLimits: RateLimiter;
  usage: UsageLedger;
  /** DNS for domain verification, through RELAY_DNS_SERVERS. */
  dns: DnsLookup;
  /** Seals secrets at rest (DKIM keys) and MACs return paths, with RELAY_SECRET_KEY. */
  secrets: SecretBox;
  /** The transport RELAY_DELIVERY names, opened on first use (only senders use it). */
  transport(): MailTransport;
  /** RELAY_SEND_RATE across every sender instance. */
  sendRate: SendRateGate;
  /** infra/mail/compose.ts composeMessage, on RELAY_COMPOSE_THREADS worker threads (started on first use). */
  compose: Compose;
  /** Starts the compose threads now (the sender does, before it claims anything). */
  warmCompose(): Promise<void>;
  /** Where the outbox transport writes (also read by `relay outbox` and the outbox endpoints). */
  outboxDir: string;
  close(): Promise<void>;
}
