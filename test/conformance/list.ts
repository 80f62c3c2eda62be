// Spec: GET /v1/emails — scope (email:read: the project; email:send: the key's own emails),
// newest first, filters sender (exact), domain (exact, subdomains excluded), after
// (inclusive), before (exclusive), status, recipient (exact normalized To address only);
// limit 1 to 100, default 50; cursor = an email id of the key's scope (404 otherwise);
// next_cursor null at the end; EmailSummary fields; no BCC or bodies.
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { STATUSES } from '../../domain/email/status.ts';
import { basicSend, expectAccepted, expectError, sendMany, type Harness, type HarnessRef, type Key, type Tenant } from './harness.ts';
import { addressOfLength } from './mailbox.ts';

interface Page { emails: Array<Record<string, any>>; next_cursor: string | null }

async function list(h: Harness, key: Key, query = ''): Promise<Page> {
  const response = await h.request('GET', `/v1/emails${query ? `?${query}` : ''}`, { key: key.secret });
  assert.is(response.statusCode, 200, response.body);
  return response.json();
}

/** Every page, following next_cursor until null. */
async function all(h: Harness, key: Key, query: string, limit: number, between?: () => Promise<void>): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: Page = await list(h, key, [query, `limit=${limit}`, cursor ? `cursor=${cursor}` : ''].filter(Boolean).join('&'));
    assert.ok(page.emails.length <= limit);
    ids.push(...page.emails.map((e) => e.id));
    cursor = page.next_cursor;
    pages++;
    if (cursor) assert.is(cursor, page.emails[page.emails.length - 1].id);
    await between?.();
  } while (cursor);
  return { ids, pages };
}

const ids = (page: Page) => page.emails.map((e) => e.id);

