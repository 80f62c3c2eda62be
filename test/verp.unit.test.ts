// VERP return paths: one per email and recipient, MAC'd, surviving MTAs that lower-case
// local parts, and refusing anything Relay did not issue for that domain.
import { randomBytes } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { parseVerpAddress, VERP_MAC_PURPOSE, verpAddress } from '../domain/delivery/verp.ts';
import type { VerpMac, VerpMacVerify } from '../domain/delivery/verp.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';

const box = new SecretBox({ current: randomBytes(32), previous: [] });
const mac: VerpMac = (data) => box.mac(VERP_MAC_PURPOSE, data);
const verify: VerpMacVerify = (data, tag) => box.macVerify(VERP_MAC_PURPOSE, data, tag);

const DOMAIN = 'bounce.example.com';
const newEmailId = () => `em_${randomBytes(15).toString('base64url')}`;
// Safe in an unquoted local part everywhere: no leading, trailing or double dot either.
const SAFE_LOCAL_PART = /^[A-Za-z0-9_=+-]+(\.[A-Za-z0-9_=+-]+)*$/;

function localPart(address: string): string {
  return address.slice(0, address.lastIndexOf('@'));
}

const verp = suite('VERP return paths');

verp('given many email ids and every recipient index 0..49, when encoded and parsed back, then each yields its email and index', () => {
  const ids = [`em_${'A'.repeat(20)}`, `em_${'_'.repeat(19)}-`, `em_${'-_'.repeat(10)}`, `em_${'z9'.repeat(10)}`, ...Array.from({ length: 40 }, newEmailId)];
  for (const emailId of ids) {
    for (let recipientIndex = 0; recipientIndex < 50; recipientIndex++) {
      const address = verpAddress({ emailId, recipientIndex, mailFromDomain: DOMAIN }, mac);
      assert.equal(parseVerpAddress(address, verify), { emailId, recipientIndex }, address);
    }
  }
});

verp('given any return path, then its local part is at most 64 safe characters and the domain is the mail-from domain', () => {
  for (const recipientIndex of [0, 9, 10, 49, 999]) {
    const address = verpAddress({ emailId: newEmailId(), recipientIndex, mailFromDomain: 'Bounce.Example.COM.' }, mac);
    const local = localPart(address);
    assert.ok(local.length <= 64, `${local} is ${local.length} chars`);
    assert.match(local, SAFE_LOCAL_PART);
    assert.is(address.slice(local.length + 1), DOMAIN);
  }
});

verp('given one email, when encoded for two recipients, then the return paths differ', () => {
  const emailId = newEmailId();
  const first = verpAddress({ emailId, recipientIndex: 0, mailFromDomain: DOMAIN }, mac);
  const second = verpAddress({ emailId, recipientIndex: 1, mailFromDomain: DOMAIN }, mac);
  assert.is.not(first, second);
});

verp('given an MTA that lower-cases (or upper-cases) the address, when parsed, then it still yields the email and index', () => {
  const emailId = 'em_AbCdEfGhIjKlMnOpQ-_Z';
  const address = verpAddress({ emailId, recipientIndex: 7, mailFromDomain: DOMAIN }, mac);
  assert.equal(parseVerpAddress(address.toLowerCase(), verify), { emailId, recipientIndex: 7 });
  assert.equal(parseVerpAddress(address.toUpperCase(), verify), { emailId, recipientIndex: 7 });
  assert.equal(parseVerpAddress(`<${address}>`, verify), { emailId, recipientIndex: 7 }, 'as written in Return-Path');
});

verp('given a return path with one MAC character changed, when parsed, then it is bad_mac', () => {
  const address = verpAddress({ emailId: newEmailId(), recipientIndex: 3, mailFromDomain: DOMAIN }, mac);
  const local = localPart(address);
  for (const at of [local.length - 1, local.length - 12, local.length - 24]) {
    const changed = local[at] === 'a' ? 'b' : 'a';
    const forged = `${local.slice(0, at)}${changed}${local.slice(at + 1)}@${DOMAIN}`;
    assert.equal(parseVerpAddress(forged, verify), { error: 'bad_mac' }, forged);
  }
});

verp('given a return path with another index or email id spliced in, when parsed, then it is bad_mac', () => {
  const address = verpAddress({ emailId: newEmailId(), recipientIndex: 3, mailFromDomain: DOMAIN }, mac);
  assert.equal(parseVerpAddress(address.replace(/-3-/, '-4-'), verify), { error: 'bad_mac' });
  const other = verpAddress({ emailId: newEmailId(), recipientIndex: 3, mailFromDomain: DOMAIN }, mac);
  const spliced = `${other.split('-').slice(0, 2).join('-')}-${address.split('-').slice(2).join('-')}`;
  assert.equal(parseVerpAddress(spliced, verify), { error: 'bad_mac' });
});

verp('given a return path issued for one domain, when it arrives at another, then it is bad_mac', () => {
  const address = verpAddress({ emailId: newEmailId(), recipientIndex: 0, mailFromDomain: DOMAIN }, mac);
  assert.equal(parseVerpAddress(`${localPart(address)}@bounce.other.example`, verify), { error: 'bad_mac' });
});

verp('given a return path made with another key, when parsed, then it is bad_mac', () => {
  const stranger = new SecretBox({ current: randomBytes(32), previous: [] });
  const address = verpAddress({ emailId: newEmailId(), recipientIndex: 0, mailFromDomain: DOMAIN }, (d) => stranger.mac(VERP_MAC_PURPOSE, d));
  assert.equal(parseVerpAddress(address, verify), { error: 'bad_mac' });
});

verp('given addresses that are not Relay return paths, when parsed, then they are malformed', () => {
  const good = verpAddress({ emailId: newEmailId(), recipientIndex: 12, mailFromDomain: DOMAIN }, mac);
  const local = localPart(good);
  const garbage = [
    '', 'nobody', '@bounce.example.com', 'postmaster@bounce.example.com', `${local}@`, local,
    `xx${local.slice(2)}@${DOMAIN}`, // another prefix
    good.replace('-12-', '-012-'), // leading zero: not the canonical index
    good.replace('-12-', '-1000-'),
    good.replace('-12-', '--'),
    `${local.slice(0, -1)}@${DOMAIN}`, // MAC one char short
    `${local}a@${DOMAIN}`, // MAC one char long
    `${local.slice(0, 5)}1${local.slice(6)}@${DOMAIN}`, // 1 is not base32
    `${local}.x@${DOMAIN}`,
  ];
  for (const address of garbage) assert.equal(parseVerpAddress(address, verify), { error: 'malformed' }, address);
});

verp('given inputs outside the contract, when encoded, then verpAddress refuses them', () => {
  assert.throws(() => verpAddress({ emailId: 'em_short', recipientIndex: 0, mailFromDomain: DOMAIN }, mac), /not an email id/);
  assert.throws(() => verpAddress({ emailId: newEmailId(), recipientIndex: -1, mailFromDomain: DOMAIN }, mac), /out of range/);
  assert.throws(() => verpAddress({ emailId: newEmailId(), recipientIndex: 1.5, mailFromDomain: DOMAIN }, mac), /out of range/);
  assert.throws(() => verpAddress({ emailId: newEmailId(), recipientIndex: 0, mailFromDomain: 'bad domain' }, mac), /mail-from domain/);
  assert.throws(() => verpAddress({ emailId: newEmailId(), recipientIndex: 0, mailFromDomain: DOMAIN }, () => new Uint8Array(8)), /at least 15 bytes/);
});

verp.run();
