// Given/when/then tests of the send request's rules (domain/email/send-request.ts, domain/mailbox.ts):
// mailbox forms and lengths, domains written in Unicode (taken in their ASCII form), recipient
// counts, reserved and bounded headers, tags, subjects, metadata bounds, and the characters no
// header-bound field may hold; each refusal names its field and says why, in the words the API
// answers with.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  MAX_HEADERS, MAX_HEADERS_TOTAL_LENGTH, MAX_RECIPIENTS, METADATA_LIMITS, checkHeaders, checkMetadata, checkSubject, checkTags,
  headerTextProblem, isReservedHeader, normalizeEnvelope, normalizeSendRequest, UNENCODED_HEADERS, type SendRequestBody,
} from '../domain/email/send-request.ts';
import { RelayError } from '../domain/errors.ts';
import { MAX_ADDRESS_LENGTH, MAX_MAILBOX_LENGTH, parseAddress, parseMailbox } from '../domain/mailbox.ts';

/** The message of the validation error `work` throws. */
function refusal(work: () => unknown): string {
  try {
    work();
  } catch (error) {
    assert.instance(error, RelayError);
    assert.is((error as RelayError).code, 'validation_error');
    return (error as Error).message;
  }
  assert.unreachable('should be refused');
  return '';
}

const body = (overrides: Partial<SendRequestBody> = {}): SendRequestBody => ({ from: 'Shop <shop@example.test>', to: 'ann@example.test', subject: 'Hi', text: 'hello', ...overrides });
const addresses = (n: number, domain = 'example.test') => Array.from({ length: n }, (_, i) => `r${i}@${domain}`);

const mailboxes = suite('mailboxes');

mailboxes('given "Name <address>", then the parts, the normalized address and the domain in lower case', () => {
  const parsed = parseMailbox('  "Ann, Sales" <Ann.Lee@Example.TEST>  ');
  assert.equal(parsed, { ok: true, value: { mailbox: '"Ann, Sales" <Ann.Lee@Example.TEST>', address: 'Ann.Lee@Example.TEST', normalized: 'ann.lee@example.test', domain: 'example.test', displayName: 'Ann, Sales' } });
  assert.equal(parseMailbox('bob@example.test'), { ok: true, value: { mailbox: 'bob@example.test', address: 'bob@example.test', normalized: 'bob@example.test', domain: 'example.test', displayName: null } });
  assert.equal(parseMailbox('<bob@example.test>'), { ok: true, value: { mailbox: '<bob@example.test>', address: 'bob@example.test', normalized: 'bob@example.test', domain: 'example.test', displayName: null } });
  assert.is(parseMailbox('"A \\"quoted\\" name" <a@example.test>').ok && (parseMailbox('"A \\"quoted\\" name" <a@example.test>') as { value: { displayName: string } }).value.displayName, 'A "quoted" name');
  assert.is((parseMailbox('"q\\\\"@example.test') as { ok: boolean }).ok, true, 'a quoted local part');
});

mailboxes('given malformed mailboxes, then each refused with its reason', () => {
  const reason = (input: string) => (parseMailbox(input) as { ok: false; reason: string }).reason;
  assert.is(reason('a@example.test\r\n'), 'must not contain CR or LF');
  assert.is(reason('a@exa\nmple.test'), 'must not contain CR or LF');
  assert.is(reason('   '), 'must not be empty');
  assert.is(reason('ann example.test'), 'must be an address or "Name <address>"');
  assert.is(reason('a<b@example.test'), 'must be an address or "Name <address>"');
  assert.is(reason('Ann <a@b@example.test>'), 'is not an email address');
  assert.is(reason('Ann <> <a@example.test>'), 'has an invalid display name');
  assert.is(reason('noat'), 'is not an email address');
  assert.is(reason('@example.test'), 'is not an email address');
  assert.is(reason('a@'), 'is not an email address');
  assert.is(reason('a..b@example.test'), 'is not an email address');
  assert.is(reason(`${'l'.repeat(65)}@example.test`), 'local part is longer than 64 characters');
  assert.is(reason('a@localhost'), 'has an invalid domain');
  assert.is(reason('a@example.123'), 'has an invalid domain');
  assert.is(reason('a@-bad.example'), 'has an invalid domain');
  assert.is(reason(`a@${'d'.repeat(64)}.example`), 'has an invalid domain');
});

