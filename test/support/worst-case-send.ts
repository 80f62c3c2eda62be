// The largest send body Relay admits, every limit reached at once: exactly 10 MiB, 50 recipients
// of 320-character mailboxes, a 998-emoji subject, 50 custom headers at the 16,384-character
// total, 20 tags at their limits, metadata at 10 levels, 1,000 keys and (nearly) 64 KiB with
// 17-digit doubles in it, 10,000,000 characters of text and html filling the rest. Used by
// test/bench/admission-worst-case.bench.ts (what it costs) and the tests that prove it is allowed.
// The figures are written out (INTERFACE-DECISIONS), not imported: the body must stay the
// documented worst case even if a constant moves.
const MAX_RECIPIENTS = 50;
const MAX_HEADERS = 50;
const MAX_HEADERS_TOTAL_LENGTH = 16_384;
const METADATA_LIMITS = { depth: 10, members: 1_000, bytes: 65_536 };

const MiB = 1024 * 1024;

const mailboxOf = (name: string, address: string) => {
  const fill = 320 - address.length - 5; // "…" <address>
  return `"${name.padEnd(fill, 'n').slice(0, fill)}" <${address}>`;
};

/** Metadata at every limit at once: 10 levels, exactly 1,000 members, as close to 64 KiB as its strings allow. */
export function worstCaseMetadata(): Record<string, unknown> {
  // Levels 2 to 9: a chain of objects, each holding a 17-digit double; an array at level 10.
  const chain: Record<string, unknown> = { n: 0.12345678901234568, last: [1, 2, 3] };
  let members = 2 + 3;
  let top: Record<string, unknown> = chain;
  for (let level = 9; level >= 3; level--) {
    top = { n: 0.12345678901234568 + level, [`level${level}`]: top };
    members += 2;
  }
  const metadata: Record<string, unknown> = { chain: top };
  members += 1;
  const rest = METADATA_LIMITS.members - members;
  for (let i = 0; i < rest; i++) metadata[`k${String(i).padStart(3, '0')}`] = '';
  const each = Math.floor((METADATA_LIMITS.bytes - Buffer.byteLength(JSON.stringify(metadata))) / rest);
  for (let i = 0; i < rest; i++) metadata[`k${String(i).padStart(3, '0')}`] = 'm'.repeat(each);
  if (Buffer.byteLength(JSON.stringify(metadata)) > METADATA_LIMITS.bytes) throw new Error('worst-case metadata is over 64 KiB');
  return metadata;
}

export function worstCaseHeaders(): Record<string, string> {
  const per = Math.floor(MAX_HEADERS_TOTAL_LENGTH / MAX_HEADERS);
  const headers: Record<string, string> = {};
  for (let i = 0; i < MAX_HEADERS; i++) {
    const name = `X-Bench-${String(i).padStart(2, '0')}-${'h'.repeat(16)}`;
    headers[name] = 'v'.repeat(per - name.length);
  }
  return headers;
}

/** The body as the bytes of exactly 10 MiB of JSON; `senderDomain` must be verified, `recipientDomain` reachable by the key. */
export function worstCaseSendBody(senderDomain: string, recipientDomain = 'example.com'): Buffer {
  const recipients = Array.from({ length: MAX_RECIPIENTS }, (_, i) => mailboxOf(`Recipient ${i} with a long display name`, `recipient-${String(i).padStart(2, '0')}@${recipientDomain}`));
  const body: Record<string, unknown> = {
    from: mailboxOf('Acme Notifications', `noreply@${senderDomain}`),
    to: recipients.slice(0, 30),
    cc: recipients.slice(30, 40),
    bcc: recipients.slice(40, 50),
    reply_to: mailboxOf('Acme Support', `support@${senderDomain}`),
    subject: '\u{1F4E6}'.repeat(998),
    headers: worstCaseHeaders(),
    tags: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`t${String(i).padStart(2, '0')}${'g'.repeat(125)}`, 'v'.repeat(256)])),
    metadata: worstCaseMetadata(),
    text: 'x'.repeat(10_000_000),
    html: '',
  };
  const base = Buffer.byteLength(JSON.stringify(body));
  body.html = `<p>${'h'.repeat(10 * MiB - base - 7)}</p>`;
  const bytes = Buffer.from(JSON.stringify(body));
  if (bytes.length !== 10 * MiB) throw new Error(`the worst-case body is ${bytes.length} bytes, not 10 MiB`);
  return bytes;
}
