// domain/delivery/sites.ts: site keys, the shaping file, throttling replies and the adaptive rate.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  afterSuccess, afterThrottle, DEFAULT_SITE_LIMITS, initialSiteState, limitsFor, parseShapingFile, ShapingFileError, SITE_KEY_HOSTS, siteKeyOf, throttleOf,
} from '../domain/delivery/sites.ts';

const test = suite('sites');

test('domains served by the same MX hosts are one site, whatever the order', () => {
  assert.is(
    siteKeyOf([{ host: 'alt1.aspmx.l.google.com.', preference: 5 }, { host: 'ASPMX.l.google.com', preference: 1 }]),
    siteKeyOf([{ host: 'aspmx.l.google.com', preference: 1 }, { host: 'alt1.aspmx.l.google.com', preference: 5 }]),
  );
});

test('given a large MX set, then the site is keyed by the most preferred hosts the transport would consider, one key per set', () => {
  const many = Array.from({ length: 200 }, (_, i) => ({ host: `mx${String(i).padStart(3, '0')}.example.test`, preference: 10 }));
  const backups = Array.from({ length: 3 }, (_, i) => ({ host: `a-backup${i}.example.test`, preference: 50 }));
  const key = siteKeyOf([...backups, ...many]);
  assert.is(key.split(',').length, SITE_KEY_HOSTS);
  assert.is(key, many.slice(0, SITE_KEY_HOSTS).map((h) => h.host).join(','), 'the backups (less preferred) are left out, equals by name');
  assert.is(siteKeyOf([...many].reverse().concat(backups)), key, 'whatever order DNS answers in');
  assert.is(siteKeyOf([{ host: 'mx.example.test', preference: 10 }]), 'mx.example.test', 'a small set is named whole');
});

test('given a shaping file, then the first rule matching an MX host sets the limits, the rest are defaults', () => {
  const rules = parseShapingFile('# providers\n*.google.com connections=10 messages_per_minute=1200\n\nmx.example.net messages_per_connection=20 # small\n*.net connections=2\n');
  assert.equal(limitsFor(['aspmx.l.google.com'], rules), { ...DEFAULT_SITE_LIMITS, connections: 10, messagesPerMinute: 1200 });
  assert.equal(limitsFor(['mx.example.net'], rules), { ...DEFAULT_SITE_LIMITS, messagesPerConnection: 20 });
  assert.equal(limitsFor(['other.net'], rules), { ...DEFAULT_SITE_LIMITS, connections: 2 });
  assert.equal(limitsFor(['google.com'], rules), DEFAULT_SITE_LIMITS, '*.google.com is hosts under it');
});

test('given a bad shaping file, then the error names the line and what is wrong', () => {
  const cases: Array<[string, number, RegExp]> = [
    ['*.ok.com connections=1\nbad_host! connections=2', 2, /"bad_host!" is not an MX host name/],
    ['mx.example.com', 1, /sets nothing/],
    ['\n\nmx.example.com connection=3', 3, /"connection=3" is not a setting/],
    ['mx.example.com messages_per_minute=0', 1, /messages_per_minute must be a whole number from 1/],
    ['mx.example.com connections=2.5', 1, /connections must be a whole number/],
  ];
  for (const [text, line, message] of cases) {
    try {
      parseShapingFile(text);
      assert.unreachable(text);
    } catch (error) {
      assert.instance(error, ShapingFileError);
      assert.is((error as ShapingFileError).line, line, text);
      assert.match((error as Error).message, message);
      assert.ok((error as Error).message.startsWith(`line ${line}: `));
    }
  }
});

test('throttling replies: 421, 4.7.28 and rate words, never greylisting or "try again later" alone; a wait they name is read', () => {
  const reply = (smtpCode: number | null, enhancedCode: string | null, response: string) => ({ smtpCode, enhancedCode, response });
  assert.equal(throttleOf(reply(421, '4.7.28', '421 4.7.28 rate limited')), { throttled: true, hintMs: null });
  assert.equal(throttleOf(reply(450, null, '450 Too many messages, try again in 5 minutes')), { throttled: true, hintMs: 300_000 });
  assert.equal(throttleOf(reply(452, '4.2.2', '452 4.2.2 Mailbox full')), { throttled: false, hintMs: null });
  assert.equal(throttleOf(reply(451, '4.3.0', '451 4.3.0 Temporary local problem')), { throttled: false, hintMs: null });
  assert.equal(throttleOf(reply(550, '5.7.1', '550 5.7.1 rate limited forever')), { throttled: false, hintMs: null }, 'permanent is not throttling');
  assert.equal(throttleOf(reply(421, null, '421 Service unavailable, retry in 30 seconds')), { throttled: true, hintMs: 30_000 });
});

