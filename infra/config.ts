// Configuration comes only from environment variables. Each is parsed once at start;
// a bad value stops the process with a message that names the variable.
import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import { hostname, networkInterfaces } from 'node:os';
import { resolve } from 'node:path';
import { readFileSync } from 'node:fs';
import { parseShapingFile, ShapingFileError, type ShapingRule } from '../domain/delivery/sites.ts';
import { labelProblem } from '../domain/dns-names.ts';
import { DEFAULT_RECHECK_POLICY, type RecheckPolicy } from '../domain/domain-recheck.ts';
import { parseAddress } from '../domain/mailbox.ts';
import { INBOUND_LIMITS } from './mail/inbound-limits.ts';
import { defaultInstanceName, INSTANCE_NAME, INSTANCE_NAME_RULE } from './kafka/instance-name.ts';
import { isLoopbackHost, parseSmtpUrl } from './mail/smtp-transport.ts';
import { PERCENT_ENCODE_USERINFO, userinfoCutShort } from './url-refusals.ts';

export type RelayEnv = 'development' | 'production';

export interface RelayConfig {
  env: RelayEnv;
  host: string;
  port: number;
  dataDir: string;
  /** DNS resolvers for domain verification, "host" or "host:port"; empty = the system's. */
  dnsServers: string[];
  /** The dashboard's origin; browser writes from any other Origin are refused. */
  dashboardOrigin: string;
  logLevel: string;
  /** RELAY_LOG_FORMAT: human-readable lines (pretty) or one JSON object per line; by default pretty only on a terminal. */
  logFormat: LogFormat;
  /** Distributed adapters; unset means the embedded (sqlite) one. */
  eventStoreUrl: string | null;
  kafkaBrokers: string[] | null;
  mongodbUrl: string | null;
  /** Host name published in MAIL FROM MX records and used as the SMTP HELO name. */
  mailHost: string;
  /** Prefix of log topics and consumer group names, so several installations can share one Kafka cluster. */
  logNamespace: string;
  /**
   * This instance's name, the same across its restarts (RELAY_INSTANCE_ID, else the host name):
   * part of its Kafka client id, by which a restarted instance recognises the group member its
   * crashed predecessor left behind (infra/kafka/log.ts, waitForEarlierSelf).
   */
  instanceId: string;
  /** How long a Kafka consumer group member that stopped heartbeating keeps its partitions (RELAY_KAFKA_SESSION_TIMEOUT_MS). */
  kafkaSessionTimeoutMs: number;
  /** How the sender puts mail on the wire (RELAY_DELIVERY). */
  delivery: DeliveryTransport;
  /** Smarthost for the smtp transport (RELAY_SMTP_URL). */
  smtpUrl: string | null;
  /** Tests only: every MX connection goes to this port (RELAY_MX_PORT). */
  mxPort: number | null;
  /** Tests only: MX addresses exempt from the public-address check, e.g. a loopback test server (RELAY_MX_ALLOW). */
  mxAllow: Set<string>;
  /**
   * A validating resolver the operator trusts (RELAY_DNSSEC_RESOLVER): `mx` delivery asks it
   * everything, with the DO bit, and uses DANE (RFC 7672) on answers it marks secure. Null:
   * RELAY_DNS_SERVERS (or the system's) and no DANE.
   */
  dnssecResolvers: string[] | null;
  /** Per-site limits by MX host pattern (RELAY_SHAPING_FILE, read and checked at start); empty: the defaults. */
  shaping: ShapingRule[];
  /** MTA-STS (RFC 8461) for `mx` delivery (RELAY_MTA_STS, default on). */
  mtaSts: boolean;
  /** Tests only: the port MTA-STS policy hosts are asked on (RELAY_MTA_STS_PORT); null = 443. */
  mtaStsPort: number | null;
  /** Sender of TLS reports by mail (RELAY_TLSRPT_FROM): an address at a verified sending domain; null = mailto reports off. */
  tlsRptFrom: string | null;
  /** Tests only: factor on delivery retry delays and the claim grace (RELAY_DELIVERY_RETRY_SCALE). */
  deliveryRetryScale: number;
  /** Messages per second, all sender instances together (RELAY_SEND_RATE); null = unlimited. */
  sendRate: number | null;
  /** The most one template compilation, preview or send rendering may take (RELAY_TEMPLATE_TIME_LIMIT_MS). */
  templateTimeLimitMs: number;
  /** Worker threads that compose and DKIM-sign outgoing messages (RELAY_COMPOSE_THREADS); 0 = on the event loop. */
  composeThreads: number;
  /** RELAY_PIPELINE_THREAD (default on): whether `relay start` runs the forwarder, processors and retention on a thread of their own. */
  pipelineThread: boolean;
  /**
   * Admission flow control (apps/services/admission-flow.ts): while the slowest watched consumer
   * group is more than `maxBacklog` records behind (RELAY_ADMISSION_BACKLOG, 0 = off), a send waits
   * for it, at most `maxWaitMs` (RELAY_ADMISSION_MAX_WAIT_MS). `groups` (RELAY_ADMISSION_BACKLOG_GROUPS,
   * processor names): null = the projector and the sender where this process runs them.
   */
  admissionFlow: { maxBacklog: number; maxWaitMs: number; groups: string[] | null };
  /** How long a stop on SIGTERM/SIGINT may take before the process exits 1 saying what it still waited for (RELAY_SHUTDOWN_TIMEOUT_MS). */
  shutdownTimeoutMs: number;
  /**
   * The retention part's re-check of DNS-verified sending domains: each at most once per
   * `intervalMs` (RELAY_DOMAIN_RECHECK_INTERVAL_MS), failed once its records were wrong at every
   * re-check for `graceMs` (RELAY_DOMAIN_RECHECK_GRACE_MS).
   */
  domainRecheck: RecheckPolicy;
  /** Relay's own secret (RELAY_SECRET_KEY); null = a key file in the data dir. */
  secretKey: string | null;
  /** Keys that still open values sealed before a rotation (RELAY_SECRET_KEY_PREVIOUS). */
  previousSecretKeys: string[];
  /**
   * The feedback SMTP server (bounces and complaints): where it listens, its STARTTLS
   * certificate, and how many connections one client address may hold (docs/inbound.md).
   */
  inbound: { host: string; port: number; tlsCertFile: string | null; tlsKeyFile: string | null; maxConnectionsPerClient: number };
  /** Development only: `host:port` webhook destinations exempt from every destination rule and resolved by the system too (RELAY_WEBHOOK_ALLOW). */
  webhookAllow: Set<string>;
  /** Tests only: factor on the webhook retry delays (RELAY_WEBHOOK_RETRY_SCALE). */
  webhookRetryScale: number;
  /** /metrics: on PORT (port null), on a listener of its own (RELAY_METRICS_PORT, RELAY_METRICS_HOST), or off. */
  metrics: { enabled: boolean; host: string; port: number | null };
  /** Reverse proxies whose X-Forwarded-For names the client (RELAY_TRUST_PROXY): addresses or CIDR ranges; empty trusts none. */
  trustProxy: string[];
}

