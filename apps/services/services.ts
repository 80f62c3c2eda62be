// The long-lived collaborators of a process (caches in front of the shared stores, network
// adapters, Relay's secret), made once by apps/runtime.ts and handed to the API and the
// processors.
import type { DeliveryPolicy } from '../../domain/email/delivery.ts';
import type { WebhookPolicy } from '../../domain/webhooks/delivery.ts';
import type { Liveness } from '../../infra/liveness.ts';
import type { DnsLookup } from '../../infra/ports/dns.ts';
import type { HttpEgress } from '../../infra/ports/http-egress.ts';
import type { DnsCache } from '../../infra/dns/dns-cache.ts';
import type { Compose } from '../../infra/mail/compose-pool.ts';
import type { MailTransport } from '../../infra/ports/mail-transport.ts';
import type { TemplateThreads } from '../../infra/rendering/template-threads.ts';
import type { SecretBox } from '../../infra/secrets/secret-box.ts';
import type { Emails } from './email-stream.ts';
import type { RateLimiter } from './rate-limits.ts';
import type { SendRateGate } from './send-rate.ts';
import type { TlsSessionCounter } from './tls-reports/session-counts.ts';
import type { SiteRegistry } from './delivery/sites.ts';
import type { UsageLedger } from './usage-ledger.ts';

/** The times of delivery and of webhooks, as this process runs them (tests scale them: apps/runtime.ts). */
export interface Policies {
  delivery: DeliveryPolicy;
  webhooks: WebhookPolicy;
}

export interface Services {
  policies: Policies;
  /** The email streams, deciding with `policies`: `emails.handle(emailId, command, options)`. */
  emails: Emails;
  rateLimits: RateLimiter;
  usage: UsageLedger;
  /** DNS for domain verification, through RELAY_DNS_SERVERS. */
  dns: DnsLookup;
  /** Webhook POSTs (infra/http/webhook-egress.ts). */
  egress: HttpEgress;
  /** Seals secrets at rest (DKIM keys) and MACs return paths, with RELAY_SECRET_KEY. */
  secrets: SecretBox;
  /**
   * RELAY_SECRET_KEY is set and `<dataDir>/secret.key` holds another key: that key, kept as a
   * previous one so what it sealed still opens (ids only, for the start's warning); else null.
   */
  fileKeyKept: { path: string; keyId: string; currentKeyId: string } | null;
  /** The transport RELAY_DELIVERY names, opened on first use (only senders use it). */
  transport(): MailTransport;
  /** With RELAY_DELIVERY=mx: the MX transport's DNS cache and its TLS session counts (opens the transport); else null. */
  mxDelivery(): { dns: DnsCache; tlsSessions: TlsSessionCounter } | null;
  /** Sites of recipient domains, their limits and adaptive state (opens the transport: with `mx`, sites come from MX sets). */
  sites(): SiteRegistry;
  /** RELAY_SEND_RATE across every sender instance. */
  sendRate: SendRateGate;
  /** infra/mail/compose.ts composeMessage, on RELAY_COMPOSE_THREADS worker threads (started on first use). */
  compose: Compose;
  /** Starts the compose threads now (the sender does, before it claims anything). */
  warmCompose(): Promise<void>;
  /** Template compiling and rendering, on threads of their own with a time limit (infra/rendering/template-threads.ts). */
  templates: TemplateThreads;
  /** Where the outbox transport writes (also read by `relay outbox` and the outbox endpoints). */
  outboxDir: string;
  /**
   * The liveness of the process's worker threads, by part: `compose` (RELAY_COMPOSE_THREADS
   * above 0) and `outbox` (the outbox transport's thread, once the transport is open).
   */
  threads(): ReadonlyMap<string, Liveness>;
  close(): Promise<void>;
}
