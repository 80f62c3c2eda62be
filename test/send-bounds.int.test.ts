// The bounds of what POST /v1/emails admits beyond the spec's field limits (INTERFACE-DECISIONS:
// "Limits of headers and metadata", "Characters in header fields"): a body at each limit is
// admitted and read back unchanged, one step past it is 400 validation_error naming the field and
// the limit, for direct and template sends alike; header-bound fields refuse control characters,
// separators, lone surrogates, the BOM and bidirectional overrides, and a template variable that
// brings one into the rendered subject is 422 like CR/LF. (The hostile shapes themselves, nesting
// 1,000 and 10,000 deep, 400,000 keys, 200,000 headers, are in test/api-bad-input.int.test.ts.)
import * as assert from 'uvu/assert';
import { suite } from 'uvu';
import type { LightMyRequestResponse } from 'fastify';
import { createTemplateAs, templates, templateWorld, type TemplateWorld } from './support/templates.ts';
import { worstCaseSendBody } from './support/worst-case-send.ts';

// The documented figures, written out (a changed constant must fail here, not follow along).
const METADATA_LIMITS = { depth: 10, members: 1_000, bytes: 65_536, keyLength: 256, stringLength: 2_048 };
const MAX_HEADERS = 50;
const MAX_HEADERS_TOTAL_LENGTH = 16_384;

const test = suite<{ w: TemplateWorld; slug: string }>('send bounds');

test.before(async (ctx) => {
  ctx.w = await templateWorld('embedded');
  ctx.slug = (await createTemplateAs(ctx.w, { slug: 'news', subject: 'News: {{topic}}', text: 'About {{topic}}. {{note}}' })).slug;
});
test.after(async ({ w }) => {
  await w.t.close();
});