export type DeliveryTransport = 'outbox' | 'smtp' | 'mx';
export type LogFormat = 'json' | 'pretty';

export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

/**
 * A listener a variable configures could not bind its address (the port is taken, or not
 * Relay's to use): the operator's to fix, told in one line naming the variable.
 */
export class ListenError extends Error {
  readonly variable: string;
  constructor(what: string, host: string, port: number, variable: string, cause: NodeJS.ErrnoException) {
    const reason = cause.code === 'EADDRINUSE' ? 'the port is already in use' : cause.code === 'EACCES' ? 'permission denied' : (cause.code ?? cause.message);
    const shownHost = host.includes(':') ? `[${host}]` : host;
    super(`${what} cannot listen on ${shownHost}:${port}: ${reason}${cause.code ? ` (${cause.code})` : ''}; set ${variable} to a free port`, { cause });
    this.name = 'ListenError';
    this.variable = variable;
  }
}

/**
 * A store a variable points at could not be reached at start (down, or the address is wrong):
 * told in one line naming the store, its variable and its address. `reason` must hold no
 * password (the caller strips the URL's user information from it).
 */
export class StoreConnectError extends Error {
  readonly variable: string;
  constructor(store: string, variable: string, address: string, reason: string, cause: unknown) {
    super(`cannot connect to the ${store} (${variable}, ${address}): ${reason}`, { cause });
    this.name = 'StoreConnectError';
    this.variable = variable;
  }
}

type Env = Record<string, string | undefined>;

function text(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value ? value : undefined;
}

/**
 * A whole number from `min` to `max` written as such (digits only: not 0x10, 1e3, 2.0 or 16.5,
 * which Number() would take), `fallback` when unset. `unit` says what it counts in the refusal,
 * `minMeans` what `min` means when it is special ("off").
 */