mailboxes('given a bare address whose quoted local part holds spaces, then it is read as that address; angle brackets in it, then refused for what they are', () => {
  assert.equal(parseMailbox('"john doe"@example.org'), { ok: true, value: { mailbox: '"john doe"@example.org', address: '"john doe"@example.org', normalized: '"john doe"@example.org', domain: 'example.org', displayName: null } });
  for (const written of ['"a\\" b"@example.org', '" "@example.org']) {
    assert.ok(parseMailbox(written).ok, written);
  }
  for (const written of ['"a<b"@example.org', '"<a> b"@example.org', '"a\\<b"@example.org']) {
    assert.is((parseMailbox(written) as { ok: false; reason: string }).reason, 'has "<" or ">" in its quoted local part, which Relay does not send', written);
  }
  const mailboxOf = (input: string) => (parseMailbox(input) as { value: { mailbox: string } }).value.mailbox;
  assert.is(mailboxOf('"ann lee"@bücher.example'), '"ann lee"@xn--bcher-kva.example', 'a Unicode domain in its ASCII form');
});

mailboxes('given a bare address with a quoted local part that is malformed, or spaces or angle brackets outside the quotes, then each refused with its reason', () => {
  const reason = (input: string) => (parseMailbox(input) as { ok: false; reason: string }).reason;
  assert.is(reason('"john\tdoe"@example.org'), 'is not an email address', 'a tab is no quoted-string character');
  assert.is(reason('"jö doe"@example.org'), 'has non-ASCII characters before the @, which are not supported (Relay does not send SMTPUTF8)');
  assert.is(reason(`"${'l '.repeat(32)}"@example.org`), 'local part is longer than 64 characters');
  for (const written of ['"john doe"@exa mple.org', '"john doe"@example.org>', '"john" doe@example.org', 'john "doe"@example.org', '"john doe"@<example.org', '"john doe" @example.org']) {
    assert.is(reason(written), 'must be an address or "Name <address>"', written);
  }
});

mailboxes('given an address whose domain is written in Unicode, then the mailbox, the address, the normalized address and the domain hold its ASCII form', () => {
  assert.equal(parseMailbox('Kunde <Kunde@München.example>'), {
    ok: true,
    value: { mailbox: 'Kunde <Kunde@xn--mnchen-3ya.example>', address: 'Kunde@xn--mnchen-3ya.example', normalized: 'kunde@xn--mnchen-3ya.example', domain: 'xn--mnchen-3ya.example', displayName: 'Kunde' },
  });
  const mailboxOf = (input: string) => (parseMailbox(input) as { value: { mailbox: string } }).value.mailbox;
  assert.is(mailboxOf('info@shop.bücher.example'), 'info@shop.xn--bcher-kva.example', 'a bare address; ASCII labels kept');
  assert.is(mailboxOf('"Ann <Sales>" <  ann@bücher.example >'), '"Ann <Sales>" <ann@xn--bcher-kva.example>', 'the display name as written');
  assert.is(mailboxOf('ann@bücher。example'), 'ann@xn--bcher-kva.example', 'IDNA maps the ideographic full stop to a dot');
  // An ASCII domain stays as written, a valid A-label in it too.
  assert.equal(parseAddress('Ann@XN--Bcher-kva.Example'), { ok: true, address: 'Ann@XN--Bcher-kva.Example', domain: 'xn--bcher-kva.example' });
});

