// The rules a webhook URL must meet before Relay resolves or connects to it: https on port
// 443, a DNS name rather than an IP address however it is spelled, no credentials, no
// fragment, bounded length; an allow-listed host:port is exempt from the name and port rules.
// Each refusal names its rule in one sentence.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { checkWebhookUrl, MAX_WEBHOOK_URL_LENGTH } from '../infra/http/webhook-url.ts';
import type { WebhookUrlRule } from '../infra/http/webhook-url.ts';

const NONE = new Set<string>();

function refusedWith(raw: string, rule: WebhookUrlRule, allow: Set<string> = NONE): void {
  const result = checkWebhookUrl(raw, { allow });
  if (result.ok) assert.unreachable(`${raw} was accepted as ${result.host}:${result.port}`);
  else {
    assert.is(result.rule, rule, raw);
    assert.match(result.message, /^The webhook URL[^\n]*\.$/, 'one sentence naming the rule');
  }
}

function accepted(raw: string, allow: Set<string> = NONE) {
  const result = checkWebhookUrl(raw, { allow });
  if (!result.ok) throw new Error(`${raw} refused: ${result.rule} (${result.message})`);
  return result;
}

const url = suite('webhook URL rules');

url('given an https URL with a DNS name, then it is accepted with its host and port 443', () => {
  const result = accepted('https://Hooks.Example.com/relay/events?source=relay');
  assert.is(result.host, 'hooks.example.com');
  assert.is(result.port, 443);
  assert.is(result.url.href, 'https://hooks.example.com/relay/events?source=relay');
});

url('given an explicit :443, a trailing dot or an IDN host, then it is accepted and the host is normalised', () => {
  assert.is(accepted('https://hooks.example.com:443/x').port, 443);
  assert.is(accepted('https://hooks.example.com./x').host, 'hooks.example.com');
  assert.is(accepted('https://bücher.example/x').host, 'xn--bcher-kva.example');
});

url('given http:// or another scheme, then https_required', () => {
  refusedWith('http://hooks.example.com/', 'https_required');
  refusedWith('ftp://hooks.example.com/', 'https_required');
  refusedWith('wss://hooks.example.com/', 'https_required');
  refusedWith('javascript:alert(1)', 'https_required');
});

url('given a port other than 443, then port_forbidden unless host:port is in the allow list', () => {
  refusedWith('https://hooks.example.com:8443/', 'port_forbidden');
  refusedWith('https://hooks.example.com:80/', 'port_forbidden');
  refusedWith('https://hooks.example.com:8443/', 'port_forbidden', new Set(['hooks.example.com:9443', 'other.example.com:8443']));
  const allowed = accepted('https://Hooks.Example.com:8443/', new Set(['hooks.example.com:8443']));
  assert.is(allowed.port, 8443);
});

url('given a user name or password, then credentials_forbidden', () => {
  refusedWith('https://user:secret@hooks.example.com/', 'credentials_forbidden');
  refusedWith('https://user@hooks.example.com/', 'credentials_forbidden');
  refusedWith('https://:secret@hooks.example.com/', 'credentials_forbidden');
});

url('given a fragment, even an empty one, then fragment_forbidden', () => {
  refusedWith('https://hooks.example.com/#section', 'fragment_forbidden');
  refusedWith('https://hooks.example.com/path#', 'fragment_forbidden');
});

url('given IPv4 literals in any spelling the URL parser turns into 127.0.0.1, then ip_literal_forbidden', () => {
  for (const raw of [
    'https://127.0.0.1/',
    'https://2130706433/', // decimal
    'https://0x7f000001/', // hex
    'https://0x7f.1/', // hex, short
    'https://0177.0.0.1/', // octal
    'https://0177.0.0.01/',
    'https://127.1/', // short
    'https://127.0.1/',
    'https://127.0.0.1./', // trailing dot
    'https://%31%32%37.0.0.1/', // percent-encoded
    'https://１２７.０.０.１/', // full-width digits
    'https://127。0。0。1/', // ideographic full stops
    'https://0/', // 0.0.0.0
    'https://169.254.169.254/latest/meta-data/',
    'https://8.8.8.8/', // public, but still not a DNS name
    'https://127.0.0.1:8443/',
  ]) {
    refusedWith(raw, 'ip_literal_forbidden');
  }
});

