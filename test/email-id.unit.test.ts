// Email ids (apps/services/admission.ts, emailIdFor): derived from (project, Idempotency-Key)
// when there is one; otherwise the time first, so that ids sort in admission order, then
// random bits; either way `em_` and 20 base64url characters, which VERP carries both ways.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { emailIdFor } from '../apps/services/admission.ts';
import { parseVerpAddress, verpAddress } from '../domain/delivery/verp.ts';

const test = suite('email ids');
const ID = /^em_[A-Za-z0-9_-]{20}$/;

test('without a key, ids sort by the millisecond they were made in, across every digit of the time', () => {
  const base = Date.parse('2026-11-27T18:00:00.000Z');
  // Steps that carry into each of the seven time digits, and a span of years.
  const times = [0, 1, 63, 64, 65, 4095, 4096, 262_143, 262_144, 16_777_216, 1_073_741_824, 68_719_476_736, 365 * 86_400_000 * 80]
    .map((step) => base + step);
  const ids = times.map((time) => emailIdFor('prj', null, time));
  for (const id of ids) assert.match(id, ID);
  assert.equal([...ids].sort(), ids, 'string order is time order');
  assert.ok(emailIdFor('prj', null, 0) < emailIdFor('prj', null, 1));
});

test('ids made in the same millisecond differ in their random part', () => {
  const now = Date.now();
  const ids = new Set(Array.from({ length: 1000 }, () => emailIdFor('prj', null, now)));
  assert.is(ids.size, 1000);
  const prefixes = new Set([...ids].map((id) => id.slice(0, 10)));
  assert.is(prefixes.size, 1, 'the time part is shared');
});

test('with a key, the id depends on (project, key) only', () => {
  const a = emailIdFor('prj_1', 'order-7', 1);
  assert.match(a, ID);
  assert.is(emailIdFor('prj_1', 'order-7', 9_999_999), a);
  assert.is.not(emailIdFor('prj_2', 'order-7', 1), a);
  assert.is.not(emailIdFor('prj_1', 'order-8', 1), a);
});

test('a time-ordered id travels through a VERP return path and back', () => {
  const mac = () => new Uint8Array(32).fill(7);
  const verify = (_data: string, given: Uint8Array) => given.every((b) => b === 7);
  for (const id of [emailIdFor('prj', null), emailIdFor('prj', null, 0), emailIdFor('prj', null, 2 ** 42 - 1)]) {
    const address = verpAddress({ emailId: id, recipientIndex: 3, mailFromDomain: 'bounces.example.com' }, mac);
    assert.equal(parseVerpAddress(address, verify), { emailId: id, recipientIndex: 3 });
  }
});

test.run();