mailboxes('given a malformed A-label, a Unicode domain with no ASCII form or a non-ASCII local part, then each refused with its reason', () => {
  const reason = (input: string) => (parseMailbox(input) as { ok: false; reason: string }).reason;
  assert.is(reason('kunde@xn--zz.example'), 'has an invalid domain: label "xn--zz" is not valid punycode');
  assert.is(reason('Kunde <kunde@shop.XN--ZZ.example>'), 'has an invalid domain: label "xn--zz" is not valid punycode');
  assert.is(reason('jürgen@example.test'), 'has non-ASCII characters before the @, which are not supported (Relay does not send SMTPUTF8)');
  assert.is(reason('"jü"@münchen.example'), 'has non-ASCII characters before the @, which are not supported (Relay does not send SMTPUTF8)');
  // node:url would read these as a URL's host, ending it at "/" or "?" or decoding "%".
  for (const domain of ['bü/cher.example', 'bücher.example?x', 'bü%41.example', 'xn--zz.bücher.example']) {
    assert.is(reason(`a@${domain}`), 'has an invalid domain: not a valid internationalised domain name', domain);
  }
  assert.is(reason('a@bücher'), 'has an invalid domain', 'one label');
  assert.is(reason('a@bücher..example'), 'has an invalid domain', 'an empty label');
  assert.is(reason(`a@${'ü'.repeat(60)}.example`), 'has an invalid domain', 'an A-label longer than 63 characters');
});

mailboxes('given a Unicode domain, then the address and mailbox limits hold for its ASCII form too', () => {
  const domain = `${'ü'.repeat(10)}.${'d'.repeat(60)}.${'e'.repeat(60)}.${'f'.repeat(60)}.example`;
  const written = `${'l'.repeat(MAX_ADDRESS_LENGTH - domain.length - 1)}@${domain}`;
  assert.is(written.length, MAX_ADDRESS_LENGTH);
  assert.equal(parseAddress(written), { ok: false, reason: `address is longer than ${MAX_ADDRESS_LENGTH} characters with its domain in ASCII form` });
  const name = `"${'n'.repeat(MAX_MAILBOX_LENGTH - '"" <a@bücher.example>'.length)}"`;
  assert.is(`${name} <a@bücher.example>`.length, MAX_MAILBOX_LENGTH);
  assert.equal(parseMailbox(`${name} <a@bücher.example>`), { ok: false, reason: `is longer than ${MAX_MAILBOX_LENGTH} characters with its domain in ASCII form` });
  assert.ok(parseMailbox(`${name.slice(0, -8)}" <a@bücher.example>`).ok, 'its ASCII form within 320 characters');
});

mailboxes('lengths: an address up to 254 and a mailbox up to 320 characters, counted in characters', () => {
  const domain = `${'d'.repeat(60)}.${'e'.repeat(60)}.${'f'.repeat(60)}.example`;
  const at254 = `${'l'.repeat(MAX_ADDRESS_LENGTH - domain.length - 1)}@${domain}`;
  assert.is(at254.length, 254);
  assert.ok(parseAddress(at254).ok);
  assert.equal(parseAddress(`l${at254}`), { ok: false, reason: 'address is longer than 254 characters' });
  const name = (n: number) => `"${'é'.repeat(n)}" <a@example.test>`;
  const fits = MAX_MAILBOX_LENGTH - '"" <a@example.test>'.length;
  assert.ok(parseMailbox(name(fits)).ok, '320 characters');
  assert.equal(parseMailbox(name(fits + 1)), { ok: false, reason: 'is longer than 320 characters' });
  assert.ok(parseMailbox(`"${'😀'.repeat(fits)}" <a@example.test>`).ok, 'emoji count once');
});

mailboxes.run();

const envelope = suite('envelope and body');

