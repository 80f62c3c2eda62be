// The redaction rules of `relay events --redact` and `relay events export --redact`
// (apps/services/event-reading.ts, docs/analysing-events.md): an address becomes its token, a
// MAC under the secret key's current key of its canonical form (one mailbox, one token, which
// no one without the key can compute for a guess); address fields are replaced whole whatever
// the address looks like, recipients' mailboxes become the token of their address (the name
// goes with it), the sender's display name stays, and in any other text every address, a
// dot-atom local part with an apostrophe or a quoted local part included, is replaced whole, also
// one written URL-encoded (`?email=ann%40example.org`), as the address it decodes to; and text of
// any length is redacted in time linear in it.
import { createHash, randomBytes } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { addressTokens, redactEvent } from '../apps/services/event-reading.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import type { StoredEvent } from '../infra/ports/event-store.ts';
import { longestStall } from './support/event-loop.ts';

const test = suite('event redaction');

const event = (type: string, data: Record<string, unknown>): StoredEvent =>
  ({ id: 'e1', streamId: 'email-em_1', revision: 0, position: '1', type, data, metadata: {}, recordedAt: '2026-11-01T00:00:00.000Z' }) as StoredEvent;

const token = addressTokens(new SecretBox({ current: randomBytes(32), previous: [] }));

const QUOTED = '"john doe"@example.org';
const APOSTROPHE = "o'brien@example.org";

test('address fields are replaced whole by their token, a quoted local part and an apostrophe included', () => {
  const { data } = redactEvent(event('EmailSuppressed', {
    fromAddress: 'hello@acme.example', toAddresses: [QUOTED, APOSTROPHE], ccAddresses: ['"a@b"@example.net'],
    suppressedRecipients: [{ address: APOSTROPHE, reason: 'hard_bounce' }], content: { data: 'sealed' },
  }), token);
  assert.equal(data, {
    fromAddress: token('hello@acme.example'), toAddresses: [token(QUOTED), token(APOSTROPHE)], ccAddresses: [token('"a@b"@example.net')],
    suppressedRecipients: [{ address: token(APOSTROPHE), reason: 'hard_bounce' }], content: null,
  });
  assert.is(token('"a@b"@example.net').split('@')[1], 'example.net');
});

test('a recipient mailbox becomes the token of its address; the sender keeps its name', () => {
  const { data } = redactEvent(event('EmailAccepted', {
    from: 'Acme Support <hello@acme.example>', to: [`John <${QUOTED}>`, APOSTROPHE], cc: [], replyTo: `"O'Brien, Pat" <${APOSTROPHE}>`,
  }), token);
  assert.equal(data, {
    from: `Acme Support <${token('hello@acme.example')}>`, to: [token(QUOTED), token(APOSTROPHE)], cc: [], replyTo: token(APOSTROPHE),
  });
});

test("the sender's own metadata, tags and headers: addresses in them redacted as text, their keys no address fields", () => {
  const { data } = redactEvent(event('EmailAccepted', {
    metadata: { address: '1 Main Street', to: 'the team', contact: `Pat <${APOSTROPHE}>`, [QUOTED]: 1 }, tags: { owner: 'ann@example.net' }, headers: { 'X-Ref': 'none' },
  }), token);
  assert.equal(data, {
    metadata: { address: '1 Main Street', to: 'the team', contact: `Pat <${token(APOSTROPHE)}>`, [token(QUOTED)]: 1 }, tags: { owner: token('ann@example.net') }, headers: { 'X-Ref': 'none' },
  });
});

test('in free text every address is replaced whole: quoted, with an apostrophe, in angle brackets or quotes, before a full stop', () => {
  const { data } = redactEvent(event('RecipientReported', {
    address: APOSTROPHE,
    diagnosticCode: `550 5.1.1 <${APOSTROPHE}>: unknown; also ${QUOTED}, 'ann@example.net' and bob@example.net.`,
  }), token);
  assert.is(data.address, token(APOSTROPHE));
  assert.is(
    data.diagnosticCode,
    `550 5.1.1 <${token(APOSTROPHE)}>: unknown; also ${token(QUOTED)}, '${token('ann@example.net')}' and ${token('bob@example.net')}.`,
  );
});

