// The canonical form of an address (domain/mailbox.ts canonicalAddress, a Mailbox's
// `normalized`): the one text per mailbox that suppressions, list filters and the suppressions
// written from bounces compare. Pins: a quoted local part whose content is a dot-atom is that
// dot-atom (RFC 5321 4.1.2: `"ann"@d` is `ann@d`), quoted pairs undone; a local part that needs
// its quotes keeps them in one quoted form; a domain written in Unicode is in its ASCII form; a
// plain ASCII address is only lower-cased (stored suppressions and read models keep matching).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { canonicalAddress, parseAddress, parseMailbox } from '../domain/mailbox.ts';

const test = suite('canonical addresses');

test('a quoted local part that needs no quotes is written unquoted, quoted pairs undone, lower-cased', () => {
  for (const written of ['"ann"@example.test', '"Ann"@Example.TEST', '"\\a\\n\\n"@example.test', 'ANN@example.test', 'ann@example.test']) {
    assert.is(canonicalAddress(written), 'ann@example.test', written);
  }
  assert.is(canonicalAddress('"ann.lee+x"@example.test'), 'ann.lee+x@example.test');
  assert.is(canonicalAddress('"a\\.b"@example.test'), 'a.b@example.test');
});

test('a local part that needs its quotes keeps them, in one form: only " and \\ escaped', () => {
  assert.is(canonicalAddress('"ann lee"@example.test'), '"ann lee"@example.test');
  assert.is(canonicalAddress('"ann\\ lee"@example.test'), '"ann lee"@example.test');
  assert.is(canonicalAddress('"a..b"@example.test'), '"a..b"@example.test');
  assert.is(canonicalAddress('".ann"@example.test'), '".ann"@example.test');
  assert.is(canonicalAddress('""@example.test'), '""@example.test');
  assert.is(canonicalAddress('"a\\"b"@example.test'), '"a\\"b"@example.test');
  assert.is(canonicalAddress('"a\\\\b"@example.test'), '"a\\\\b"@example.test');
  assert.is(canonicalAddress('"A@B"@example.test'), '"a@b"@example.test');
  // The canonical form is an address, and canonical again.
  for (const written of ['"ann lee"@example.test', '"a\\"b"@example.test', '"a\\\\b"@example.test', '"A@B"@example.test']) {
    const canonical = canonicalAddress(written);
    assert.ok(parseAddress(canonical).ok, canonical);
    assert.is(canonicalAddress(canonical), canonical);
  }
});

test('plain addresses and text that is no address are only lower-cased', () => {
  assert.is(canonicalAddress('Ann.Lee@Example.TEST'), 'ann.lee@example.test');
  assert.is(canonicalAddress('"ann"'), '"ann"');
  assert.is(canonicalAddress('"ann"@'), '"ann"@');
  assert.is(canonicalAddress('nothing'), 'nothing');
});

test('a domain written in Unicode is in its ASCII form: kunde@münchen.example is kunde@xn--mnchen-3ya.example', () => {
  for (const written of ['kunde@münchen.example', 'Kunde@MÜNCHEN.example', '"kunde"@münchen.example', 'kunde@XN--MNCHEN-3YA.example']) {
    assert.is(canonicalAddress(written), 'kunde@xn--mnchen-3ya.example', written);
  }
  assert.is(canonicalAddress('"Ann Lee"@bücher.example'), '"ann lee"@xn--bcher-kva.example');
  assert.is(canonicalAddress('jürgen@münchen.example'), 'jürgen@münchen.example', 'no address: only lower-cased');
});

test('a mailbox\'s normalized address is the canonical one; the address as written is kept', () => {
  const parsed = parseMailbox('Ann <"Ann"@Example.test>');
  assert.ok(parsed.ok);
  assert.equal([parsed.value.address, parsed.value.normalized, parsed.value.domain], ['"Ann"@Example.test', 'ann@example.test', 'example.test']);
});

test.run();