envelope('given a valid body, then every field normalized; an empty html or text counts as none', () => {
  const send = normalizeSendRequest(body({ cc: ['c@example.test'], bcc: 'b@example.test', reply_to: 'r@example.test', html: '', text: 't', headers: { 'X-Ref': '7' }, tags: { kind: 'a' }, metadata: { n: 1 } }));
  assert.equal(send.to.map((m) => m.normalized), ['ann@example.test']);
  assert.equal(send.cc.map((m) => m.normalized), ['c@example.test']);
  assert.equal(send.bcc.map((m) => m.normalized), ['b@example.test']);
  assert.is(send.replyTo?.normalized, 'r@example.test');
  assert.is(send.from.displayName, 'Shop');
  assert.is(send.html, null);
  assert.is(send.text, 't');
  assert.equal(send.headers, { 'X-Ref': '7' });
  assert.equal(send.tags, { kind: 'a' });
  assert.equal(send.metadata, { n: 1 });
  const html = normalizeSendRequest(body({ text: undefined, html: '<p>x</p>' }));
  assert.is(html.text, null);
  assert.is(html.html, '<p>x</p>');
  assert.is(normalizeSendRequest(body()).replyTo, null);
  assert.equal(normalizeSendRequest(body()).headers, {});
});

envelope('given no body at all, or only empty ones, then a 400 naming html', () => {
  assert.is(refusal(() => normalizeSendRequest(body({ text: undefined }))), 'body.html: at least one of html or text must be present and nonempty');
  assert.is(refusal(() => normalizeSendRequest(body({ text: '', html: '' }))), 'body.html: at least one of html or text must be present and nonempty');
});

envelope('recipients: 1 to 50 per list, 50 in all, at least one To; each refusal names its list', () => {
  assert.is(normalizeEnvelope({ from: 'a@example.test', to: addresses(MAX_RECIPIENTS) }).to.length, 50);
  assert.is(refusal(() => normalizeEnvelope({ from: 'a@example.test', to: addresses(51) })), 'body.to: must hold 1 to 50 recipients');
  assert.is(refusal(() => normalizeEnvelope({ from: 'a@example.test', to: [] })), 'body.to: must hold 1 to 50 recipients');
  assert.is(refusal(() => normalizeEnvelope({ from: 'a@example.test', to: 'a@example.test', cc: [] })), 'body.cc: must hold 1 to 50 recipients');
  assert.is(refusal(() => normalizeEnvelope({ from: 'a@example.test', to: 'a@example.test', bcc: addresses(51) })), 'body.bcc: must hold 1 to 50 recipients');
  assert.is(refusal(() => normalizeEnvelope({ from: 'a@example.test', to: addresses(30), cc: addresses(20), bcc: 'x@example.test' })), 'body.to: at most 50 recipients in total across to, cc and bcc (got 51)');
  assert.is(normalizeEnvelope({ from: 'a@example.test', to: addresses(30), cc: addresses(19), bcc: 'x@example.test' }).bcc.length, 1, 'exactly 50 in all');
  assert.is(refusal(() => normalizeEnvelope({ from: 'a@example.test', to: [] as string[], cc: 'c@example.test' })), 'body.to: must hold 1 to 50 recipients');
  assert.is(refusal(() => normalizeEnvelope({ from: 'a@example.test', to: 'not an address' })), 'body.to: must be an address or "Name <address>"');
  assert.is(refusal(() => normalizeEnvelope({ from: 'a@example.test', to: ['ok@example.test', 'bad'] })), 'body.to[1]: is not an email address');
  assert.is(refusal(() => normalizeEnvelope({ from: 'bad', to: 'a@example.test' })), 'body.from: is not an email address');
  assert.is(refusal(() => normalizeEnvelope({ from: 'a@example.test', to: 'a@example.test', reply_to: 'bad' })), 'body.reply_to: is not an email address');
  assert.is(refusal(() => normalizeEnvelope({ from: 'Ann\u202E <a@example.test>', to: 'a@example.test' })), 'body.from: must not contain U+202E (a bidirectional formatting character)');
});

envelope.run();

const fields = suite('headers, tags, subjects, header text');