/** A send a minute after the previous one (the development key's rate window), as raw JSON text or a value. */
function send(w: TemplateWorld, body: unknown): Promise<LightMyRequestResponse> {
  w.t.clock.advance(61_000);
  return w.t.app.inject({
    method: 'POST', url: '/v1/emails',
    headers: { authorization: `Bearer ${w.apiKey}`, 'content-type': 'application/json' },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

const direct = (w: TemplateWorld, extra: Record<string, unknown> = {}) => ({ from: `App <app@${w.domain}>`, to: `ann@${w.domain}`, subject: 'Hello', text: 'Hi', ...extra });
const templated = (w: TemplateWorld, slug: string, extra: Record<string, unknown> = {}) => ({ from: `app@${w.domain}`, to: `ann@${w.domain}`, template: slug, variables: { topic: 'spring', note: '' }, ...extra });

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function refused(r: LightMyRequestResponse, field: string, says: RegExp, status = 400, code = 'validation_error'): void {
  assert.is(r.statusCode, status, r.body);
  const { error } = r.json() as { error: { code: string; message: string } };
  assert.is(error.code, code, r.body);
  assert.match(error.message, new RegExp(`^${escape(field)}: `), r.body);
  assert.match(error.message, says, r.body);
}

async function admitted(w: TemplateWorld, body: unknown): Promise<string> {
  const r = await send(w, body);
  assert.is(r.statusCode, 202, r.body);
  return r.json().id as string;
}

async function detailOf(w: TemplateWorld, id: string) {
  const r = await w.t.app.inject({ method: 'GET', url: `/v1/emails/${id}`, headers: { authorization: `Bearer ${w.apiKey}` } });
  assert.is(r.statusCode, 200, r.body);
  return r.json();
}

/** Nesting `levels` deep, the metadata object being level 1: {a: {a: … {a: leaf}}}. */
function nested(levels: number, leaf: unknown = 1): Record<string, unknown> {
  let value: unknown = leaf;
  for (let i = 1; i < levels; i++) value = { a: value };
  return { a: value };
}

/** Metadata of `bytes` bytes of JSON exactly (ASCII), in strings of at most the string limit. */
function metadataOfBytes(bytes: number): Record<string, string> {
  const count = Math.ceil(bytes / (METADATA_LIMITS.stringLength + 9));
  const out: Record<string, string> = {};
  for (let i = 0; i < count; i++) out[`k${String(i).padStart(2, '0')}`] = '';
  let room = bytes - JSON.stringify(out).length;
  for (const key of Object.keys(out)) {
    const length = Math.min(METADATA_LIMITS.stringLength, room);
    out[key] = 'v'.repeat(length);
    room -= length;
  }
  assert.is(JSON.stringify(out).length, bytes);
  return out;
}

test('metadata at every limit at once is admitted and read back unchanged', async ({ w }) => {
  // 10 levels, 1,000 members in all, strings of 2,048 characters, keys of 256, numbers at the safe-integer edge.
  const metadata: Record<string, unknown> = { deep: nested(8, [true, null, -9007199254740991]) };
  metadata[`k${'x'.repeat(METADATA_LIMITS.keyLength - 1)}`] = 's'.repeat(METADATA_LIMITS.stringLength);
  const list: number[] = [];
  metadata.list = list;
  let members = 0;
  const countMembers = (v: unknown): void => {
    if (Array.isArray(v)) { members += v.length; v.forEach(countMembers); } else if (v && typeof v === 'object') {
      members += Object.keys(v).length; Object.values(v).forEach(countMembers);
    }
  };
  countMembers(metadata);
  for (let i = members; i < METADATA_LIMITS.members; i++) list.push(i * 1.5);
  members = 0;
  countMembers(metadata);
  assert.is(members, METADATA_LIMITS.members);
  const id = await admitted(w, direct(w, { metadata }));
  assert.equal((await detailOf(w, id)).metadata, metadata);

  const sized = metadataOfBytes(METADATA_LIMITS.bytes);
  assert.is(Buffer.byteLength(JSON.stringify(sized)), METADATA_LIMITS.bytes);
  const sizedId = await admitted(w, direct(w, { metadata: sized }));
  assert.equal((await detailOf(w, sizedId)).metadata, sized);
  // Bytes count UTF-8: 2-byte and 4-byte characters, escapes.
  const wide = { a: 'é'.repeat(2_000), b: '\u{1F600}'.repeat(1_000), c: '"\\\n'.repeat(600), d: '\u0001'.repeat(300) };
  assert.ok(Buffer.byteLength(JSON.stringify(wide)) < METADATA_LIMITS.bytes);
  await admitted(w, direct(w, { metadata: wide }));
});

test('the largest allowed body, every limit at once in exactly 10 MiB (the benchmark\'s worst case), is admitted', async ({ w }) => {
  const body = worstCaseSendBody(w.domain, w.domain).toString('utf8');
  const id = await admitted(w, body);
  const detail = await detailOf(w, id);
  assert.equal(detail.metadata, JSON.parse(body).metadata);
});

test('metadata one step past a limit is 400 naming the field and the limit (direct and template sends)', async ({ w, slug }) => {
  const over: Array<[string, unknown, string, RegExp]> = [
    ['11 levels', nested(11), 'body.metadata.a.a.a.a.a.a.a.a.a.a', /nests at most 10 levels/],
    ['11 levels of arrays', { a: [[[[[[[[[[1]]]]]]]]]] }, 'body.metadata.a[0][0][0][0][0][0][0][0][0]', /nests at most 10 levels/],
    ['1,001 keys at the top', Object.fromEntries(Array.from({ length: 1_001 }, (_, i) => [`k${i}`, i])), 'body.metadata', /at most 1,000 keys/],
    ['1,001 members nested', { a: Array.from({ length: 999 }, () => 0), b: { c: 1 } }, 'body.metadata', /at most 1,000 keys in all/],
    ['65,537 bytes', metadataOfBytes(METADATA_LIMITS.bytes + 1), 'body.metadata', /at most 65,536 bytes as JSON/],
    ['a string of 2,049 characters', { note: 'n'.repeat(METADATA_LIMITS.stringLength + 1) }, 'body.metadata.note', /at most 2,048 characters/],
    ['a key of 257 characters', { [`k${'x'.repeat(METADATA_LIMITS.keyLength)}`]: 1 }, `body.metadata.k${'x'.repeat(63)}…`, /keys are at most 256 characters/],
    ['an integer past 2^53 - 1', { id: 9007199254740992 }, 'body.metadata.id', /kept exactly only up to ±9,007,199,254,740,991/],
    ['a negative one', { list: [1, -9007199254740993] }, 'body.metadata.list[1]', /kept exactly/],
  ];
  for (const [label, metadata, field, says] of over) {
    try {
      refused(await send(w, direct(w, { metadata })), field, says);
      refused(await send(w, templated(w, slug, { metadata })), field, says);
    } catch (error) {
      throw new Error(`${label}: ${(error as Error).message}`);
    }
  }
});

test('metadata numbers JSON.parse changes are refused, not stored changed: 1e400 (was stored as null), 30-digit integers (were rounded)', async ({ w, slug }) => {
  const cases: Array<[string, string, RegExp]> = [
    // (the domain's "must be finite", or, once the route's parser checks numbers in the raw text, its "cannot be kept exactly")
    ['{"big":1e400}', 'body.metadata.big', /numbers must be finite|cannot be kept exactly/],
    ['{"list":[-1e999]}', 'body.metadata.list[0]', /numbers must be finite|cannot be kept exactly/],
    ['{"id":123456789012345678901234567890}', 'body.metadata.id', /kept exactly/],
    ['{"deep":{"id":1e20}}', 'body.metadata.deep.id', /kept exactly/],
  ];
  for (const [metadata, field, says] of cases) {
    const body = JSON.stringify(direct(w, { metadata: '@' })).replace('"@"', metadata);
    refused(await send(w, body), field, says);
    refused(await send(w, JSON.stringify(templated(w, slug, { metadata: '@' })).replace('"@"', metadata)), field, says);
  }
  const id = await admitted(w, JSON.stringify(direct(w, { metadata: '@' })).replace('"@"', '{"safe":9007199254740991,"f":1.5e-7,"z":-0.0,"e":1e2}'));
  assert.equal((await detailOf(w, id)).metadata, { safe: 9007199254740991, f: 1.5e-7, z: 0, e: 100 });
});

test('custom headers: 50 within 16,384 characters are admitted; the 51st, a 129-character name or more in all is 400', async ({ w, slug }) => {
  const fifty = Object.fromEntries(Array.from({ length: MAX_HEADERS }, (_, i) => [`X-H${String(i).padStart(2, '0')}`, 'v'.repeat(300)]));
  assert.ok(Object.entries(fifty).reduce((n, [k, v]) => n + k.length + v.length, 0) <= MAX_HEADERS_TOTAL_LENGTH);
  await admitted(w, direct(w, { headers: fifty }));
  await admitted(w, templated(w, slug, { headers: fifty }));
  const cases: Array<[Record<string, string>, string, RegExp]> = [
    [{ ...fifty, 'X-One-More': 'x' }, 'body.headers', /at most 50 headers/],
    [{ [`X-${'n'.repeat(127)}`]: 'x' }, `body.headers.X-${'n'.repeat(62)}…`, /header names are at most 128 characters/],
    [Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`X-Big-${i}`, 'b'.repeat(998)])), 'body.headers', /at most 16,384 characters in all/],
  ];
  for (const [headers, field, says] of cases) {
    refused(await send(w, direct(w, { headers })), field, says);
    refused(await send(w, templated(w, slug, { headers })), field, says);
  }
});

