// maskAddresses (domain/addresses-in-text.ts): what a BCC recipient's server reply or
// report keeps when it is recorded. Every address goes, in each form redaction finds (plain,
// quoted local part, URL-encoded), with its angle brackets; the codes and the words stay as
// written; a text without an address comes back unchanged.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { maskAddresses, maskAddressesInCut } from '../domain/addresses-in-text.ts';

test('a Postfix refusal keeps its codes and words, not the address it quotes', () => {
  assert.is(
    maskAddresses('550 5.1.1 <hidden.person@refuse.example.org>: Recipient address rejected: User unknown in virtual mailbox table'),
    '550 5.1.1 <address>: Recipient address rejected: User unknown in virtual mailbox table',
  );
});

test('every address goes, whatever its form, and the rest is as written (line breaks included)', () => {
  assert.is(
    maskAddresses('550-5.1.1 "john doe"@example.org and o\'brien@example.org unknown;\r\n550 5.1.1 see https://x.example/?rcpt=ann%40example.org.'),
    '550-5.1.1 <address> and <address> unknown;\r\n550 5.1.1 see https://x.example/?rcpt=<address>.',
  );
  assert.is(maskAddresses('complaint (abuse), Original-Rcpt-To a@one.example, b@two.example'), 'complaint (abuse), Original-Rcpt-To <address>, <address>');
  assert.is(maskAddresses('<a@b.example>'), '<address>');
  assert.is(maskAddresses('<a@b.example'), '<<address>', 'a bracket without its closing one is not the address\'s');
});

test('a text without an address is unchanged', () => {
  for (const text of ['250 2.0.0 Ok: queued as Q000001', '', '421 4.7.0 Try again @ 10:00', 'not attempted']) assert.is(maskAddresses(text), text);
});

test('given a text cut short ("…"), when masked, then the remains of an address the cut went through go too, and nothing else', () => {
  assert.is(maskAddressesInCut('550 5.1.1 mailbox unavailable. Recipient: <quiet.w…'), '550 5.1.1 mailbox unavailable. Recipient: …');
  assert.is(maskAddressesInCut('550 5.1.1 <a@b.example> rejected and so on…'), '550 5.1.1 <address> rejected and so …', 'the last word goes: it may be an address\'s start');
  assert.is(maskAddressesInCut('550 5.1.1 rejected: <a@b.example>…'), '550 5.1.1 rejected: <address>…');
  assert.is(maskAddressesInCut('550 5.1.1 <a@b.example> rejected'), '550 5.1.1 <address> rejected', 'a text not cut keeps its last word');
});

test.run();