fields('header text: CR/LF, controls, C1, separators, BOM, bidi and lone surrogates are named, never echoed', () => {
  assert.is(headerTextProblem('fine\ttext 😀'), null);
  assert.is(headerTextProblem('a\rb'), 'must not contain CR or LF');
  assert.is(headerTextProblem('a\x1bb'), 'must not contain U+001B (a control character)');
  assert.is(headerTextProblem('a\x7fb'), 'must not contain U+007F (a control character)');
  assert.is(headerTextProblem('a\x85b'), 'must not contain U+0085 (NEL, a C1 control character)');
  assert.is(headerTextProblem('a\x9fb'), 'must not contain U+009F (a C1 control character)');
  assert.is(headerTextProblem('a\u2028b'), 'must not contain U+2028 (the line separator)');
  assert.is(headerTextProblem('a\u2029b'), 'must not contain U+2029 (the paragraph separator)');
  assert.is(headerTextProblem('a\ufeffb'), 'must not contain U+FEFF (the byte order mark)');
  assert.is(headerTextProblem('a\u2066b'), 'must not contain U+2066 (a bidirectional formatting character)');
  assert.is(headerTextProblem('a\ud800b'), 'must not contain U+D800 (a lone surrogate)');
  assert.is(headerTextProblem('a\udc00'), 'must not contain U+DC00 (a lone surrogate)');
  assert.is(headerTextProblem('\u00a0 \u00ff'), null, 'Latin-1 letters and spaces are fine');
});

fields('subjects: 1 to 998 characters, header text only', () => {
  assert.is(checkSubject('x'.repeat(998)), 'x'.repeat(998));
  assert.is(checkSubject('😀'.repeat(998)).length, 1996, 'characters, not UTF-16 units');
  assert.is(refusal(() => checkSubject('')), 'body.subject: must be 1 to 998 characters');
  assert.is(refusal(() => checkSubject('x'.repeat(999))), 'body.subject: must be 1 to 998 characters');
  assert.is(refusal(() => checkSubject('a\nb', 'template.subject')), 'body.template.subject: must not contain CR or LF');
});

fields('headers: up to 50, names of letters, digits and hyphens up to 128, no reserved ones, values up to 998, 16,384 characters in all', () => {
  assert.equal(checkHeaders(undefined), {});
  const fifty = Object.fromEntries(Array.from({ length: MAX_HEADERS }, (_, i) => [`X-H${i}`, 'v']));
  assert.equal(Object.keys(checkHeaders(fifty)).length, 50);
  assert.is(refusal(() => checkHeaders({ ...fifty, 'X-One-More': 'v' })), 'body.headers: at most 50 custom headers are allowed (got 51)');
  assert.ok(checkHeaders({ [`X-${'n'.repeat(126)}`]: 'v' }));
  assert.is(refusal(() => checkHeaders({ [`X-${'n'.repeat(127)}`]: 'v' })), `body.headers.X-${'n'.repeat(62)}…: header names are at most 128 characters`);
  assert.is(refusal(() => checkHeaders({ 'X_Bad': 'v' })), 'body.headers.X_Bad: header names may only hold letters, digits and hyphens');
  assert.is(refusal(() => checkHeaders({ 'Content-Type': 'v' })), 'body.headers.Content-Type: is a reserved header name');
  assert.is(refusal(() => checkHeaders({ 'X-N': 3 as unknown as string })), 'body.headers.X-N: must be a string');
  assert.ok(checkHeaders({ 'X-Long': 'v'.repeat(998) }));
  assert.is(refusal(() => checkHeaders({ 'X-Long': 'v'.repeat(999) })), 'body.headers.X-Long: must be at most 998 characters');
  assert.is(refusal(() => checkHeaders({ 'X-Evil': 'a\r\nBcc: x' })), 'body.headers.X-Evil: must not contain CR or LF');
  const big = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`X-${String(i).padStart(2, '0')}`, 'v'.repeat(960)]));
  assert.is(refusal(() => checkHeaders(big)), `body.headers: custom headers are at most ${MAX_HEADERS_TOTAL_LENGTH.toLocaleString('en-US')} characters in all, names and values together`);
  const exact = { 'X-A': 'v'.repeat(998), ...Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`X-${String(i).padStart(2, '0')}`, 'v'.repeat(998)])) };
  const used = Object.entries(exact).reduce((n, [k, v]) => n + k.length + v.length, 0);
  const fill = MAX_HEADERS_TOTAL_LENGTH - used - 'X-Fill'.length;
  assert.ok(checkHeaders({ ...exact, 'X-Fill': 'v'.repeat(fill) }), 'exactly 16,384 in all');
  assert.is(refusal(() => checkHeaders({ ...exact, 'X-Fill': 'v'.repeat(fill + 1) })).startsWith('body.headers: custom headers are at most'), true);
});