/** Every character the header rule refuses (CR and LF have their own message and tests). */
const REFUSED: number[] = [
  ...Array.from({ length: 0x20 }, (_, i) => i).filter((c) => c !== 0x09 && c !== 0x0a && c !== 0x0d),
  0x7f, ...Array.from({ length: 0x20 }, (_, i) => 0x80 + i),
  0x2028, 0x2029, 0xd800, 0xdbff, 0xdc00, 0xdfff, 0xfeff, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069,
];
const hex = (c: number) => `U+${c.toString(16).toUpperCase().padStart(4, '0')}`;

test('every refused character, in every header-bound field of a direct send, is 400 naming the field and the character', async ({ w }) => {
  const d = w.domain;
  for (const code of REFUSED) {
    const c = String.fromCharCode(code);
    const fields: Array<[Record<string, unknown>, string]> = [
      [{ from: `Ac${c}me <app@${d}>` }, 'body.from'],
      [{ from: `app${c}x@${d}` }, 'body.from'],
      [{ to: [`ann@${d}`, `"Bo${c}b" <bob@${d}>`] }, 'body.to[1]'],
      [{ cc: `Carol${c} <carol@${d}>` }, 'body.cc'],
      [{ bcc: [`${c}Dan <dan@${d}>`] }, 'body.bcc[0]'],
      [{ reply_to: `Support <sup${c}port@${d}>` }, 'body.reply_to'],
      [{ subject: `Hello ${c} there` }, 'body.subject'],
      [{ headers: { 'X-Note': `a${c}b` } }, 'body.headers.X-Note'],
    ];
    for (const [extra, field] of fields) refused(await send(w, direct(w, extra)), field, new RegExp(`must not contain ${escape(hex(code))} \\(`));
  }
});