// Real receivers' replies (as they send them; addresses and IPs replaced) and whether each is one
// that slows the whole site down. Greylisting and other replies about one sender/recipient pair
// are not, whatever their code; a bare "try (again) later" is in nearly every temporary reply.
const REAL_REPLIES: Array<[source: string, smtpCode: number, enhancedCode: string | null, response: string, throttles: boolean]> = [
  // Greylisting.
  ['Postfix + postgrey (default greylist-text)', 450, '4.2.0', '450 4.2.0 <bob@example.net>: Recipient address rejected: Greylisted, see http://postgrey.schweikert.ch/help/example.net.html', false],
  ['milter-greylist (default)', 451, '4.7.1', '451 4.7.1 Greylisting in action, please come back in 00:05:00', false],
  ['milter-greylist (quiet)', 451, '4.7.1', '451 4.7.1 Greylisting in action, please come back later', false],
  ['Exim + greylistd (its ACL)', 451, null, '451 192.0.2.1 is not yet authorized to deliver mail from <a@example.org> to <bob@example.net>. Please try later.', false],
  ['Exim, a defer without a message', 451, null, '451 Temporary local problem - please try later', false],
  ['Exim + dlfunc greylist', 451, null, '451 Greylisting in progress, please try again later', false],
  ['OpenBSD spamd', 451, null, '451 Temporary failure, please try again later.', false],
  ['Plesk greylisting milter', 451, '4.7.1', '451 4.7.1 Service unavailable - try again later', false],
  ['Stalwart', 422, '4.2.2', '422 4.2.2 Greylisted, please try again in a few moments.', false],
  ['a greylisting receiver (this repository\'s tests)', 451, '4.7.1', '451 4.7.1 Greylisted, try again later', false],
  ['greylisting at the greeting', 421, '4.7.0', '421 4.7.0 Greylisted, closing connection', false],
  // One recipient, not the site.
  ['Gmail, one mailbox receiving fast', 450, '4.2.1', '450-4.2.1 The user you are trying to contact is receiving mail at a rate that\r\n450-4.2.1 prevents additional messages from being delivered. Please resend your\r\n450 4.2.1 message at a later time. - gsmtp', false],
  ['Gmail, one mailbox receiving fast', 450, '4.2.1', '450 4.2.1 The user you are trying to contact is receiving mail too quickly. Please resend your message at a later time. - gsmtp', false],
  ['Gmail, over quota', 452, '4.2.2', '452 4.2.2 The email account that you tried to reach is over quota. - gsmtp', false],
  ['Gmail', 451, '4.3.0', '451 4.3.0 Mail server temporarily rejected message. - gsmtp', false],
  // The sender's traffic to the site.
  ['Gmail', 421, '4.7.28', '421-4.7.28 [192.0.2.1] Our system has detected an unusual rate of\r\n421-4.7.28 unsolicited mail originating from your IP address. To protect our\r\n421-4.7.28 users from spam, mail sent from your IP address has been temporarily\r\n421 4.7.28 rate limited. - gsmtp', true],
  ['Gmail', 421, '4.7.0', '421 4.7.0 Try again later, closing connection. - gsmtp', true],
  ['Gmail', 421, '4.4.5', '421 4.4.5 Server busy, try again later. - gsmtp', true],
  ['Outlook.com', 451, '4.7.650', '451 4.7.650 The mail server [192.0.2.1] has been temporarily rate limited due to IP reputation. For e-mail delivery information, see https://aka.ms/postmaster (S775)', true],
  ['Microsoft 365, an IP it does not know yet', 451, '4.7.500', '451 4.7.500 Server busy. Please try again later from [192.0.2.1]. (AS761)', true],
  ['Yahoo', 421, '4.7.0', '421 4.7.0 [TSS04] Messages from 192.0.2.1 temporarily deferred due to unexpected volume or user complaints - 4.16.55.1', true],
  ['Yahoo', 451, null, '451 Message temporarily deferred - [160]', true],
  ['a rate-limiting policy service', 452, '4.3.2', '452 4.3.2 Connection rate limit exceeded.', true],
  // Postfix's client limits (anvil(8)), as smtpd words them.
  ['Postfix, smtpd_client_message_rate_limit', 450, '4.7.1', '450 4.7.1 Error: too much mail from 192.0.2.1', true],
  ['Postfix, smtpd_client_connection_rate_limit', 421, '4.7.0', '421 4.7.0 mx.example.org Error: too many connection requests from 192.0.2.1', true],
  ['Postfix, smtpd_client_recipient_rate_limit', 450, '4.7.1', '450 4.7.1 Error: too many recipients from 192.0.2.1', true],
  ['Postfix, smtpd_client_new_tls_session_rate_limit', 421, '4.7.0', '421 4.7.0 mx.example.org Error: too many new TLS sessions from 192.0.2.1', true],
];

test('given real receivers\' replies, then greylisting and replies about one recipient leave the site alone, rate and load replies slow it', () => {
  for (const [source, smtpCode, enhancedCode, response, throttles] of REAL_REPLIES) {
    assert.is(throttleOf({ smtpCode, enhancedCode, response }).throttled, throttles, `${source}: ${response}`);
  }
});

test('throttling halves the rate and pauses with a backoff that grows; successes shorten it and raise the rate back to the limit', () => {
  const limits = { ...DEFAULT_SITE_LIMITS, messagesPerMinute: 100 };
  let state = initialSiteState(limits);
  state = afterThrottle(state, limits, '421 slow down', null, 1000);
  assert.equal([state.rate, state.pausedUntil, state.backoffMs], [50, 6000, 10_000]);
  // Another throttling reply while paused (a transaction already under way) counts once.
  state = afterThrottle(state, limits, '421 slow down', null, 2000);
  assert.equal([state.rate, state.pausedUntil, state.throttles], [50, 6000, 2]);
  state = afterThrottle(state, limits, '421 4.7.28 wait', 60_000, 7000);
  assert.equal([state.rate, state.pausedUntil, state.backoffMs], [25, 67_000, 120_000], 'a longer named wait wins');
  for (let i = 0; i < 100; i++) state = afterThrottle(state, limits, 'x', null, 10_000_000 * (i + 1));
  assert.is(state.rate, 1, 'never below a hundredth of the limit');
  assert.is(state.backoffMs, 30 * 60_000, 'at most 30 minutes');
  state = afterSuccess(state, limits);
  assert.is(state.backoffMs, 15 * 60_000);
  let steps = 0;
  while (state.rate < limits.messagesPerMinute && steps++ < 1000) state = afterSuccess(state, limits);
  assert.is(state.rate, 100, 'back to the limit, never above');
  assert.equal(state.recent.length, 5, 'the latest replies kept');
});

test.run();