fields('header names are unique case-insensitively: the second spelling is refused, naming it and the first', () => {
  assert.is(refusal(() => checkHeaders({ Sender: 'ops@example.test', sender: 'x@example.test' })), 'body.headers.sender: repeats the header Sender: header names are compared case-insensitively, so each may be given once');
  assert.is(refusal(() => checkHeaders({ 'x-ref': '1', 'X-A': 'a', 'X-REF': '2' })), 'body.headers.X-REF: repeats the header x-ref: header names are compared case-insensitively, so each may be given once');
  assert.equal(checkHeaders({ 'X-Ref': '1', 'X-Refs': '2' }), { 'X-Ref': '1', 'X-Refs': '2' });
});

fields('In-Reply-To, References and OTP-Token (sent unencoded) are ASCII, and no word of them is longer than 995 characters', () => {
  assert.equal(UNENCODED_HEADERS, ['in-reply-to', 'references', 'otp-token']);
  const ascii = 'must hold only ASCII characters: this header is sent as written, not RFC 2047 encoded';
  assert.is(refusal(() => checkHeaders({ 'In-Reply-To': '<bestellung-ü@shop.example>' })), `body.headers.In-Reply-To: ${ascii}`);
  assert.is(refusal(() => checkHeaders({ references: '<a@x.example> <ü@x.example>' })), `body.headers.references: ${ascii}`);
  assert.is(refusal(() => checkHeaders({ 'OTP-TOKEN': 'café' })), `body.headers.OTP-TOKEN: ${ascii}`);
  assert.ok(checkHeaders({ 'X-Ref': 'bestellung-ü', 'In-Reply-To': '<order-1@shop.example>', References: '<a@x.example>\t<b@x.example>', 'OTP-Token': '"123456"' }), 'other headers are encoded: any text');
  const word = 'must not hold a word longer than 995 characters: this header is sent as written and a word cannot be folded';
  assert.ok(checkHeaders({ 'In-Reply-To': `<${'i'.repeat(993)}>` }), 'a 995-character id');
  assert.is(refusal(() => checkHeaders({ 'In-Reply-To': `<${'i'.repeat(994)}>` })), `body.headers.In-Reply-To: ${word}`);
  assert.is(refusal(() => checkHeaders({ 'OTP-Token': 'o'.repeat(996) })), `body.headers.OTP-Token: ${word}`);
  assert.is(refusal(() => checkHeaders({ References: `<${'a'.repeat(500)} ${'b'.repeat(495)}>` })), `body.headers.References: ${word}`, 'whitespace inside <> does not break a word: it is removed');
  assert.ok(checkHeaders({ References: Array.from({ length: 28 }, (_, i) => `<id-${String(i).padStart(2, '0')}-${'r'.repeat(16)}@x.example>`).join(' ') }), '28 ids in 979 characters');
});