test('the same characters in a template send\'s envelope and headers are 400; brought into the rendered subject by a variable, 422 naming it', async ({ w, slug }) => {
  const d = w.domain;
  for (const code of REFUSED) {
    const c = String.fromCharCode(code);
    refused(await send(w, templated(w, slug, { to: `Ann${c} <ann@${d}>` })), 'body.to', new RegExp(escape(hex(code))));
    refused(await send(w, templated(w, slug, { headers: { 'X-Note': c } })), 'body.headers.X-Note', new RegExp(escape(hex(code))));
    refused(
      await send(w, templated(w, slug, { variables: { topic: `spring${c}sale`, note: '' } })),
      'body.variables.topic', new RegExp(`the rendered subject must not contain ${escape(hex(code))}`), 422, 'invalid_template_variables',
    );
  }
  // Only the subject is a header: the same value in the text body alone is fine.
  await admitted(w, templated(w, slug, { variables: { topic: 'spring', note: 'col1\u0000col2\u202Eend' } }));
});

test('a template subject, as written or previewed, with a refused character is 400; a variable bringing one into a preview is 422', async ({ w }) => {
  for (const code of [0x00, 0x1b, 0x7f, 0x85, 0x2028, 0xd800, 0xfeff, 0x202e, 0x2066]) {
    const c = String.fromCharCode(code);
    const created = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'Bad', slug: `bad-${code}`, subject: `Hi${c} {{name}}`, text: 'x' } });
    refused(created, 'body.subject', new RegExp(escape(hex(code))));
    const preview = await templates(w.t, 'POST', '/v1/templates/preview', { as: w.owner, projectId: w.projectId, body: { subject: `Hi${c}`, text: 'x' } });
    refused(preview, 'body.subject', new RegExp(escape(hex(code))));
    const rendered = await templates(w.t, 'POST', '/v1/templates/preview', { as: w.owner, projectId: w.projectId, body: { subject: 'Hi {{name}}', text: 'x', variables: { name: `A${c}` } } });
    refused(rendered, 'body.variables.name', new RegExp(`the rendered subject must not contain ${escape(hex(code))}`), 422, 'invalid_template_variables');
  }
});

test('TAB and ordinary Unicode stay allowed in header fields: right-to-left text, marks, emoji, accents', async ({ w, slug }) => {
  const d = w.domain;
  const id = await admitted(w, direct(w, {
    from: `"Bücher\tund Co" <app@${d}>`,
    to: [`שלום עליכם <ann@${d}>`, `\u200FRLM\u200E <rlm@${d}>`],
    subject: 'Tab\there \u{1F468}\u200D\u{1F469}\u200D\u{1F467} مرحبا e\u0301',
    headers: { 'X-Note': 'a\tb ✓' },
  }));
  const detail = await detailOf(w, id);
  assert.is(detail.subject, 'Tab\there \u{1F468}\u200D\u{1F469}\u200D\u{1F467} مرحبا e\u0301');
  await admitted(w, templated(w, slug, { variables: { topic: 'naïve\t\u{1F600} עברית', note: '' } }));
});

test.run();