function wholeNumber<F>(env: Env, name: string, fallback: F, { min, max, unit, minMeans }: { min: number; max: number; unit: string; minMeans?: string }): number | F {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!(/^\d+$/.test(raw) && value >= min && value <= max)) {
    throw new ConfigError(name, `must be a whole number of ${unit} from ${min}${minMeans ? ` (${minMeans})` : ''} to ${max}, got "${raw}"`);
  }
  return value;
}

/** A port to listen on: 0 asks the system for any free one. */
function port(env: Env, name: string, fallback: number): number {
  const raw = text(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) > 65535) throw new ConfigError(name, `must be a port number from 0 to 65535, got "${raw}"`);
  return Number(raw);
}

/** A port to connect to, null when unset: from 1 (no server can be reached at port 0) to 65535. */
function connectPort(env: Env, name: string): number | null {
  const raw = text(env, name);
  if (raw === undefined) return null;
  if (!isConnectPort(raw)) throw new ConfigError(name, `must be a port number from 1 to 65535, got "${raw}"`);
  return Number(raw);
}

const isConnectPort = (digits: string): boolean => /^\d{1,5}$/.test(digits) && Number(digits) >= 1 && Number(digits) <= 65535;

/** A destination to connect to, `host:port` (an IPv6 address in brackets), the port from 1 to 65535; lower-cased. */
function hostAndPort(variable: string, item: string): string {
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d+)$/.exec(item);
  if (!match) throw new ConfigError(variable, `"${item}" must be host:port`);
  if (!isConnectPort(match[2])) throw new ConfigError(variable, `"${item}": the port must be from 1 to 65535`);
  return item.toLowerCase();
}

/**
 * A host name by RFC 1123: labels of 1 to 63 letters, digits and inner hyphens (the label rule
 * sending domains are held to, domain/dns-names.ts), at most 253 characters, one trailing dot at
 * most, and not an IPv4 address (its last label is not all digits). One label is a name too
 * (`localhost`).
 */
function hostNameProblem(name: string): string | null {
  const bare = name.endsWith('.') ? name.slice(0, -1) : name;
  if (bare.length > 253) return 'longer than 253 characters';
  const labels = bare.toLowerCase().split('.');
  for (const label of labels) {
    const problem = labelProblem(label);
    if (problem) return problem.message;
  }
  if (/^\d+$/.test(labels[labels.length - 1])) return 'its last label is all digits, as an IP address\'s is: a name is needed';
  return null;
}

/**
 * A Kafka bootstrap broker: host:port, the port 9092 (Kafka's own default) when left out. The
 * client splits an address at its first colon, so an IPv6 literal cannot name a broker.
 */
function brokerAddress(variable: string, item: string): string {
  const match = /^([A-Za-z0-9.-]+)(?::(\d{1,5}))?$/.exec(item);
  // A URL or user information (kafka://user:pass@host) is not quoted: it may hold a password.
  if (!match && /[@/]/.test(item)) throw new ConfigError(variable, 'takes host or host:port entries, comma separated, with no URL scheme or user information (an entry with "@" or "/" is not repeated here: it may hold a password)');
  if (!match) throw new ConfigError(variable, `"${item}" is not a host or host:port (an IPv6 address needs a name: the Kafka client cannot connect to one)`);
  const brokerPort = Number(match[2] ?? 9092);
  if (brokerPort < 1 || brokerPort > 65535) throw new ConfigError(variable, `"${item}": the port must be from 1 to 65535`);
  return `${match[1]}:${brokerPort}`;
}

/** A whole number of milliseconds from `min` to `max`; `fallback` when unset. */
function wholeMs(env: Env, name: string, fallback: number, min: number, max: number): number {
  return wholeNumber(env, name, fallback, { min, max, unit: 'milliseconds' });
}

/**
 * A test-only factor on retry delays, above 0 and at most 1 (1 when unset), in decimal notation
 * (0.001, 0.5, 1): not 0x1, 1e-3 or Infinity, which Number() would take.
 */
function retryScale(env: Env, name: string): number {
  const raw = text(env, name);
  if (raw === undefined) return 1;
  const factor = Number(raw);
  if (!(/^(?:\d+(?:\.\d*)?|\.\d+)$/.test(raw) && factor > 0 && factor <= 1)) {
    throw new ConfigError(name, `must be a decimal number above 0 and at most 1 (e.g. 0.01), got "${raw}"`);
  }
  return factor;
}