url('given an allow-listed host:port, then exactly that destination is exempt from the name and port rules', () => {
  const allow = new Set(['localhost:8443', 'intranet:9000', '127.0.0.1:8443', '[::1]:8443']);
  assert.equal(['https://localhost:8443/hook', 'https://LOCALHOST:8443/hook', 'https://intranet:9000/', 'https://127.0.0.1:8443/', 'https://[::1]:8443/']
    .map((raw) => { const r = accepted(raw, allow); return `${r.host}:${r.port}`; }),
  ['localhost:8443', 'localhost:8443', 'intranet:9000', '127.0.0.1:8443', '[::1]:8443']);
  // Another port, or the same address spelled otherwise, is not the listed destination.
  refusedWith('https://localhost/hook', 'host_reserved', allow);
  refusedWith('https://localhost:8444/hook', 'host_reserved', allow);
  refusedWith('https://intranet/', 'host_not_fqdn', allow);
  refusedWith('https://127.0.0.1:8444/', 'ip_literal_forbidden', allow);
  refusedWith('https://2130706433:8443/', 'ip_literal_forbidden', allow);
  refusedWith('https://127.1:8443/', 'ip_literal_forbidden', allow);
  refusedWith('https://[0:0::1]:8443/', 'ip_literal_forbidden', allow);
  // The URL's own rules still hold.
  refusedWith('http://localhost:8443/hook', 'https_required', allow);
  refusedWith('https://user@localhost:8443/hook', 'credentials_forbidden', allow);
  refusedWith('https://localhost:8443/hook#x', 'fragment_forbidden', allow);
});

url('given a host that ends in a number but is no valid IPv4 address, then ip_literal_forbidden', () => {
  refusedWith('https://1.2.3.4.5/', 'ip_literal_forbidden');
  refusedWith('https://example.123/', 'ip_literal_forbidden');
  refusedWith('https://256.0.0.1/', 'ip_literal_forbidden');
  refusedWith('https://example.0x1/', 'ip_literal_forbidden');
});

url('given IPv6 literals, then ip_literal_forbidden', () => {
  for (const raw of ['https://[::1]/', 'https://[::ffff:127.0.0.1]/', 'https://[::ffff:7f00:1]/', 'https://[2606:4700:4700::1111]/', 'https://[fe80::1%25eth0]/', 'https://[::1]:8443/']) {
    refusedWith(raw, 'ip_literal_forbidden');
  }
});

url('given localhost or a name under it, then host_reserved', () => {
  refusedWith('https://localhost/', 'host_reserved');
  refusedWith('https://LOCALHOST./', 'host_reserved');
  refusedWith('https://hooks.localhost/', 'host_reserved');
});

url('given a single-label host, then host_not_fqdn', () => {
  refusedWith('https://intranet/', 'host_not_fqdn');
  refusedWith('https://metadata/computeMetadata/v1/', 'host_not_fqdn');
});

url('given a host that is not a DNS name, then host_invalid', () => {
  refusedWith('https://a..example.com/', 'host_invalid');
  refusedWith('https://a$b.example.com/', 'host_invalid');
  refusedWith(`https://${'a'.repeat(64)}.example.com/`, 'host_invalid');
});

url('given more than 2048 characters, then url_too_long; exactly 2048 is accepted', () => {
  const base = 'https://hooks.example.com/';
  accepted(base + 'a'.repeat(MAX_WEBHOOK_URL_LENGTH - base.length));
  refusedWith(base + 'a'.repeat(MAX_WEBHOOK_URL_LENGTH - base.length + 1), 'url_too_long');
});

url('given a URL within 2048 characters as sent but longer once normalized (non-ASCII percent-encoded), then url_too_long; 2048 normalized is accepted', () => {
  const base = 'https://hooks.example.com/';
  // An "é" is six characters once normalized (%C3%A9).
  const fits = (MAX_WEBHOOK_URL_LENGTH - base.length) / 6;
  assert.ok(Number.isInteger(fits));
  assert.is(accepted(base + 'é'.repeat(fits)).url.href.length, MAX_WEBHOOK_URL_LENGTH);
  refusedWith(base + 'é'.repeat(fits + 1), 'url_too_long');
  refusedWith(`${base}?q=${'😀'.repeat(400)}`, 'url_too_long');
});

url('given something that is not an absolute URL, or has spaces or control characters, then url_invalid', () => {
  for (const raw of ['', 'hooks.example.com/x', '/relative', 'https://', 'https://hooks.exa mple.com/', ' https://hooks.example.com/', 'https://hooks.example.com/\n', 'https://hooks.ex\tample.com/']) {
    refusedWith(raw, 'url_invalid');
  }
});

url('given backslashes the parser reads as slashes, then the host it reaches is the one checked', () => {
  assert.is(accepted('https://evil.example\\@good.example/').host, 'evil.example');
  refusedWith('https:\\\\127.0.0.1\\x', 'ip_literal_forbidden');
});

url.run();