test('an address URL-encoded in the headers, metadata or text (its @ as %40, other escapes in either case) is replaced as the address it decodes to', () => {
  const cases: Array<[string, string]> = [
    ['<https://app.example/unsubscribe?email=ann.private%40example.org>', `<https://app.example/unsubscribe?email=${token('ann.private@example.org')}>`],
    ['https://app.example/u?to=Ann%2bNews%40Example.ORG&from=bob%40example.net#x', `https://app.example/u?to=${token('ann+news@example.org')}&from=${token('bob@example.net')}#x`],
    [`mailto:list@acme.example?subject=unsubscribe%20${encodeURIComponent("o'brien@example.org")}`, `mailto:${token('list@acme.example')}?subject=unsubscribe%20${token(APOSTROPHE)}`],
    [`/u/${encodeURIComponent(QUOTED)}.`, `/u/${token(QUOTED)}.`],
    [`/u/${encodeURIComponent('kunde@münchen.example')}`, `/u/${token('kunde@xn--mnchen-3ya.example')}`],
  ];
  const { data } = redactEvent(event('EmailAccepted', {
    headers: { 'List-Unsubscribe': cases[0][0] }, metadata: Object.fromEntries(cases.slice(1).map(([text], i) => [`link${i}`, text])), subject: cases[4][0],
  }), token);
  assert.equal(data, {
    headers: { 'List-Unsubscribe': cases[0][1] }, metadata: Object.fromEntries(cases.slice(1).map(([, redacted], i) => [`link${i}`, redacted])), subject: cases[4][1],
  });
  // The same address gives the same token however it is written.
  assert.equal(redactEvent(event('EmailAccepted', { toAddresses: ['ann.private@example.org'] }), token).data.toAddresses, [token('ann.private@example.org')]);
  // A plain address whose local part holds %40 is one address, replaced whole.
  assert.equal(redactEvent(event('RecipientReported', { diagnosticCode: 'to user%40relay@example.org' }), token).data, { diagnosticCode: `to ${token('user%40relay@example.org')}` });
});

test('a token is a MAC under the secret key: the same for one mailbox however written, another under another key, never the unkeyed hash', () => {
  const address = 'quiet.watcher@two.example.org';
  const [local, domain] = address.split('@');
  assert.match(token(address), /^[0-9a-f]{20}@two\.example\.org$/);
  assert.is(token(`"${local}"@${domain.toUpperCase()}`), token(address), 'the canonical address: one mailbox, one token');
  assert.is.not(token('watcher@two.example.org'), token(address));
  const sha256 = createHash('sha256').update(address).digest('hex');
  assert.not.ok(sha256.startsWith(token(address).slice(0, 16)), 'not the unkeyed sha256 an analyst could compute for a guess');
  const otherInstallation = addressTokens(new SecretBox({ current: randomBytes(32), previous: [] }));
  assert.is.not(otherInstallation(address), token(address));
  // Keyed by the current key only: a previous key (after a rotation) does not change the token.
  const current = randomBytes(32);
  assert.is(addressTokens(new SecretBox({ current, previous: [randomBytes(32)] }))(address), addressTokens(new SecretBox({ current, previous: [] }))(address));
});

test('a value of 1 MB that a pattern would try again from each character (%40s and letters, dots, escaped quotes, an unclosed address literal) is redacted without holding the process', async () => {
  const MB = 1 << 20;
  const a97 = 'a'.repeat(97);
  // Each with its addresses redacted: in the first, every other %40 joins the letters around it;
  // the others end in an @ or %40 with no domain after it, so they hold none.
  const values: Array<[string, (redacted: string) => boolean]> = [
    [('%40' + a97).repeat(MB / 100), (redacted) => redacted.startsWith(`%40${token(`${a97}@${a97}`)}%40`)],
    ['ann%2B'.repeat(MB / 6) + '%40', (redacted) => redacted.endsWith('ann%2B%40')],
    ['a.'.repeat(MB / 2) + '@', (redacted) => redacted.endsWith('a.@')],
    ['"' + '\\"'.repeat(MB / 2) + '@x', (redacted) => redacted.endsWith('\\"@x')],
    // An address literal never closed, after a long local part: its domain is read once, not from each start.
    ['a'.repeat(MB / 2) + '@[' + '1'.repeat(MB / 2), (redacted) => redacted === `${'a'.repeat(MB / 2)}@[${'1'.repeat(MB / 2)}`],
  ];
  for (const [value, redactedWell] of values) {
    const { result, stallMs } = await longestStall(async () => redactEvent(event('EmailAccepted', { metadata: { value } }), token));
    assert.ok(stallMs < 1000, `${JSON.stringify(value.slice(0, 12))}…: redacting held the event loop for ${Math.round(stallMs)} ms`);
    assert.ok(redactedWell((result.data.metadata as { value: string }).value), JSON.stringify(value.slice(0, 12)));
  }
});

test.run();