/** A comma-separated list; null when unset. Set with no item in it ("," or " , ") is an error, not "none". */
function list(env: Env, name: string, check: (variable: string, item: string) => string): string[] | null {
  const raw = text(env, name);
  if (raw === undefined) return null;
  const items = raw.split(',').map((s) => s.trim()).filter(Boolean);
  if (items.length === 0) throw new ConfigError(name, `"${raw}" lists nothing: give comma-separated values, or leave it unset`);
  return items.map((item) => check(name, item));
}

/** A proxy is trusted by address or CIDR range: a name would be resolved by nobody. */
function proxyAddress(variable: string, item: string): string {
  const [address, prefix, ...rest] = item.split('/');
  const family = isIP(address);
  const bits = family === 4 ? 32 : 128;
  const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits);
  if (family === 0 || !prefixOk || rest.length > 0) throw new ConfigError(variable, `"${item}" is not an IP address or CIDR range (e.g. 10.0.0.0/8)`);
  return item.toLowerCase();
}

/**
 * Resolvers are addressed by IP (node:dns cannot resolve a resolver's own name): "ip", "ip:port",
 * "[ipv6]", "[ipv6]:port". A resolver listens on a port from 1 to 65535: any other would be
 * refused only at the first lookup, or taken by the resolver for another port.
 */
function resolverAddress(variable: string, item: string): string {
  if (isIP(item)) return item;
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d+))?$/.exec(item);
  const host = match?.[1] ?? match?.[2];
  if (host === undefined || !isIP(host)) throw new ConfigError(variable, `"${item}" is not an IP address or IP:port (resolvers are addressed by IP)`);
  const resolverPort = match![3];
  if (resolverPort !== undefined && !(Number(resolverPort) >= 1 && Number(resolverPort) <= 65535)) {
    throw new ConfigError(variable, `"${item}": the port must be from 1 to 65535`);
  }
  return item;
}

/** Names and addresses by which a connection from this machine reaches this machine. */
function isThisMachine(host: string): boolean {
  const name = host.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
  if (isLoopbackHost(name) || name === hostname().toLowerCase()) return true;
  if (name === '0.0.0.0' || name === '::') return true;
  return Object.values(networkInterfaces()).some((addresses) => addresses?.some((a) => a.address.toLowerCase() === name));
}

/**
 * A smarthost on this machine at the feedback server's port is that server: it takes only
 * bounce and complaint reports addressed to return paths, so every email would be refused
 * (and Relay would read its own refusals back). Caught at start rather than as failed mail.
 */
function checkSmarthostIsNotInbound(smtpUrl: string, inbound: { host: string; port: number }): void {
  const { host, port } = parseSmtpUrl(smtpUrl);
  if (port !== inbound.port || !(host === inbound.host.toLowerCase() || isThisMachine(host))) return;
  throw new ConfigError('RELAY_SMTP_URL', `${host}:${port} is Relay's own feedback SMTP server (RELAY_INBOUND_SMTP_PORT=${inbound.port}), which only accepts bounce and complaint reports, so every email would be refused; `
    + 'point RELAY_SMTP_URL at your smarthost (its submission port is usually 587), or move the feedback server with RELAY_INBOUND_SMTP_PORT');
}

/**
 * A URL variable may hold a password (smtp://user:pass@…, mongodb://…), so its value is never
 * part of an error: the message names the variable and the expected form, and at most the
 * scheme and host, with any user information shown as ***.
 */
function url(env: Env, name: string, schemes: string[], example: string): string | null {
  const raw = text(env, name);
  if (raw === undefined) return null;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    const hint = example.includes('user:pass@') ? '; percent-encode "/", "#", "?", "@" and ":" in a user name or password' : '';
    throw new ConfigError(name, `is not a valid URL (expected ${example}${hint})`);
  }
  if (!schemes.includes(parsed.protocol.replace(/:$/, ''))) {
    throw new ConfigError(name, `must use ${schemes.join(' or ')} (expected ${example}), got ${redactedOrigin(parsed)}`);
  }
  return raw;
}

/**
 * A URL naming several hosts (a MongoDB replica set, an EventStoreDB cluster:
 * `mongodb://a:27017,b:27017/relay`), which the WHATWG parser refuses: only its scheme is
 * checked here, and its adapter's own parser (storeUrl's problemOf) reads the rest. Null for
 * any other value, which url() reads.
 */
