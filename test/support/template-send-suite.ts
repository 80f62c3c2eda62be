// Template sends through POST /v1/emails, registered once per mode
// (test/template-send.int.test.ts embedded, test/templates.distributed.int.test.ts distributed).
import * as assert from 'uvu/assert';
import { openContent } from '../../apps/services/content-vault.ts';
import { readEmailStream } from '../../apps/services/email-stream.ts';
import type { AdmittedMessage } from '../../domain/email/events.ts';
import { call, errorCode } from './management.ts';
import { skippableSuite } from './skippable-suite.ts';
import { createTemplateAs, sendEmail, templates, templateWorld, type Mode, type TemplateWorld } from './templates.ts';

type Response = Parameters<typeof errorCode>[0];

const expectError = (r: Response, status: number, code: string, pattern?: RegExp) => {
  assert.is(r.statusCode, status, r.body);
  assert.is(errorCode(r), code, r.body);
  if (pattern) assert.match(r.json().error.message, pattern);
};

/**
 * POST /v1/emails a minute after the previous request: a development key admits 15 requests
 * per 60-second window, and these tests are about templates, not about that limit.
 */
function post(w: TemplateWorld, apiKey: string, body: unknown, headers: Record<string, string> = {}) {
  w.t.clock.advance(61_000);
  return sendEmail(w.t, apiKey, body, headers);
}

/** What the event store keeps of an admitted email, with its sealed bodies opened. */
async function admitted(w: TemplateWorld, emailId: string) {
  const events = await readEmailStream(w.t.ctx.events, emailId);
  assert.ok(events.length >= 1, `email ${emailId} has events`);
  const data = events[0].data as AdmittedMessage;
  const content = await openContent(w.t.ctx.documents, w.t.ctx.services.secrets, data.content, w.t.ctx.now());
  assert.ok(content, 'the sealed content opens');
  return { events, type: events[0].type, data, html: content!.html, text: content!.text, bcc: content!.bcc };
}

