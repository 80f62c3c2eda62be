// Email events read in today's canonical address form (domain/email/upcast.ts): versions before
// 2026-11-28 kept an address as written, only lower-cased (`"ann"@example.org`), and their events
// are read with the addresses today's admission gives (ann@example.org), in every field that holds
// one; what is no address (a BCC recipient's stand-in, text today's rules refuse) and a mailbox as
// written stay as stored. An event in canonical form already is read as the very object stored.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { canonicalStoredAddress, upcastEmailEvent } from '../domain/email/upcast.ts';
import { accepted, attempted, deliveryFailed, outcome, suppressed } from './support/email-events.ts';

const test = suite('email upcasting: addresses in canonical form');

const stored = (event: { type: string; data: object }, revision = 0) => ({
  id: `ev-${revision}`, streamId: 'email-em_up', revision, type: event.type, data: event.data as Record<string, unknown>, metadata: { schemaVersion: 1 },
});

const OLD = '"ann"@example.org';
const NEW = 'ann@example.org';

test('canonicalStoredAddress: the older forms as today\'s admission writes them; the rest as stored', () => {
  assert.is(canonicalStoredAddress(OLD), NEW);
  assert.is(canonicalStoredAddress('"a\\nn"@example.org'), NEW);
  assert.is(canonicalStoredAddress('"ann x"@example.org'), '"ann x"@example.org', 'a local part that needs its quotes keeps them');
  assert.is(canonicalStoredAddress('kunde@münchen.example'), 'kunde@xn--mnchen-3ya.example');
  assert.is(canonicalStoredAddress('a BCC recipient'), 'a BCC recipient');
  assert.is(canonicalStoredAddress('zoe@xn--zz.example'), 'zoe@xn--zz.example', 'refused today: as an older rule kept it');
  assert.is(canonicalStoredAddress(NEW), NEW);
});

test('EmailAccepted and EmailSuppressed: from, To, CC and the suppressed recipients; the mailboxes and the reason as written', () => {
  const a = upcastEmailEvent(stored(accepted({ to: ['"Ann"@example.org'], toAddresses: [OLD], cc: ['"Cy"@example.org'], ccAddresses: ['"cy"@example.org'] })));
  assert.is(a.type, 'EmailAccepted');
  const data = a.data as { to: string[]; toAddresses: string[]; ccAddresses: string[] };
  assert.equal([data.to, data.toAddresses, data.ccAddresses], [['"Ann"@example.org'], [NEW], ['cy@example.org']]);
  const reason = `${OLD} is suppressed (hard_bounce)`;
  const s = upcastEmailEvent(stored({ type: 'EmailSuppressed', data: { ...suppressed([{ address: OLD, reason: 'hard_bounce' }, { address: 'a BCC recipient', reason: 'complaint' }], { toAddresses: [OLD] }).data, reason } }));
  assert.equal((s.data as { suppressedRecipients: unknown }).suppressedRecipients, [{ address: NEW, reason: 'hard_bounce' }, { address: 'a BCC recipient', reason: 'complaint' }]);
  assert.is((s.data as { reason: string }).reason, reason, 'the original answer\'s reason, which a replay gives');
});

test('outcomes and reports: each recipient\'s address; a BCC recipient\'s null stays', () => {
  const att = upcastEmailEvent(stored(attempted([outcome(0, 'hard_bounced', { address: OLD }), outcome(2, 'sent', { address: null })]), 3));
  assert.equal((att.data as { recipients: Array<{ address: string | null }> }).recipients.map((r) => r.address), [NEW, null]);
  const failedOld = upcastEmailEvent(stored({ type: 'DeliveryFailed', data: { ...deliveryFailed([0]).data, recipients: [{ index: 0, address: OLD }] } }, 3));
  assert.equal((failedOld.data as { recipients: Array<{ address: string }> }).recipients, [{ index: 0, address: NEW }]);
  for (const type of ['RecipientReported', 'RecipientReportRepeated']) {
    const report = upcastEmailEvent(stored({ type, data: { reportId: 'r', recipientIndex: 0, address: OLD, outcome: 'hard_bounced', occurredAt: '2026-11-27T10:00:00.000Z' } }, 4));
    assert.is((report.data as { address: string }).address, NEW, type);
  }
});

test('an event in canonical form is read as stored: the same object, key order and all', () => {
  const event = stored(accepted());
  assert.is(upcastEmailEvent(event).data, event.data);
  const att = stored(attempted([outcome(0, 'sent')]), 3);
  assert.is(upcastEmailEvent(att).data, att.data);
});

test('an event of a newer version is still not read', () => {
  assert.equal(upcastEmailEvent({ ...stored(accepted({ toAddresses: [OLD] })), metadata: { schemaVersion: 2 } }).data, { type: 'EmailAccepted', schemaVersion: 2 });
});

test.run();