function hostListUrl(env: Env, name: string, schemes: string[], example: string): string | null {
  const raw = text(env, name);
  const match = raw === undefined ? null : /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)/.exec(raw);
  if (!match || !match[2].includes(',')) return null;
  const scheme = match[1].toLowerCase();
  if (!schemes.includes(scheme)) throw new ConfigError(name, `must use ${schemes.join(' or ')} (expected ${example}), got "${scheme}:"`);
  return raw!;
}

const require = createRequire(import.meta.url);

/** Store adapters, loaded only when their variable is set: each driver takes about 100 ms to load. */
const adapter = {
  esdb: () => require('./esdb/event-store.ts') as typeof import('./esdb/event-store.ts'),
  mongodb: () => require('./mongodb/document-store.ts') as typeof import('./mongodb/document-store.ts'),
};

/**
 * A store URL read as its adapter will read it (the EventStoreDB client's parser, the MongoDB
 * driver's), so that what the adapter refuses stops the start here, naming the variable, rather
 * than when the store opens. What the adapter finds wrong never holds the URL's user information.
 */
function storeUrl(env: Env, name: string, schemes: string[], example: string, problemOf: (url: string) => string | null): string | null {
  const raw = hostListUrl(env, name, schemes, example) ?? url(env, name, schemes, example);
  if (raw === null) return null;
  const problem = problemOf(raw);
  if (problem !== null) throw new ConfigError(name, problem);
  return raw;
}

/**
 * Scheme and host of a URL, user information replaced by ***: what an error may show of it. With
 * an "@" after the host, what the parser took for host and port is user information cut short
 * by an unescaped "?", "#" or "/" (smtp://user:4711?rest@host reads as host "user", port 4711):
 * only the scheme is shown then.
 */
function redactedOrigin(parsed: URL): string {
  if (userinfoCutShort(parsed)) return `"${parsed.protocol}" (with an "@" after its host: ${PERCENT_ENCODE_USERINFO})`;
  const userinfo = parsed.username || parsed.password ? '***@' : '';
  return `"${parsed.protocol}${parsed.host ? `//${userinfo}${parsed.host}` : ''}"`;
}

/** `terminal`: whether stdout is a TTY, where logs are for people rather than collectors. */
/** Whether browsers treat pages of this origin as secure contexts (https, or a loopback host), where Secure cookies are set. */
function secureContext(origin: URL): boolean {
  if (origin.protocol === 'https:') return true;
  const host = origin.hostname.toLowerCase();
  return host === 'localhost' || host.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(host) || host === '[::1]';
}

