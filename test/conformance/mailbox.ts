// Spec: Mailbox — a bare address (max 254 characters) or Name <address> (max 320), no CR or
// LF, surrounding whitespace trimmed. Production keys are used so that any recipient domain
// is allowed and only the mailbox rules decide.
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, expectError, type HarnessRef } from './harness.ts';

/** A syntactically valid address of exactly `length` characters: 64-character local part, labels of at most 63, ".test". */
export function addressOfLength(length: number): string {
  let prefix = length - 64 - 1 - '.test'.length;
  const labels: string[] = [];
  while (prefix > 63) {
    const size = Math.min(63, prefix - 2);
    labels.push('d'.repeat(size));
    prefix -= size + 1;
  }
  labels.push('d'.repeat(prefix));
  const address = `${'l'.repeat(64)}@${labels.join('.')}.test`;
  if (address.length !== length) throw new Error(`built ${address.length} characters, wanted ${length}`);
  return address;
}

export function mailboxSuite(test: Test, ref: HarnessRef): void {
  test('a bare address of 254 characters is accepted; 255 is a validation_error naming the field', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const at254 = addressOfLength(254);
    assert.is(at254.length, 254);
    expectAccepted(await h.send(t.key, basicSend(t, { to: at254 })));
    expectError(await h.send(t.key, basicSend(t, { to: addressOfLength(255) })), 400, 'validation_error', 'body.to');
    expectError(await h.send(t.key, basicSend(t, { cc: [t.to(), addressOfLength(255)] })), 400, 'validation_error', 'body.cc');
  });

  test('"Name <address>" of 320 characters is accepted; 321 is a validation_error', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const address = t.to('named');
    const withName = (total: number) => `${'N'.repeat(total - address.length - 3)} <${address}>`;
    assert.is(withName(320).length, 320);
    expectAccepted(await h.send(t.key, basicSend(t, { to: withName(320) })));
    expectError(await h.send(t.key, basicSend(t, { to: withName(321) })), 400, 'validation_error', 'body.to');
    expectError(await h.send(t.key, basicSend(t, { reply_to: withName(321) })), 400, 'validation_error', 'body.reply_to');
    expectError(await h.send(t.key, basicSend(t, { from: `${'N'.repeat(310)} <${t.from}>` })), 400, 'validation_error', 'body.from');
  });

  test('the address inside "Name <address>" is held to 254 characters too', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectAccepted(await h.send(t.key, basicSend(t, { to: `Long <${addressOfLength(254)}>` })));
    expectError(await h.send(t.key, basicSend(t, { to: `Long <${addressOfLength(255)}>` })), 400, 'validation_error', 'body.to');
  });

  test('CR or LF anywhere in a mailbox is a validation_error, in every mailbox field', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const bad of [`Ann\r\nBcc: x@evil.test <${t.to()}>`, `${t.to()}\n`, `\r${t.to()}`, `Ann\n <${t.to()}>`]) {
      expectError(await h.send(t.key, basicSend(t, { to: bad })), 400, 'validation_error', 'body.to');
      expectError(await h.send(t.key, basicSend(t, { cc: [bad] })), 400, 'validation_error', 'body.cc');
      expectError(await h.send(t.key, basicSend(t, { bcc: bad })), 400, 'validation_error', 'body.bcc');
      expectError(await h.send(t.key, basicSend(t, { reply_to: bad })), 400, 'validation_error', 'body.reply_to');
    }
    expectError(await h.send(t.key, basicSend(t, { from: `Sender\n<${t.from}>` })), 400, 'validation_error', 'body.from');
  });

  test('surrounding whitespace is trimmed, also before the length is counted', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const address = t.to('spaced');
    const name320 = `${'N'.repeat(320 - address.length - 3)} <${address}>`;
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { to: [`  ${address}\t`, `   ${name320}   `], from: `  Sender <${t.from}>  ` })));
    const detail = (await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret })).json();
    assert.equal(detail.to, [address, name320]);
    assert.is(detail.fromAddress, t.from);
  });

  test('a bare address of 254 characters inside surrounding whitespace is accepted; 255 is refused however it is padded', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const at254 = addressOfLength(254);
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { to: `   ${at254}\t`, cc: [`\u00a0${t.to('cc')} `] })));
    const detail = (await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret })).json();
    assert.equal(detail.to, [at254]);
    assert.equal(detail.cc, [t.to('cc')]);
    expectError(await h.send(t.key, basicSend(t, { to: ` ${addressOfLength(255)} ` })), 400, 'validation_error', 'body.to');
  });

  test('lengths count characters, not UTF-16 units: a display name of emoji fills 320 characters; 321 are refused', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const address = t.to('emoji');
    const named = (total: number) => `${'😀'.repeat(total - address.length - 3)} <${address}>`;
    assert.is([...named(320)].length, 320);
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { to: named(320), reply_to: named(320) })));
    assert.equal((await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret })).json().to, [named(320)]);
    expectError(await h.send(t.key, basicSend(t, { to: named(321) })), 400, 'validation_error', 'body.to');
  });

  test('what is not an address or "Name <address>" is a validation_error', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const bad of ['', '   ', 'not-an-address', 'ann@', '@example.test', 'Ann <>', 'Ann <ann@example.test', 'ann@example.test>', 'a b@example.test', 'ann@@example.test', 'ann@-bad-.test']) {
      expectError(await h.send(t.key, basicSend(t, { to: bad })), 400, 'validation_error', 'body.to');
    }
    expectError(await h.send(t.key, basicSend(t, { to: 42 })), 400, 'validation_error', 'body.to');
  });

  test('addresses are compared lower-cased: fromAddress and toAddresses are normalized, to keeps the mailbox as written', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = expectAccepted(await h.send(t.key, basicSend(t, { from: `Sender <${t.from.toUpperCase()}>`, to: `Ann <ANN@${t.domain.toUpperCase()}>` })));
    const detail = (await h.request('GET', `/v1/emails/${sent.id}`, { key: t.key.secret })).json();
    assert.is(detail.fromAddress, t.from);
    assert.equal(detail.to, [`Ann <ANN@${t.domain.toUpperCase()}>`]);
    assert.equal(detail.recipients.map((r: { address: string }) => r.address), [`ann@${t.domain}`]);
  });
}