export function listSuite(test: Test, ref: HarnessRef): void {
  test('newest first, each item exactly the EmailSummary fields, without BCC or bodies', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = await sendMany(h, t, 3, (i) => ({ to: [t.to(`to${i}`)], cc: t.to('cc'), bcc: t.to('hidden-bcc'), html: '<p>SECRET-HTML</p>', text: 'SECRET-TEXT' }));
    await h.projected(sent);
    const response = await h.request('GET', '/v1/emails', { key: t.key.secret });
    const page: Page = response.json();
    assert.equal(ids(page), [...sent].reverse());
    assert.is(page.next_cursor, null);
    for (const item of page.emails) {
      assert.equal(Object.keys(item).sort(), ['createdAt', 'failureCode', 'fromAddress', 'id', 'sentAt', 'status', 'subject', 'testMode', 'toAddresses']);
      assert.type(item.fromAddress, 'string');
      assert.ok(Array.isArray(item.toAddresses) && item.toAddresses.every((a: unknown) => typeof a === 'string'));
      assert.is(item.status, 'queued');
      assert.is(item.testMode, false);
      assert.is(item.failureCode, null);
      assert.is(item.sentAt, null);
      assert.ok(!Number.isNaN(Date.parse(item.createdAt)));
    }
    assert.equal(page.emails[2].toAddresses, [t.to('to0')]);
    for (const secret of ['hidden-bcc', 'SECRET-HTML', 'SECRET-TEXT']) assert.not.ok(response.body.includes(secret), `${secret} is not in the list`);
  });

  test('limit: default 50; 1 and 100 accepted; 0, 101 and non-integers are validation_errors', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = await sendMany(h, t, 101);
    await h.projected(sent);
    const byDefault = await list(h, t.key);
    assert.is(byDefault.emails.length, 50);
    assert.equal(ids(byDefault), sent.slice(-50).reverse());
    assert.is(byDefault.next_cursor, sent[sent.length - 50]);
    assert.is((await list(h, t.key, 'limit=1')).emails.length, 1);
    const hundred = await list(h, t.key, 'limit=100');
    assert.is(hundred.emails.length, 100);
    assert.ok(hundred.next_cursor);
    const rest = await list(h, t.key, `limit=100&cursor=${hundred.next_cursor}`);
    assert.equal(ids(rest), [sent[0]]);
    assert.is(rest.next_cursor, null);
    for (const limit of ['0', '101', '1.5', '1e1', '+5', 'ten', '-1', '']) {
      expectError(await h.request('GET', `/v1/emails?limit=${limit}`, { key: t.key.secret }), 400, 'validation_error', 'limit');
    }
  });

  test('cursor paging visits every email exactly once; next_cursor is null at the end, also after a full last page', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = await sendMany(h, t, 20);
    await h.projected(sent);
    const byFive = await all(h, t.key, '', 5);
    assert.equal(byFive.ids, [...sent].reverse());
    assert.is(byFive.pages, 4, 'a full last page ends with next_cursor null');
    const bySeven = await all(h, t.key, '', 7);
    assert.equal(bySeven.ids, [...sent].reverse());
    assert.is(bySeven.pages, 3);
  });

  test('emails with the same creation time are ordered and paged without loss', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent: string[] = [];
    for (let i = 0; i < 12; i++) sent.push(expectAccepted(await h.send(t.key, basicSend(t, { subject: `same ${i}` }))).id);
    await h.projected(sent);
    const paged = await all(h, t.key, '', 5);
    assert.equal([...paged.ids].sort(), [...sent].sort());
    assert.is(new Set(paged.ids).size, 12);
  });

  test('paging is stable while emails are inserted: nothing skipped or repeated', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const before = await sendMany(h, t, 30);
    await h.projected(before);
    const inserted: string[] = [];
    const paged = await all(h, t.key, '', 7, async () => {
      inserted.push(...(await sendMany(h, t, 4)));
      await h.projected(inserted);
    });
    assert.equal(paged.ids, [...before].reverse(), 'exactly the emails that existed when paging began, in order');
    const again = await all(h, t.key, '', 100);
    assert.equal(again.ids, [...before, ...inserted].reverse());
  });

  test('a cursor outside the key\'s scope is 404; a malformed one is 400', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const stranger = await h.tenant();
    const theirs = expectAccepted(await h.send(stranger.key, basicSend(stranger))).id;
    const mine = expectAccepted(await h.send(t.key, basicSend(t))).id;
    await h.projected([theirs, mine]);
    assert.is((await list(h, t.key, `cursor=${mine}`)).next_cursor, null);
    expectError(await h.request('GET', `/v1/emails?cursor=${theirs}`, { key: t.key.secret }), 404, 'not_found');
    expectError(await h.request('GET', '/v1/emails?cursor=em_AAAAAAAAAAAAAAAAAAAA', { key: t.key.secret }), 404, 'not_found');
    for (const cursor of ['bad!cursor', 'c'.repeat(65), 'a%20b', '']) {
      expectError(await h.request('GET', `/v1/emails?cursor=${cursor}`, { key: t.key.secret }), 400, 'validation_error', 'cursor');
    }
  });

  test('scope: an email:read key lists the project; an email:send key only the emails it created', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sender = await t.newKey(['email:send']);
    const reader = await t.newKey(['email:read']);
    const stranger = await h.tenant();
    const byMain = await sendMany(h, t, 3);
    const bySender = await sendMany(h, t, 2, () => ({}), sender);
    const strangers = await sendMany(h, stranger, 2);
    await h.projected([...byMain, ...bySender, ...strangers]);
    assert.equal((await all(h, reader, '', 100)).ids, [...byMain, ...bySender].reverse());
    assert.equal((await all(h, t.key, '', 100)).ids, [...byMain, ...bySender].reverse(), 'a key with both permissions reads the project');
    assert.equal((await all(h, sender, '', 100)).ids, [...bySender].reverse());
    expectError(await h.request('GET', `/v1/emails?cursor=${byMain[0]}`, { key: sender.secret }), 404, 'not_found');
  });

  test('filters: sender and domain are exact; subdomains are excluded', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    await t.addDomain(`sub.${t.domain}`);
    const a = await sendMany(h, t, 2, () => ({ from: `Alice <alice@${t.domain}>` }));
    const b = await sendMany(h, t, 2, () => ({ from: `bob@${t.domain}` }));
    const sub = await sendMany(h, t, 2, () => ({ from: `alice@sub.${t.domain}` }));
    await h.projected([...a, ...b, ...sub]);
    assert.equal(ids(await list(h, t.key, `sender=alice@${t.domain}`)), [...a].reverse());
    assert.equal(ids(await list(h, t.key, `sender=ALICE@${t.domain}`)), [...a].reverse());
    assert.equal(ids(await list(h, t.key, `sender=lice@${t.domain}`)), []);
    assert.equal(ids(await list(h, t.key, `domain=${t.domain}`)), [...a, ...b].reverse());
    assert.equal(ids(await list(h, t.key, `domain=sub.${t.domain}`)), [...sub].reverse());
    assert.equal(ids(await list(h, t.key, `domain=${t.domain.split('.').slice(1).join('.')}`)), []);
  });

  test('filters: after is inclusive, before is exclusive', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = await sendMany(h, t, 5);
    await h.projected(sent);
    const created = new Map((await list(h, t.key)).emails.map((e) => [e.id, e.createdAt as string]));
    const at = created.get(sent[2])!;
    assert.equal(ids(await list(h, t.key, `after=${at}`)), [sent[4], sent[3], sent[2]]);
    assert.equal(ids(await list(h, t.key, `before=${at}`)), [sent[1], sent[0]]);
    assert.equal(ids(await list(h, t.key, `after=${created.get(sent[1])}&before=${created.get(sent[3])}`)), [sent[2], sent[1]]);
    // Any offset names the same instant.
    const shifted = new Date(Date.parse(at)).toISOString().replace('Z', '+00:00');
    assert.equal(ids(await list(h, t.key, `after=${encodeURIComponent(shifted)}`)), [sent[4], sent[3], sent[2]]);
    for (const query of ['after=yesterday', 'before=2026-13-01T00:00:00Z', 'after=2026-01-01']) {
      expectError(await h.request('GET', `/v1/emails?${query}`, { key: t.key.secret }), 400, 'validation_error', query.split('=')[0]);
    }
  });

  test('filters: after and before between two milliseconds bound at the exact instant, not at the millisecond before', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sent = await sendMany(h, t, 3);
    await h.projected(sent);
    const created = new Map((await list(h, t.key)).emails.map((e) => [e.id, e.createdAt as string]));
    const at = created.get(sent[1])!;
    assert.match(at, /\.\d{3}Z$/);
    const justAfter = encodeURIComponent(at.replace('Z', '0001Z'));
    const justAfterOffset = encodeURIComponent(new Date(Date.parse(at)).toISOString().replace('Z', '0000001+00:00'));
    const exact = encodeURIComponent(at.replace('Z', '000000Z'));
    // sent[1] was created before "at + 0.1 µs": after excludes it, before includes it.
    assert.equal(ids(await list(h, t.key, `after=${justAfter}`)), [sent[2]]);
    assert.equal(ids(await list(h, t.key, `after=${justAfterOffset}`)), [sent[2]]);
    assert.equal(ids(await list(h, t.key, `before=${justAfter}`)), [sent[1], sent[0]]);
    // Trailing zeros name the same instant.
    assert.equal(ids(await list(h, t.key, `after=${exact}`)), [sent[2], sent[1]]);
    assert.equal(ids(await list(h, t.key, `before=${exact}`)), [sent[0]]);
  });

  test('filters: status, and recipient matches the normalized To address only (not CC, not BCC)', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const x = t.to('xavier');
    await t.suppress(t.to('blocked'));
    const [toX] = await sendMany(h, t, 1, () => ({ to: [`Xavier <${x.toUpperCase()}>`, t.to('other')] }));
    const [ccX] = await sendMany(h, t, 1, () => ({ cc: x }));
    const [bccX] = await sendMany(h, t, 1, () => ({ bcc: x }));
    h.clock.advance(10);
    const suppressed = expectAccepted(await h.send(t.key, basicSend(t, { to: t.to('blocked') })), 'suppressed').id;
    await h.projected([toX, ccX, bccX, suppressed]);
    assert.equal(ids(await list(h, t.key, `recipient=${x}`)), [toX]);
    assert.equal(ids(await list(h, t.key, `recipient=${encodeURIComponent(x.toUpperCase())}`)), [toX]);
    assert.equal(ids(await list(h, t.key, `recipient=avier@${t.domain}`)), []);
    assert.equal(ids(await list(h, t.key, 'status=suppressed')), [suppressed]);
    assert.equal(ids(await list(h, t.key, 'status=queued')), [bccX, ccX, toX]);
    assert.equal(ids(await list(h, t.key, 'status=delivered')), []);
    assert.equal(ids(await list(h, t.key, `status=queued&recipient=${t.to('other')}`)), [toX]);
    expectError(await h.request('GET', '/v1/emails?status=bogus', { key: t.key.secret }), 400, 'validation_error', 'status');
    expectError(await h.request('GET', `/v1/emails?recipient=${'r'.repeat(255)}`, { key: t.key.secret }), 400, 'validation_error', 'recipient');
    expectError(await h.request('GET', '/v1/emails?unknown=1', { key: t.key.secret }), 400, 'validation_error', 'unknown');
  });

  test('filters: every Status value is accepted; recipient up to 254 characters; sender and domain take any string', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const long = addressOfLength(254);
    const [toLong] = await sendMany(h, t, 1, () => ({ to: long }));
    await h.projected([toLong]);
    for (const status of STATUSES) {
      assert.equal(ids(await list(h, t.key, `status=${status}`)), status === 'queued' ? [toLong] : [], status);
    }
    assert.equal(ids(await list(h, t.key, `recipient=${long}`)), [toLong]);
    expectError(await h.request('GET', `/v1/emails?recipient=${addressOfLength(255)}`, { key: t.key.secret }), 400, 'validation_error', 'recipient');
    // The spec limits neither sender nor domain: what cannot be one matches nothing.
    for (const query of [`sender=${'s'.repeat(300)}`, `domain=${'d'.repeat(300)}`, 'sender=', 'domain=', 'sender=not%20an%20address']) {
      assert.equal(ids(await list(h, t.key, query)), [], query);
    }
    assert.equal(ids(await list(h, t.key, `domain=${t.domain.toUpperCase()}`)), [toLong], 'domains compare case-insensitively');
  });

  test('filters combine with paging', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const mixed = await sendMany(h, t, 12, (i) => ({ from: i % 2 ? `odd@${t.domain}` : `even@${t.domain}` }));
    await h.projected(mixed);
    const odd = mixed.filter((_, i) => i % 2);
    assert.equal((await all(h, t.key, `sender=odd@${t.domain}`, 4)).ids, [...odd].reverse());
  });
}

export type { Tenant };