fields('a custom Sender is one mailbox with an ASCII address; its display name may be any header text', () => {
  const reason = (why: string) => `body.headers.Sender: must be one mailbox, "address" or "Name <address>", whose address is ASCII (${why})`;
  assert.ok(checkHeaders({ Sender: '"Zoë, Ops" <ops@example.test>' }));
  assert.ok(checkHeaders({ Sender: 'ops@example.test' }));
  assert.ok(checkHeaders({ Sender: '' }), 'empty: the composer leaves it out');
  assert.is(refusal(() => checkHeaders({ Sender: 'zoë@example.test' })), reason('has non-ASCII characters before the @, which are not supported (Relay does not send SMTPUTF8)'));
  assert.is(refusal(() => checkHeaders({ Sender: 'Ops <ops@xn--zz.example>' })), reason('has an invalid domain: label "xn--zz" is not valid punycode'));
  assert.ok(checkHeaders({ Sender: 'Ops <ops@bücher.example>' }), 'a Unicode domain: sent in its ASCII form');
  assert.is(refusal(() => checkHeaders({ Sender: 'a@example.test, b@example.test' })), reason('must be an address or "Name <address>"'));
});

fields('reserved header names: by prefix, in any case', () => {
  for (const name of ['From', 'to', 'CC', 'Bcc', 'subject', 'Content-Anything', 'MIME-Version', 'Reply-To', 'Return-Path', 'Received', 'DKIM-Signature', 'Authorization']) {
    assert.ok(isReservedHeader(name), name);
  }
  for (const name of ['X-To', 'List-Unsubscribe', 'Tox']) assert.is(isReservedHeader(name), name === 'Tox', name);
});

fields('tags: up to 20; names 1 to 128 of letters, digits, _ and -, not rr_; values up to 256 of the same', () => {
  assert.equal(checkTags(undefined), {});
  const twenty = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`t${i}`, 'v']));
  assert.equal(Object.keys(checkTags(twenty)).length, 20);
  assert.is(refusal(() => checkTags({ ...twenty, t20: 'v' })), 'body.tags: at most 20 tags are allowed');
  assert.ok(checkTags({ ['n'.repeat(128)]: 'v'.repeat(256), 'a-b_c': '' }));
  assert.is(refusal(() => checkTags({ ['n'.repeat(129)]: 'v' })), `body.tags.${'n'.repeat(129)}: tag names are 1 to 128 characters of letters, digits, _ and -`);
  assert.is(refusal(() => checkTags({ '': 'v' })), 'body.tags.: tag names are 1 to 128 characters of letters, digits, _ and -');
  assert.is(refusal(() => checkTags({ 'a b': 'v' })), 'body.tags.a b: tag names are 1 to 128 characters of letters, digits, _ and -');
  assert.is(refusal(() => checkTags({ rr_x: 'v' })), 'body.tags.rr_x: tag names must not begin with rr_');
  assert.is(refusal(() => checkTags({ k: 'v'.repeat(257) })), 'body.tags.k: tag values are up to 256 characters of letters, digits, _ and -');
  assert.is(refusal(() => checkTags({ k: 'a.b' })), 'body.tags.k: tag values are up to 256 characters of letters, digits, _ and -');
  assert.is(refusal(() => checkTags({ k: 1 as unknown as string })), 'body.tags.k: tag values are up to 256 characters of letters, digits, _ and -');
});

fields.run();

const metadata = suite('metadata bounds');

metadata('given no metadata, then {}; anything but an object is refused', () => {
  assert.equal(checkMetadata(undefined), {});
  for (const value of [null, [], 'x', 3]) assert.is(refusal(() => checkMetadata(value)), 'body.metadata: must be an object');
  assert.is(refusal(() => checkMetadata(null, 'template.metadata')), 'body.template.metadata: must be an object');
});

metadata('given nested JSON within the bounds, then it is kept as it is', () => {
  const value = { a: [1, 'two', true, false, null, { b: 1.5 }], s: 'é😀"\\\n\x01' };
  assert.is(checkMetadata(value), value);
});

