// Spec: SendEmail.headers — names match ^[A-Za-z0-9-]+$, values are strings of at most 998
// characters without CR or LF; names beginning with a reserved prefix are rejected whatever
// their case.
import type { Test } from 'uvu';
import { RESERVED_HEADER_PREFIXES } from '../../domain/email/send-request.ts';
import { basicSend, expectAccepted, expectError, type HarnessRef } from './harness.ts';

/** Mixed case, e.g. "CoNtEnT-". */
const mixedCase = (s: string) => [...s].map((c, i) => (i % 2 ? c.toUpperCase() : c.toLowerCase())).join('');

export function headersSuite(test: Test, ref: HarnessRef): void {
  test('custom headers with names of letters, digits and hyphens are accepted', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectAccepted(await h.send(t.key, basicSend(t, { headers: { 'X-Entity-Ref-ID': 'abc-123', 'List-Unsubscribe': '<mailto:u@x.test>', X1: '', 'X-To': 'not reserved: it does not begin with to' } })));
  });

  test('names outside ^[A-Za-z0-9-]+$ are validation_errors naming the header', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const name of ['X Space', 'X_Underscore', 'X:Colon', 'X.Dot', 'Ünicode', '']) {
      expectError(await h.send(t.key, basicSend(t, { headers: { [name]: 'v' } })), 400, 'validation_error', 'body.headers');
    }
  });

  test('every reserved prefix is rejected in lower, upper and mixed case, alone and as a prefix', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const prefix of RESERVED_HEADER_PREFIXES) {
      const base = prefix.endsWith('-') ? `${prefix}Extra` : prefix;
      for (const name of [base, base.toUpperCase(), mixedCase(base), `${base}-More`, `${base.toUpperCase()}X`]) {
        expectError(await h.send(t.key, basicSend(t, { headers: { [name]: 'v' } })), 400, 'validation_error', `body.headers.${name}`);
      }
    }
    // The prefixes that end in "-" reserve only names that go on after it.
    expectAccepted(await h.send(t.key, basicSend(t, { headers: { Content: 'v', MIME: 'v', DKIM: 'v', 'X-Content-Type': 'v' } })));
    for (const name of ['Content-Type', 'MIME-Version', 'DKIM-Signature', 'Reply-To', 'Return-Path', 'Received', 'Authorization', 'Bcc', 'Subject']) {
      expectError(await h.send(t.key, basicSend(t, { headers: { [name]: 'v' } })), 400, 'validation_error', 'reserved');
    }
  });

  test('values: 998 characters accepted; 999, CR, LF or a non-string are validation_errors', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectAccepted(await h.send(t.key, basicSend(t, { headers: { 'X-Long': 'v'.repeat(998) } })));
    for (const value of ['v'.repeat(999), 'a\r\nBcc: x@evil.test', 'a\nb', 'a\rb', 5, null, ['a']]) {
      expectError(await h.send(t.key, basicSend(t, { headers: { 'X-Bad': value } })), 400, 'validation_error', 'body.headers.X-Bad');
    }
    expectError(await h.send(t.key, basicSend(t, { headers: ['X-A: b'] })), 400, 'validation_error', 'body.headers');
  });

  test('values count characters, not UTF-16 units: 998 emoji accepted, 999 refused', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectAccepted(await h.send(t.key, basicSend(t, { headers: { 'X-Mood': '😀'.repeat(998) } })));
    expectError(await h.send(t.key, basicSend(t, { headers: { 'X-Mood': '😀'.repeat(999) } })), 400, 'validation_error', 'body.headers.X-Mood');
  });
}