export function loadConfig(env: Env = process.env, terminal: boolean = process.stdout.isTTY === true): RelayConfig {
  const envName = text(env, 'RELAY_ENV') ?? text(env, 'NODE_ENV') ?? 'development';
  const variable = text(env, 'RELAY_ENV') ? 'RELAY_ENV' : 'NODE_ENV';
  // NODE_ENV=test is what test runners set; it behaves as development.
  const relayEnv = envName === 'test' ? 'development' : envName;
  if (relayEnv !== 'development' && relayEnv !== 'production') {
    throw new ConfigError(variable, `must be development or production, got "${envName}"`);
  }
  const listenPort = port(env, 'PORT', 3000);
  const origin = url(env, 'RELAY_DASHBOARD_ORIGIN', ['http', 'https'], 'https://host[:port]');
  if (relayEnv === 'production' && origin && !secureContext(new URL(origin))) {
    throw new ConfigError('RELAY_DASHBOARD_ORIGIN', 'is an http origin, but production\'s session cookie (__Host-, Secure) is one browsers set only from https pages or localhost: give the https origin users open (the TLS proxy\'s), or set RELAY_ENV=development');
  }
  const logLevel = text(env, 'RELAY_LOG_LEVEL') ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError('RELAY_LOG_LEVEL', `must be one of fatal, error, warn, info, debug, trace, silent; got "${logLevel}"`);
  }
  const logFormatRaw = text(env, 'RELAY_LOG_FORMAT')?.toLowerCase() ?? 'auto';
  if (!['auto', 'json', 'pretty'].includes(logFormatRaw)) throw new ConfigError('RELAY_LOG_FORMAT', `must be auto, json or pretty; got "${text(env, 'RELAY_LOG_FORMAT')}"`);
  const logFormat: LogFormat = logFormatRaw === 'auto' ? (terminal ? 'pretty' : 'json') : logFormatRaw as LogFormat;
  const mailHost = text(env, 'RELAY_MAIL_HOST') ?? 'mail.relay.localhost';
  // Said in HELO and named by every sending domain's MAIL FROM MX record: a host name, as DNS has them.
  const mailHostProblem = hostNameProblem(mailHost);
  if (mailHostProblem !== null) throw new ConfigError('RELAY_MAIL_HOST', `"${mailHost}" is not a host name (${mailHostProblem})`);
  const logNamespace = text(env, 'RELAY_LOG_NAMESPACE') ?? 'relay';
  if (!/^[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}$/.test(logNamespace)) {
    throw new ConfigError('RELAY_LOG_NAMESPACE', `must be 1 to 100 characters of letters, digits, ".", "_" and "-", got "${logNamespace}"`);
  }
  const instanceIdRaw = text(env, 'RELAY_INSTANCE_ID');
  if (instanceIdRaw !== undefined && !INSTANCE_NAME.test(instanceIdRaw)) {
    throw new ConfigError('RELAY_INSTANCE_ID', `must be ${INSTANCE_NAME_RULE}, got "${instanceIdRaw}"`);
  }
  // Above the broker's group.min.session.timeout.ms (6 s by default), which refuses less.
  const kafkaSessionTimeoutMs = wholeMs(env, 'RELAY_KAFKA_SESSION_TIMEOUT_MS', 10_000, 6_000, 300_000);
  const smtpUrl = url(env, 'RELAY_SMTP_URL', ['smtp', 'smtps'], 'smtp://user:pass@host:587 or smtps://user:pass@host:465');
  const deliveryRaw = text(env, 'RELAY_DELIVERY');
  if (deliveryRaw !== undefined && !['outbox', 'smtp', 'mx'].includes(deliveryRaw)) {
    throw new ConfigError('RELAY_DELIVERY', `must be outbox, smtp or mx, got "${deliveryRaw}"`);
  }
  if (smtpUrl) {
    try {
      parseSmtpUrl(smtpUrl);
    } catch (error) {
      throw new ConfigError('RELAY_SMTP_URL', (error as Error).message.replace(/^RELAY_SMTP_URL:?\s*/, ''));
    }
  }
  const delivery = (deliveryRaw ?? (smtpUrl ? 'smtp' : 'outbox')) as DeliveryTransport;
  if (delivery === 'smtp' && !smtpUrl) throw new ConfigError('RELAY_SMTP_URL', 'is required when RELAY_DELIVERY=smtp (smtp://user:pass@host:587 or smtps://…)');
  if (delivery === 'outbox' && deliveryRaw === undefined && relayEnv === 'production') {
    throw new ConfigError('RELAY_DELIVERY', 'must be set in production (smtp or mx); the outbox, which sends nothing, is only the default in development');
  }
  const testOnly = (name: string, what = 'a test setting') => {
    if (text(env, name) !== undefined && relayEnv === 'production') throw new ConfigError(name, `is ${what} and is refused when RELAY_ENV=production`);
  };
  testOnly('RELAY_MX_PORT');
  testOnly('RELAY_MX_ALLOW');
  testOnly('RELAY_MTA_STS_PORT');
  testOnly('RELAY_DELIVERY_RETRY_SCALE');
  testOnly('RELAY_WEBHOOK_ALLOW', 'for development (webhook receivers on your own machine)');
  testOnly('RELAY_WEBHOOK_RETRY_SCALE');
  const webhookRetryScale = retryScale(env, 'RELAY_WEBHOOK_RETRY_SCALE');
  const webhookAllow = new Set(list(env, 'RELAY_WEBHOOK_ALLOW', hostAndPort) ?? []);
  const mxAllow = new Set((list(env, 'RELAY_MX_ALLOW', (variable, item) => {
    if (!isIP(item)) throw new ConfigError(variable, `"${item}" is not an IP address (the addresses an MX host may resolve to)`);
    return item.toLowerCase();
  }) ?? []));
  const mtaStsRaw = text(env, 'RELAY_MTA_STS')?.toLowerCase();
  if (mtaStsRaw !== undefined && mtaStsRaw !== 'on' && mtaStsRaw !== 'off') throw new ConfigError('RELAY_MTA_STS', `must be on or off, got "${text(env, 'RELAY_MTA_STS')}"`);
  const shapingFile = text(env, 'RELAY_SHAPING_FILE');
  let shaping: ShapingRule[] = [];
  if (shapingFile !== undefined) {
    let content: string;
    try {
      content = readFileSync(shapingFile, 'utf8');
    } catch (error) {
      throw new ConfigError('RELAY_SHAPING_FILE', `cannot read ${shapingFile} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
    try {
      shaping = parseShapingFile(content);
    } catch (error) {
      if (error instanceof ShapingFileError) throw new ConfigError('RELAY_SHAPING_FILE', `${shapingFile} ${error.message}`);
      throw error;
    }
  }
  const tlsRptFromRaw = text(env, 'RELAY_TLSRPT_FROM') ?? null;
  // Read as a send's sender is, so a domain written in Unicode is its ASCII form, the one its
  // sending domain is stored under.
  const tlsRptAddress = tlsRptFromRaw === null ? null : parseAddress(tlsRptFromRaw);
  if (tlsRptAddress !== null && !tlsRptAddress.ok) {
    throw new ConfigError('RELAY_TLSRPT_FROM', `must be an address such as tlsrpt@mail.example.com at a sending domain verified in Relay, got "${tlsRptFromRaw}"`);
  }
  const tlsRptFrom = tlsRptAddress?.ok ? tlsRptAddress.address : null;
  const deliveryRetryScale = retryScale(env, 'RELAY_DELIVERY_RETRY_SCALE');
  const sendRate = wholeNumber(env, 'RELAY_SEND_RATE', null, { min: 1, max: 100_000, unit: 'messages per second' });
  const composeThreads = wholeNumber(env, 'RELAY_COMPOSE_THREADS', 1, { min: 0, max: 64, unit: 'threads' });
  const templateTimeLimitMs = wholeMs(env, 'RELAY_TEMPLATE_TIME_LIMIT_MS', 2000, 10, 60_000);
  const pipelineThreadRaw = text(env, 'RELAY_PIPELINE_THREAD')?.toLowerCase();
  if (pipelineThreadRaw !== undefined && pipelineThreadRaw !== 'on' && pipelineThreadRaw !== 'off') {
    throw new ConfigError('RELAY_PIPELINE_THREAD', `must be on or off, got "${text(env, 'RELAY_PIPELINE_THREAD')}"`);
  }
  const maxBacklog = wholeNumber(env, 'RELAY_ADMISSION_BACKLOG', 500, { min: 0, minMeans: 'off', max: 10_000_000, unit: 'records' });
  // Well inside the API's 30 s request timeout: a send held longer could see its connection
  // cut while it is still admitted, and its client would send it again.
  const maxWaitMs = wholeMs(env, 'RELAY_ADMISSION_MAX_WAIT_MS', 1000, 1, 10_000);
  // Under the 30 s a supervisor usually grants before SIGKILL, so the process can still say
  // what it was waiting for (terminationGracePeriodSeconds, systemd's TimeoutStopSec).
  const shutdownTimeoutMs = wholeMs(env, 'RELAY_SHUTDOWN_TIMEOUT_MS', 25_000, 100, 3_600_000);
  const recheckIntervalMs = wholeMs(env, 'RELAY_DOMAIN_RECHECK_INTERVAL_MS', DEFAULT_RECHECK_POLICY.intervalMs, 60_000, 7 * 24 * 3_600_000);
  const recheckGraceMs = wholeMs(env, 'RELAY_DOMAIN_RECHECK_GRACE_MS', DEFAULT_RECHECK_POLICY.graceMs, 3_600_000, 30 * 24 * 3_600_000);
  const flowGroups = list(env, 'RELAY_ADMISSION_BACKLOG_GROUPS', (variable, item) => {
    if (!/^[a-z][a-z0-9-]{0,63}$/.test(item)) throw new ConfigError(variable, `"${item}" is not a processor name`);
    return item;
  });
  const tlsCertFile = text(env, 'RELAY_INBOUND_TLS_CERT') ?? null;
  const tlsKeyFile = text(env, 'RELAY_INBOUND_TLS_KEY') ?? null;
  if ((tlsCertFile === null) !== (tlsKeyFile === null)) {
    throw new ConfigError(tlsCertFile ? 'RELAY_INBOUND_TLS_KEY' : 'RELAY_INBOUND_TLS_CERT', 'STARTTLS needs both RELAY_INBOUND_TLS_CERT and RELAY_INBOUND_TLS_KEY (PEM files)');
  }
  const maxConnectionsPerClient = wholeNumber(env, 'RELAY_INBOUND_MAX_CONNECTIONS_PER_CLIENT', INBOUND_LIMITS.maxConnectionsPerClient,
    { min: 1, max: INBOUND_LIMITS.maxConnections, unit: 'connections' });
  const listenHost = text(env, 'HOST') ?? '127.0.0.1';
  const inbound = { host: text(env, 'RELAY_INBOUND_SMTP_HOST') ?? listenHost, port: port(env, 'RELAY_INBOUND_SMTP_PORT', 2525), tlsCertFile, tlsKeyFile, maxConnectionsPerClient };
  if (delivery === 'smtp' && smtpUrl) checkSmarthostIsNotInbound(smtpUrl, inbound);
  const metricsRaw = text(env, 'RELAY_METRICS_PORT');
  const metricsOff = metricsRaw?.toLowerCase() === 'off';
  if (metricsRaw !== undefined && !metricsOff && !(/^\d+$/.test(metricsRaw) && Number(metricsRaw) <= 65535)) {
    throw new ConfigError('RELAY_METRICS_PORT', `must be a port number from 0 to 65535, or off; got "${metricsRaw}"`);
  }
  const metricsPort = metricsRaw === undefined || metricsOff ? null : Number(metricsRaw);
  // The host of the metrics listener of its own: without one it would be ignored, and /metrics
  // served on HOST:PORT (or nowhere), not where the operator meant to keep it.
  const metricsHost = text(env, 'RELAY_METRICS_HOST');
  if (metricsHost !== undefined && metricsPort === null) {
    throw new ConfigError('RELAY_METRICS_HOST', `is the address of the metrics listener RELAY_METRICS_PORT opens, and takes effect only with it; ${metricsOff
      ? 'RELAY_METRICS_PORT=off serves no /metrics at all: leave RELAY_METRICS_HOST unset'
      : 'set RELAY_METRICS_PORT (the port to serve /metrics on there), or leave RELAY_METRICS_HOST unset to serve /metrics on HOST:PORT'}`);
  }
  return {
    env: relayEnv,
    host: listenHost,
    port: listenPort,
    dataDir: resolve(text(env, 'RELAY_DATA_DIR') ?? './data'),
    dnsServers: list(env, 'RELAY_DNS_SERVERS', resolverAddress) ?? [],
    dashboardOrigin: origin ? new URL(origin).origin : `http://localhost:${listenPort}`,
    logLevel,
    logFormat,
    eventStoreUrl: storeUrl(env, 'RELAY_EVENTSTORE_URL', ['esdb', 'esdb+discover', 'kurrentdb', 'kurrentdb+discover', 'kurrent', 'kurrent+discover'], 'esdb://user:pass@host:2113?tls=false',
      (raw) => adapter.esdb().eventStoreUrlProblem(raw)),
    kafkaBrokers: list(env, 'RELAY_KAFKA_BROKERS', brokerAddress),
    mongodbUrl: storeUrl(env, 'RELAY_MONGODB_URL', ['mongodb', 'mongodb+srv'], 'mongodb://user:pass@host:27017/database',
      (raw) => adapter.mongodb().mongoUrlProblem(raw)),
    mailHost,
    logNamespace,
    instanceId: instanceIdRaw ?? defaultInstanceName(),
    kafkaSessionTimeoutMs,
    delivery,
    smtpUrl,
    mxPort: connectPort(env, 'RELAY_MX_PORT'),
    mxAllow,
    dnssecResolvers: list(env, 'RELAY_DNSSEC_RESOLVER', resolverAddress),
    mtaSts: mtaStsRaw !== 'off',
    mtaStsPort: connectPort(env, 'RELAY_MTA_STS_PORT'),
    tlsRptFrom,
    shaping,
    deliveryRetryScale,
    sendRate,
    composeThreads,
    templateTimeLimitMs,
    pipelineThread: pipelineThreadRaw !== 'off',
    admissionFlow: { maxBacklog, maxWaitMs, groups: flowGroups },
    shutdownTimeoutMs,
    domainRecheck: { intervalMs: recheckIntervalMs, graceMs: recheckGraceMs },
    secretKey: text(env, 'RELAY_SECRET_KEY') ?? null,
    previousSecretKeys: list(env, 'RELAY_SECRET_KEY_PREVIOUS', (_variable, key) => key) ?? [],
    inbound,
    webhookAllow,
    webhookRetryScale,
    metrics: { enabled: !metricsOff, host: metricsHost ?? listenHost, port: metricsPort },
    trustProxy: list(env, 'RELAY_TRUST_PROXY', proxyAddress) ?? [],
  };
}