metadata('depth: ten levels with the metadata object as level 1', () => {
  let nested: Record<string, unknown> = {};
  for (let i = 0; i < 9; i++) nested = { n: nested };
  assert.ok(checkMetadata(nested), 'ten levels');
  assert.is(refusal(() => checkMetadata({ n: nested })), `body.metadata${'.n'.repeat(10)}: metadata nests at most ${METADATA_LIMITS.depth} levels (the metadata object is level 1)`);
  assert.is(refusal(() => checkMetadata({ a: [[[[[[[[[[]]]]]]]]]] })), 'body.metadata.a[0][0][0][0][0][0][0][0][0]: metadata nests at most 10 levels (the metadata object is level 1)');
});

metadata('members: 1,000 keys and items at every level together', () => {
  assert.ok(checkMetadata({ a: Array.from({ length: 999 }, () => 0) }), '1 key + 999 items');
  assert.is(refusal(() => checkMetadata({ a: Array.from({ length: 1000 }, () => 0) })), 'body.metadata: metadata holds at most 1,000 keys in all (object keys and array items, at every level)');
});

metadata('bytes: 65,536 of JSON, escapes and UTF-8 counted as JSON.stringify writes them', () => {
  const fits = (value: Record<string, unknown>) => Buffer.byteLength(JSON.stringify(value));
  const strings = (count: number, length: number) => Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${String(i).padStart(3, '0')}`, 'x'.repeat(length)]));
  const within = strings(40, 1600);
  assert.ok(fits(within) <= 65_536);
  assert.ok(checkMetadata(within));
  const over = strings(41, 1600);
  assert.ok(fits(over) > 65_536);
  assert.is(refusal(() => checkMetadata(over)), 'body.metadata: metadata is at most 65,536 bytes as JSON');
  const escaped = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${String(i).padStart(3, '0')}`, '\x01'.repeat(300)]));
  assert.ok(fits(escaped) > 65_536, 'six bytes per control character');
  assert.is(refusal(() => checkMetadata(escaped)), 'body.metadata: metadata is at most 65,536 bytes as JSON');
  const emoji = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${String(i).padStart(3, '0')}`, '😀'.repeat(1000)]));
  assert.ok(fits(emoji) > 65_536, 'four bytes per emoji');
  assert.is(refusal(() => checkMetadata(emoji)), 'body.metadata: metadata is at most 65,536 bytes as JSON');
  const exactBytes = { s: 'x'.repeat(65_536 - fits({ s: '' })) };
  assert.is(fits(exactBytes), 65_536);
  assert.is(refusal(() => checkMetadata(exactBytes)), 'body.metadata.s: strings in metadata are at most 2,048 characters');
});

metadata('strings up to 2,048 characters, keys up to 256; numbers finite and integers exact', () => {
  assert.ok(checkMetadata({ s: '😀'.repeat(2048) }));
  assert.is(refusal(() => checkMetadata({ s: 'x'.repeat(2049) })), 'body.metadata.s: strings in metadata are at most 2,048 characters');
  assert.ok(checkMetadata({ ['k'.repeat(256)]: 1 }));
  assert.is(refusal(() => checkMetadata({ ['k'.repeat(257)]: 1 })), `body.metadata.${'k'.repeat(64)}…: metadata keys are at most 256 characters`);
  assert.ok(checkMetadata({ big: Number.MAX_SAFE_INTEGER, small: -Number.MAX_SAFE_INTEGER, f: 0.1 }));
  assert.is(refusal(() => checkMetadata({ f: 1e300 })), 'body.metadata.f: integers are kept exactly only up to ±9,007,199,254,740,991 (2^53 - 1); send larger ones as strings', 'a double that large is an integer, and not an exact one');
  assert.is(refusal(() => checkMetadata({ n: Infinity })), 'body.metadata.n: numbers must be finite: this one is beyond the range of a double (±1.8e308); send it as a string');
  assert.is(refusal(() => checkMetadata({ n: 2 ** 53 })), 'body.metadata.n: integers are kept exactly only up to ±9,007,199,254,740,991 (2^53 - 1); send larger ones as strings');
  assert.is(refusal(() => checkMetadata({ a: [1, undefined] })), 'body.metadata.a[1]: must be a JSON value');
});

metadata.run();
