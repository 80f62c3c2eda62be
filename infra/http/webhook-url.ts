// The rules a webhook URL must meet before Relay ever resolves or connects to it. They are
// checked when an endpoint is created and again before every attempt (webhook-egress.ts),
// so a rule added later also covers endpoints stored before it. Each refusal is one sentence
// that reaches the API client as is.
//
// The host must be a DNS name: an IP literal would skip the address check done on resolved
// answers, and WHATWG URL parsing turns many spellings into an IPv4 address
// (https://2130706433/, https://0x7f.1/, https://0177.0.0.1/, https://127.1/ are all
// 127.0.0.1), so both the parsed host and the host as written are examined.
//
// A destination in the allow list (RELAY_WEBHOOK_ALLOW, development only) is exempt from every
// destination rule: name, port and, at delivery, address ranges. The scheme, credentials and
// fragment rules still hold: they are about the URL, not about where it leads.
import net from 'node:net';

export const MAX_WEBHOOK_URL_LENGTH = 2048;

export type WebhookUrlCheck =
  | { ok: true; url: URL; host: string; port: number }
  | { ok: false; rule: WebhookUrlRule; message: string };

export type WebhookUrlRule =
  | 'url_too_long'
  | 'url_invalid'
  | 'https_required'
  | 'credentials_forbidden'
  | 'fragment_forbidden'
  | 'ip_literal_forbidden'
  | 'host_not_fqdn'
  | 'host_reserved'
  | 'host_invalid'
  | 'port_forbidden';

export interface WebhookUrlOptions {
  /**
   * `host:port` destinations (lower-case host; IPv6 in brackets) exempt from the name, port and
   * address rules (RELAY_WEBHOOK_ALLOW: local development and tests, refused in production).
   */
  allow: ReadonlySet<string>;
}

const MESSAGES: Record<WebhookUrlRule, string> = {
  url_too_long: `The webhook URL must be at most ${MAX_WEBHOOK_URL_LENGTH} characters long, also once normalized as it is stored (non-ASCII characters percent-encoded).`,
  url_invalid: 'The webhook URL must be an absolute URL without spaces or control characters.',
  https_required: 'The webhook URL must use https://.',
  credentials_forbidden: 'The webhook URL must not contain a user name or password.',
  fragment_forbidden: 'The webhook URL must not contain a fragment (#…).',
  ip_literal_forbidden: "The webhook URL's host must be a DNS name, not an IP address.",
  host_not_fqdn: "The webhook URL's host must be a fully qualified domain name such as hooks.example.com.",
  host_reserved: "The webhook URL's host must not be localhost or a name under it.",
  host_invalid: "The webhook URL's host is not a valid DNS name.",
  port_forbidden: 'The webhook URL must use the HTTPS port 443 (leave the port out).',
};

function refuse(rule: WebhookUrlRule): WebhookUrlCheck {
  return { ok: false, rule, message: MESSAGES[rule] };
}

export function isAllowed(allow: ReadonlySet<string>, host: string, port: number): boolean {
  const key = `${host.toLowerCase()}:${port}`;
  if (allow.has(key)) return true;
  for (const entry of allow) if (entry.toLowerCase() === key) return true;
  return false;
}

// Unicode dots that IDNA mapping turns into ".".
const DOTS = /[\u3002\uff0e\uff61]/g;

/**
 * The host as written, before the URL parser rewrote it; undefined when it cannot be told.
 * Follows the parser's own splitting for special schemes: slashes and backslashes after the
 * scheme, authority up to / \ ? #, user info up to the last @.
 */
function writtenHost(raw: string): string | undefined {
  const scheme = /^[a-z][a-z0-9+.-]*:/i.exec(raw);
  if (!scheme) return undefined;
  const rest = raw.slice(scheme[0].length).replace(/^[/\\]*/, '');
  let authority = rest.split(/[/\\?#]/, 1)[0];
  authority = authority.slice(authority.lastIndexOf('@') + 1);
  if (authority.startsWith('[')) return authority.slice(0, authority.indexOf(']') + 1 || undefined);
  const colon = authority.lastIndexOf(':');
  let host = colon >= 0 ? authority.slice(0, colon) : authority;
  try {
    host = decodeURIComponent(host);
  } catch {
    // Left encoded: the parsed host is checked as well.
  }
  return host.normalize('NFKC').replace(DOTS, '.').toLowerCase();
}

/** WHATWG's "ends in a number": such a host is parsed as IPv4, or refused, never looked up. */
function looksNumeric(host: string): boolean {
  if (host.startsWith('[')) return true;
  const labels = host.replace(/\.$/, '').split('.');
  return /^(\d+|0x[0-9a-f]*)$/i.test(labels[labels.length - 1]) || net.isIP(host) !== 0;
}

export function checkWebhookUrl(raw: string, options: WebhookUrlOptions): WebhookUrlCheck {
  // An early bound, before any parsing; the normalized form is limited below.
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) return refuse('url_too_long');
  // The parser silently drops tabs and newlines and trims spaces; a URL that needs that is
  // not one we want to store and show back.
  if (/[\u0000-\u0020\u007f]/.test(raw)) return refuse('url_invalid');
  const written = writtenHost(raw);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // "https://1.2.3.4.5/", "https://[fe80::1%25eth0]/": refused by the parser, but the
    // useful answer is the host rule.
    return refuse(written !== undefined && looksNumeric(written) ? 'ip_literal_forbidden' : 'url_invalid');
  }
  // What is stored and shown back is the normalized URL, where a non-ASCII character of the
  // path or query is %XX per UTF-8 byte (an "é" six characters): limited too, so that a URL as
  // returned is always one that may be sent back.
  if (url.href.length > MAX_WEBHOOK_URL_LENGTH) return refuse('url_too_long');
  if (url.protocol !== 'https:') return refuse('https_required');
  if (url.username !== '' || url.password !== '') return refuse('credentials_forbidden');
  // An empty fragment ("…/#") leaves url.hash empty.
  if (url.hash !== '' || raw.includes('#')) return refuse('fragment_forbidden');

  const parsed = url.hostname;
  const port = url.port === '' ? 443 : Number(url.port);
  const destination = parsed.replace(/\.$/, '').toLowerCase();
  const literal = parsed.startsWith('[') || net.isIP(parsed) !== 0 || looksNumeric(parsed) || (written !== undefined && looksNumeric(written));
  // Exactly the destination listed: an address must be spelled as listed, not in another form
  // the parser maps to it (https://2130706433:8443/ is not the entry 127.0.0.1:8443).
  const asListed = !literal || written === undefined || written === destination;
  if (asListed && isAllowed(options.allow, destination, port)) return { ok: true, url, host: destination, port };
  if (literal) return refuse('ip_literal_forbidden');
  const host = destination;
  if (host === 'localhost' || host.endsWith('.localhost')) return refuse('host_reserved');
  const labels = host.split('.');
  if (labels.length < 2) return refuse('host_not_fqdn');
  if (host.length > 253 || !labels.every((label) => /^[a-z0-9_-]{1,63}$/.test(label))) return refuse('host_invalid');

  if (port !== 443) return refuse('port_forbidden');
  return { ok: true, url, host, port };
}