export function templateSendSuite(mode: Mode, skipReason?: string): void {
  const test = skippableSuite<{ w: TemplateWorld }>(`template sends (${mode})`, skipReason);

  test.before(async (ctx) => {
    ctx.w = await templateWorld(mode);
  });
  test.after(async (ctx) => {
    await ctx.w?.t.close();
  });

  let n = 0;
  const slug = (base = 'send') => `${base}-${++n}`;
  const envelope = (w: TemplateWorld) => ({ from: `Acme <hello@${w.domain}>`, to: `ann@${w.domain}` });

  test('a template send is rendered at admission: the accepted event carries the rendered subject, html and text and the template id and revision', async ({ w }) => {
    const t = await createTemplateAs(w, {
      slug: slug('welcome'),
      subject: 'Welcome {{name}}',
      html: '<h1>Hi {{name}}</h1><script>steal()</script><a href="{{link}}" onclick="x()">start</a>',
      text: 'Hi {{name}}, start at {{link}}',
    });
    const body = { ...envelope(w), bcc: `boss@${w.domain}`, template: t.slug, variables: { name: 'Ann & <Bob>', link: 'javascript:alert(1)' }, tags: { kind: 'welcome' }, metadata: { userId: 7 } };
    const response = await post(w, w.apiKey, body);
    assert.is(response.statusCode, 202, response.body);
    const result = response.json();
    assert.equal(Object.keys(result).sort(), ['id', 'status', 'test_mode']);
    assert.is(result.status, 'queued');
    assert.is(result.test_mode, true);
    const email = await admitted(w, result.id);
    assert.is(email.type, 'EmailAccepted');
    assert.is(email.data.subject, 'Welcome Ann & <Bob>', 'the subject is plain text');
    assert.equal(email.data.template, { id: t.id, slug: t.slug, revision: 1 });
    assert.is(email.html, '<h1>Hi Ann &amp; &lt;Bob&gt;</h1><a>start</a>', 'escaped values, sanitized html');
    assert.is(email.text, 'Hi Ann & <Bob>, start at javascript:alert(1)', 'text is plain');
    assert.equal(email.bcc, [`boss@${w.domain}`]);
    assert.equal(email.data.tags, { kind: 'welcome' });
    assert.equal(email.data.metadata, { userId: 7 });
    assert.equal(email.data.toAddresses, [`ann@${w.domain}`]);
    const detail = await w.t.app.inject({ method: 'GET', url: `/v1/emails/${result.id}`, headers: { authorization: `Bearer ${w.apiKey}` } });
    assert.is(detail.statusCode, 200, detail.body);
    assert.is(detail.json().subject, 'Welcome Ann & <Bob>');
    assert.not.ok(detail.body.includes('Hi Ann'), 'bodies never appear in the detail');
  });

  test('an MJML template is sent as responsive HTML with the variables merged and scripts removed', async ({ w }) => {
    const t = await createTemplateAs(w, {
      slug: slug('mjml'),
      subject: 'Order {{order}}',
      html: '<mjml><mj-body><mj-section><mj-column><mj-text>Order {{order}} for {{name}}</mj-text><mj-raw><script>x()</script></mj-raw></mj-column></mj-section></mj-body></mjml>',
    });
    assert.equal(t.variables, ['name', 'order']);
    const sourcesBefore = w.t.ctx.services.templates.sourcesGiven;
    const response = await post(w, w.apiKey, { ...envelope(w), template: t.slug, variables: { order: 1042, name: 'Ann' } });
    assert.is(response.statusCode, 202, response.body);
    const again = await post(w, w.apiKey, { ...envelope(w), template: t.slug, variables: { order: 1043, name: 'Bob' } });
    assert.is(again.statusCode, 202, again.body);
    assert.is(w.t.ctx.services.templates.sourcesGiven, sourcesBefore + 1, 'the rendering thread compiles the revision once, for the first send');
    assert.match((await admitted(w, again.json().id)).html!, /Order 1043 for Bob/);
    const email = await admitted(w, response.json().id);
    assert.is(email.data.subject, 'Order 1042');
    assert.match(email.html!, /^<!doctype html>/i);
    assert.match(email.html!, /@media only screen/);
    assert.match(email.html!, /Order 1042 for Ann/);
    assert.not.match(email.html!, /<script/i);
    assert.is(email.text, null);
  });

  test('the slug must name a template of the key\'s project: 404 otherwise', async ({ w }) => {
    const theirs = await createTemplateAs(w, { slug: slug('other-project'), subject: 's', text: 't' }, w.owner, w.otherProjectId);
    expectError(await post(w, w.apiKey, { ...envelope(w), template: 'no-such-template' }), 404, 'not_found', /no-such-template/);
    expectError(await post(w, w.apiKey, { ...envelope(w), template: theirs.slug }), 404, 'not_found');
    const own = await post(w, w.otherApiKey, { ...envelope(w), template: theirs.slug });
    assert.is(own.statusCode, 202, own.body);
    const deleted = await createTemplateAs(w, { slug: slug('deleted'), subject: 's', text: 't' });
    await templates(w.t, 'DELETE', `/v1/templates/${deleted.id}`, { as: w.owner, projectId: w.projectId });
    expectError(await post(w, w.apiKey, { ...envelope(w), template: deleted.slug }), 404, 'not_found');
  });

  test('variables follow TemplateVariables at their boundaries, else 422; a used variable left out is 422 naming it', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('vars'), subject: 'Hi {{name}}', text: '{{#if vip}}VIP {{/if}}{{note}} {{count}}' });
    const send = (variables: unknown) => post(w, w.apiKey, { ...envelope(w), template: t.slug, ...(variables === undefined ? {} : { variables }) });
    const base = { name: 'Ann', vip: true, count: 2, note: 'n' };
    const ok = await send({ ...base, note: 'x'.repeat(10_000) });
    assert.is(ok.statusCode, 202, ok.body);
    assert.is((await admitted(w, ok.json().id)).text, `VIP ${'x'.repeat(10_000)} 2`);
    expectError(await send({ ...base, note: 'x'.repeat(10_001) }), 422, 'invalid_template_variables', /body\.variables\.note/);
    const emoji = await send({ ...base, note: '🎉'.repeat(10_000) });
    assert.is(emoji.statusCode, 202, 'characters, not UTF-16 units');
    expectError(await send({ ...base, note: '🎉'.repeat(10_001) }), 422, 'invalid_template_variables', /body\.variables\.note/);
    expectError(await send({ vip: true, count: 2, note: 'n' }), 422, 'invalid_template_variables', /body\.variables\.name: .*\bname\b/);
    expectError(await send({ name: 'Ann', count: 2, note: 'n' }), 422, 'invalid_template_variables', /body\.variables\.vip/);
    expectError(await send(undefined), 422, 'invalid_template_variables', /body\.variables\./);
    const filler = Object.fromEntries(Array.from({ length: 96 }, (_, i) => [`extra${i}`, i]));
    assert.is((await send({ ...base, ...filler })).statusCode, 202, '100 variables');
    expectError(await send({ ...base, ...filler, oneMore: 1 }), 422, 'invalid_template_variables', /at most 100/);
    const name64 = `v${'x'.repeat(63)}`;
    assert.is((await send({ ...base, [name64]: 'ok' })).statusCode, 202, 'a 64-character name');
    expectError(await send({ ...base, [`${name64}x`]: 'no' }), 422, 'invalid_template_variables');
    expectError(await send({ ...base, '9lives': 1 }), 422, 'invalid_template_variables', /body\.variables\.9lives/);
    for (const value of [null, { a: 1 }, [1]]) expectError(await send({ ...base, note: value }), 422, 'invalid_template_variables', /body\.variables\.note/);
    for (const variables of [[], 'name=Ann', 5, null]) expectError(await send(variables), 422, 'invalid_template_variables', /body\.variables/);
    const typed = await send({ name: 0, vip: false, count: -1.5, note: true });
    assert.is(typed.statusCode, 202, typed.body);
    const email = await admitted(w, typed.json().id);
    assert.is(email.data.subject, 'Hi 0');
    assert.is(email.text, 'true -1.5');
  });

  test('a rendered subject containing CR or LF is refused (422) and nothing is admitted', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('subject'), subject: 'Re: {{topic}}', text: 't' });
    for (const topic of ['x\r\nBcc: victim@example.test', 'x\ny', 'x\ry']) {
      expectError(await post(w, w.apiKey, { ...envelope(w), template: t.slug, variables: { topic } }, { 'idempotency-key': `crlf-${topic.length}` }), 422, 'invalid_template_variables', /body\.variables\.topic: .*CR or LF/);
    }
    const retry = await post(w, w.apiKey, { ...envelope(w), template: t.slug, variables: { topic: 'fine' } }, { 'idempotency-key': 'crlf-26' });
    assert.is(retry.statusCode, 202, 'a refused request admitted nothing under its key');
    // The rendered subject is held to 1 to 998 characters (emoji count one each).
    const full = await post(w, w.apiKey, { ...envelope(w), template: t.slug, variables: { topic: '📧'.repeat(994) } });
    assert.is(full.statusCode, 202, full.body);
    assert.is((await admitted(w, full.json().id)).data.subject, `Re: ${'📧'.repeat(994)}`);
    expectError(await post(w, w.apiKey, { ...envelope(w), template: t.slug, variables: { topic: '📧'.repeat(995) } }), 422, 'invalid_template_variables', /subject must be 1 to 998/);
  });

  test('a rendering with neither html nor text is refused (422): there would be nothing to send', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('empty'), subject: 'Hi', text: '{{note}}' });
    expectError(await post(w, w.apiKey, { ...envelope(w), template: t.slug, variables: { note: '' } }), 422, 'invalid_template_variables', /neither html nor text/);
    assert.is((await post(w, w.apiKey, { ...envelope(w), template: t.slug, variables: { note: '.' } })).statusCode, 202);
  });

  test('editing the template after sending leaves the sent email unchanged; the next send uses the new revision', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('edited'), subject: 'Old {{name}}', html: '<p>old {{name}}</p>', text: 'old {{name}}' });
    const first = await post(w, w.apiKey, { ...envelope(w), template: t.slug, variables: { name: 'Ann' } });
    assert.is(first.statusCode, 202, first.body);
    const before = await admitted(w, first.json().id);
    const patched = await templates(w.t, 'PATCH', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId, body: { name: 'n', slug: t.slug, subject: 'New {{name}}', html: '<p>new {{name}}</p>', text: 'new {{name}}', revision: 1 } });
    assert.is(patched.statusCode, 200, patched.body);
    const after = await admitted(w, first.json().id);
    assert.is(after.data.subject, 'Old Ann');
    assert.is(after.html, '<p>old Ann</p>');
    assert.is(after.text, 'old Ann');
    assert.equal(after.data.template, { id: t.id, slug: t.slug, revision: 1 });
    assert.equal(after.data, before.data);
    const detail = await w.t.app.inject({ method: 'GET', url: `/v1/emails/${first.json().id}`, headers: { authorization: `Bearer ${w.apiKey}` } });
    assert.is(detail.json().subject, 'Old Ann');
    const second = await post(w, w.apiKey, { ...envelope(w), template: t.slug, variables: { name: 'Bob' } });
    const next = await admitted(w, second.json().id);
    assert.is(next.data.subject, 'New Bob', 'no stale compiled template');
    assert.is(next.html, '<p>new Bob</p>');
    assert.equal(next.data.template, { id: t.id, slug: t.slug, revision: 2 });
  });

  test('deleting the template after sending leaves the sent email readable and unchanged', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('short-lived'), subject: 'Hello {{name}}', text: 'body {{name}}' });
    const sent = await post(w, w.apiKey, { ...envelope(w), template: t.slug, variables: { name: 'Ann' } });
    assert.is(sent.statusCode, 202);
    await templates(w.t, 'DELETE', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId });
    const email = await admitted(w, sent.json().id);
    assert.is(email.data.subject, 'Hello Ann');
    assert.is(email.text, 'body Ann');
    assert.equal(email.data.template, { id: t.id, slug: t.slug, revision: 1 });
    const detail = await w.t.app.inject({ method: 'GET', url: `/v1/emails/${sent.json().id}`, headers: { authorization: `Bearer ${w.apiKey}` } });
    assert.is(detail.statusCode, 200);
    assert.is(detail.json().subject, 'Hello Ann');
  });

  test('idempotency: the fingerprint covers the template send body, not its rendering', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('idem'), subject: 'v1 {{name}}', text: 'v1 {{name}}' });
    const body = { ...envelope(w), template: t.slug, variables: { name: 'Ann' } };
    const key = { 'idempotency-key': `idem-${t.id}` };
    const first = await post(w, w.apiKey, body, key);
    assert.is(first.statusCode, 202, first.body);
    const id = first.json().id;
    // Same body with its keys in another order: the same request.
    const reordered = await post(w, w.apiKey, { variables: { name: 'Ann' }, template: t.slug, to: body.to, from: body.from }, key);
    assert.equal(reordered.json(), first.json());
    // The template changes: the rendering would differ, the request does not. A replay.
    await templates(w.t, 'PATCH', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId, body: { name: 'n', slug: t.slug, subject: 'v2 {{name}}', text: 'v2 {{name}}', revision: 1 } });
    const afterEdit = await post(w, w.apiKey, body, key);
    assert.is(afterEdit.statusCode, 202, afterEdit.body);
    assert.equal(afterEdit.json(), first.json());
    // Even with the template gone, a retry answers with the original result.
    await templates(w.t, 'DELETE', `/v1/templates/${t.id}`, { as: w.owner, projectId: w.projectId });
    const afterDelete = await post(w, w.apiKey, body, key);
    assert.is(afterDelete.statusCode, 202, afterDelete.body);
    assert.equal(afterDelete.json(), first.json());
    const email = await admitted(w, id);
    assert.is(email.events.length, 1, 'one admission');
    assert.is(email.data.subject, 'v1 Ann');
    // Another body under the same key is a conflict, whatever the template says.
    expectError(await post(w, w.apiKey, { ...body, variables: { name: 'Bob' } }, key), 409, 'idempotency_conflict');
    expectError(await post(w, w.apiKey, { ...envelope(w), subject: 'v1 Ann', text: 'v1 Ann' }, key), 409, 'idempotency_conflict');
  });

  test('concurrent retries of one template send with one Idempotency-Key admit one email', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('retry'), subject: 'Hi {{name}}', text: 't' });
    const body = { ...envelope(w), template: t.slug, variables: { name: 'Ann' } };
    const responses = await Promise.all(Array.from({ length: 6 }, () => post(w, w.apiKey, body, { 'idempotency-key': `race-${t.id}` })));
    assert.equal(responses.map((r) => r.statusCode), [202, 202, 202, 202, 202, 202]);
    assert.is(new Set(responses.map((r) => r.json().id)).size, 1);
    assert.is((await admitted(w, responses[0].json().id)).events.length, 1);
  });

  test('every other admission rule applies as for direct sends', async ({ w }) => {
    const t = await createTemplateAs(w, { slug: slug('rules'), subject: 'Hi {{name}}', text: 'Hi {{name}}' });
    const send = (extra: Record<string, unknown>, apiKey = w.apiKey) => post(w, apiKey, { ...envelope(w), template: t.slug, variables: { name: 'Ann' }, ...extra });
    // Shape: 400 naming the field, before the template is looked up.
    expectError(await send({ subject: 'direct and template' }), 400, 'validation_error', /body\.subject/);
    expectError(await send({ html: '<p>x</p>' }), 400, 'validation_error', /body\.html/);
    expectError(await send({ template: 'Not A Slug' }), 400, 'validation_error', /body\.template/);
    expectError(await send({ template: 'a'.repeat(81) }), 400, 'validation_error', /body\.template/);
    const slug80 = `${'s'.repeat(40)}-${'x'.repeat(39)}`;
    await createTemplateAs(w, { slug: slug80, subject: 'Hi {{name}}', text: 't' });
    assert.is((await send({ template: slug80 })).statusCode, 202, 'a slug of 80 characters');
    for (const required of ['from', 'to', 'template']) {
      const body: Record<string, unknown> = { ...envelope(w), template: t.slug, variables: { name: 'Ann' } };
      delete body[required];
      // Without `template` the body is a direct send, which lacks subject and content: still a 400.
      expectError(await post(w, w.apiKey, body), 400, 'validation_error', required === 'template' ? /body\./ : new RegExp(`body\\.${required}`));
    }
    expectError(await send({ template: 42 }), 400, 'validation_error', /body\.template/);
    expectError(await send({ from: 'not a mailbox' }), 400, 'validation_error', /body\.from/);
    expectError(await send({ to: [] }), 400, 'validation_error', /body\.to/);
    expectError(await send({ cc: [] }), 400, 'validation_error', /body\.cc/);
    expectError(await send({ bcc: Array.from({ length: 51 }, (_, i) => `b${i}@${w.domain}`) }), 400, 'validation_error', /body\.bcc/);
    expectError(await send({ reply_to: `${'N'.repeat(310)} <reply@${w.domain}>` }), 400, 'validation_error', /body\.reply_to/);
    expectError(await send({ headers: { 'X-Long': 'v'.repeat(999) } }), 400, 'validation_error', /body\.headers/);
    expectError(await send({ metadata: 'text' }), 400, 'validation_error', /body\.metadata/);
    expectError(await send({ headers: { 'Content-Type': 'text/plain' } }), 400, 'validation_error', /body\.headers/);
    expectError(await send({ headers: { 'X-Ok': 'a\r\nb' } }), 400, 'validation_error', /body\.headers/);
    expectError(await send({ tags: { rr_internal: 'x' } }), 400, 'validation_error', /body\.tags/);
    expectError(await send({ tags: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`t${i}`, 'v'])) }), 400, 'validation_error', /body\.tags/);
    expectError(await send({ template: 'unknown-but-invalid-body', from: 'nope' }), 400, 'validation_error', /body\.from/);
    // 50 recipients in total across to, cc and bcc; 51 is a validation error.
    const fifty = Array.from({ length: 50 }, (_, i) => `r${i}@${w.domain}`);
    assert.is((await send({ to: fifty.slice(0, 30), cc: fifty.slice(30, 45), bcc: fifty.slice(45) })).statusCode, 202);
    expectError(await send({ to: fifty.slice(0, 30), cc: fifty.slice(30, 45), bcc: [...fifty.slice(45), `r50@${w.domain}`] }), 400, 'validation_error', /50/);
    // Sender and development recipient rules.
    expectError(await send({ from: 'hello@unverified.test' }), 422, 'domain_not_verified');
    expectError(await send({ cc: 'someone@elsewhere.test' }), 422, 'test_recipient_not_allowed');
    // Suppressed recipients make the whole message suppressed.
    const suppress = await call(w.t, 'POST', `/v1/workspaces/${w.workspaceId}/suppressions`, { as: w.owner, body: { address: `blocked@${w.domain}` } });
    assert.is(suppress.statusCode, 201, suppress.body);
    const suppressed = await send({ bcc: `blocked@${w.domain}` });
    assert.is(suppressed.statusCode, 202, suppressed.body);
    assert.is(suppressed.json().status, 'suppressed');
    assert.ok(suppressed.json().reason);
    const email = await admitted(w, suppressed.json().id);
    assert.is(email.type, 'EmailSuppressed');
    assert.equal(email.data.template, { id: t.id, slug: t.slug, revision: 1 });
    // Keys: none or invalid is 401, a key without email:send 403.
    const anonymous = await w.t.app.inject({ method: 'POST', url: '/v1/emails', payload: { ...envelope(w), template: t.slug } });
    expectError(anonymous, 401, 'invalid_api_key');
    expectError(await send({}, 'rr_test_not-a-key'), 401, 'invalid_api_key');
    const reader = await call(w.t, 'POST', `/v1/projects/${w.projectId}/api-keys`, { as: w.owner, body: { name: 'reader', permissions: ['email:read'] } });
    expectError(await send({}, reader.json().secret), 403, 'forbidden');
    // The 10 MiB request limit holds for template sends too.
    expectError(await send({ metadata: { blob: 'x'.repeat(10 * 1024 * 1024) } }), 413, 'message_too_large');
  });

  test.run();
}
