// One mailbox, one address, however it is written: a quoted local part that needs no quoting
// ("ann"@d, RFC 5321 4.1.2) is the same mailbox as ann@d. Pins: a suppressed recipient is
// blocked in To, CC and BCC whichever way the send writes it (spec: "Any blocked To, CC or BCC
// recipient prevents the whole message from being sent"; States: "Any recipient is actively
// suppressed -> suppressed"); the email stores the canonical address, which the list's
// recipient and sender filters find in either form.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, harnessRef, startEmbeddedHarness } from './conformance/harness.ts';

const ref = harnessRef(startEmbeddedHarness);
const test = suite('a suppressed address written with a quoted local part');
test.after(() => ref.close());

test('ann@domain is suppressed: a send to "ann"@domain (the same mailbox) is suppressed too', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  await t.suppress(t.to('ann'));
  // Sanity: the plain form, in any case, is suppressed.
  expectAccepted(await h.send(t.key, basicSend(t, { to: t.to('ANN') })), 'suppressed');
  for (const written of [`"ann"@${t.domain}`, `"\\a\\nn"@${t.domain}`, `Ann <"ANN"@${t.domain}>`]) {
    for (const field of ['to', 'cc', 'bcc']) {
      const body = basicSend(t, field === 'to' ? { to: written } : { [field]: written });
      const response = await h.send(t.key, body);
      assert.is(response.statusCode, 202, response.body);
      assert.is(response.json().status, 'suppressed', `${field} ${written}: ${response.body}`);
    }
  }
  // A local part that needs its quotes is another mailbox.
  expectAccepted(await h.send(t.key, basicSend(t, { to: `<"ann x"@${t.domain}>` })));
});

test('an email to "bob"@domain lists as bob@domain and is found by the recipient filter in either form', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  const sent = expectAccepted(await h.send(t.key, basicSend(t, { from: `"News"@${t.domain}`, to: `"Bob"@${t.domain}` })));
  await h.projected([sent.id]);
  for (const recipient of [`bob@${t.domain}`, `"bob"@${t.domain}`, `"BOB"@${t.domain}`]) {
    const response = await h.request('GET', `/v1/emails?recipient=${encodeURIComponent(recipient)}`, { key: t.key.secret });
    assert.is(response.statusCode, 200, response.body);
    const emails = response.json().emails as Array<{ id: string; toAddresses: string[]; fromAddress: string }>;
    assert.equal(emails.map((e) => e.id), [sent.id], recipient);
    assert.equal([emails[0].toAddresses, emails[0].fromAddress], [[`bob@${t.domain}`], `news@${t.domain}`]);
  }
  const bySender = await h.request('GET', `/v1/emails?sender=${encodeURIComponent(`"news"@${t.domain}`)}`, { key: t.key.secret });
  assert.equal(bySender.json().emails.map((e: { id: string }) => e.id), [sent.id]);
});

test.run();
