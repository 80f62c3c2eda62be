// A refused RELAY_SMTP_URL is answered with the forms it may take, and the plain-text one it
// suggests is "smtp://127.0.0.1:2525?tls=none". 2525 is the default RELAY_INBOUND_SMTP_PORT, so
// an operator who follows the suggestion is refused again: "127.0.0.1:2525 is Relay's own
// feedback SMTP server … so every email would be refused". docs/configuration.md gives
// smtp://127.0.0.1:1025?tls=none for this form.
//
// Where: infra/mail/smtp-transport.ts:36 (URL_FORMS; also the header comment at line 14).
//
// Expected: the suggested loopback form names a port Relay accepts with its default
// configuration (1025, as the docs do), so following the message does not lead to another refusal.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { describeOutcome, startOutcome } from './support/start-outcome.ts';

test('the plain-text smarthost form a refused RELAY_SMTP_URL suggests is accepted with the default feedback port', async () => {
  // With the feedback server on its documented default port.
  const env = { RELAY_INBOUND_SMTP_PORT: '2525' };
  const refused = await startOutcome(['api'], { ...env, RELAY_SMTP_URL: 'smtp://127.0.0.1:1025?tls=off' });
  assert.is(refused.outcome, 'exited', describeOutcome(refused));
  if (refused.outcome !== 'exited') return;
  assert.is(refused.code, 78, describeOutcome(refused));
  const suggested = /smtp:\/\/127\.0\.0\.1:\d+\?tls=none/.exec(refused.output)?.[0];
  assert.ok(suggested, `the refusal suggests a plain-text loopback form: ${describeOutcome(refused)}`);
  // `relay api` runs no feedback server, so nothing binds 2525 here: only the check is asked.
  const followed = await startOutcome(['api'], { ...env, RELAY_SMTP_URL: suggested! });
  assert.is(followed.outcome, 'listening', `RELAY_SMTP_URL=${suggested}, as the refusal suggested: ${describeOutcome(followed)}`);
});

test.run();
