// RELAY_MAIL_HOST is this installation's host name: Relay says HELO with it (apps/runtime.ts:294,
// 316) and every sending domain's MAIL FROM MX record names it, which customers publish in their
// DNS. It is checked only against /^[A-Za-z0-9.-]+$/, so values that are no host name at all
// start Relay: an empty label ("mail..example.com"), a label that begins with a hyphen
// ("-mail.example.com"), nothing but dots ("..."), a label longer than DNS allows (64 letters).
// The mistake surfaces later, at a receiver's HELO check or as a record customers cannot publish.
//
// Where: infra/config.ts:308-309.
//
// Expected: exit 78 with "relay: invalid configuration: RELAY_MAIL_HOST: "…" is not a host name"
// for a name that is not one by RFC 1123: labels of 1 to 63 letters, digits and hyphens, not
// beginning or ending with a hyphen, at most 253 characters in all (one trailing dot at most).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { describeOutcome, startOutcome } from './support/start-outcome.ts';

for (const value of ['mail..example.com', '-mail.example.com', '...', `${'m'.repeat(64)}.example.com`]) {
  test(`RELAY_MAIL_HOST=${value} stops relay api with exit 78 naming the variable`, async () => {
    const result = await startOutcome(['api'], { RELAY_MAIL_HOST: value });
    assert.is(result.outcome, 'exited', describeOutcome(result));
    if (result.outcome !== 'exited') return;
    assert.is(result.code, 78, describeOutcome(result));
    assert.match(result.output, /^relay: invalid configuration: RELAY_MAIL_HOST: .* is not a host name/m, describeOutcome(result));
  });
}

// The documented default and an ordinary name still start (the check must not refuse them).
test('RELAY_MAIL_HOST=mail.example.com starts relay api', async () => {
  const result = await startOutcome(['api'], { RELAY_MAIL_HOST: 'mail.example.com' });
  assert.is(result.outcome, 'listening', describeOutcome(result));
});

test.run();
