// Names JavaScript gives a meaning are data like any other in a send: SendEmail.tags names are
// 1 to 128 characters of [A-Za-z0-9_-] not beginning with rr_, so "__proto__", "constructor"
// and "prototype" are valid tag names, and metadata is "free-form application data", so
// {"constructor": {"prototype": …}} and {"__proto__": …} are valid metadata. Such a body is
// admitted (it was refused 400 "Body is not valid JSON" by fastify's prototype-poisoning
// guard), every such key is kept as sent, as an own property, on every read (the detail folded
// from the stream, the read model, the dashboard's detail), it counts for idempotency, and no
// prototype is ever set from it: nothing in the process is polluted.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp } from './support/app.ts';
import { waitUntil } from './support/eventually.ts';
import { DASHBOARD_ORIGIN, populateTemplateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld; url: string }>('tag and metadata names __proto__, constructor, prototype');

/** Object.prototype's own properties, each as "name value get set": a polluted one has one more, or another value. */
const prototypeNow = () => Reflect.ownKeys(Object.prototype).map((key) => {
  const d = Object.getOwnPropertyDescriptor(Object.prototype, key)!;
  return [String(key), d.value, d.get, d.set] as const;
});
const prototypeBefore = prototypeNow();

test.before(async (ctx) => {
  const t = await startTestApp({ RELAY_DASHBOARD_ORIGIN: DASHBOARD_ORIGIN }, { listen: true, processors: ['projector'] });
  ctx.url = t.url!;
  ctx.w = await populateTemplateWorld(t);
});
test.after(async ({ w }) => {
  await w.t.close();
});

// Raw JSON text: an object literal cannot hold an own "__proto__" key for JSON.stringify to write.
const TAGS = '{"__proto__":"v1","constructor":"c","prototype":"p","toString":"t"}';
const METADATA = '{"__proto__":{"polluted":"yes"},"constructor":{"prototype":{"polluted":"yes"}},"list":[{"__proto__":{"polluted":"yes"}}],"hasOwnProperty":1}';

const bodyText = (w: TemplateWorld, tags = TAGS, metadata = METADATA) =>
  `{"from":"app@${w.domain}","to":"ann@${w.domain}","subject":"Hi","text":"Hello","tags":${tags},"metadata":${metadata}}`;

async function send(ctx: { w: TemplateWorld; url: string }, body: string, headers: Record<string, string> = {}) {
  ctx.w.t.clock.advance(61_000); // past the development key's rate window
  const response = await fetch(`${ctx.url}/v1/emails`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ctx.w.apiKey}`, 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: response.status, text: await response.text() };
}

async function getJson(ctx: { url: string }, path: string, headers: Record<string, string>) {
  const response = await fetch(`${ctx.url}${path}`, { headers });
  const text = await response.text();
  assert.is(response.status, 200, `${path}: ${text}`);
  return JSON.parse(text);
}

/** The detail's tags and metadata are the ones sent: the same keys, own properties, in the same order, with the same values. */
function assertKept(detail: { tags: unknown; metadata: Record<string, unknown> }, where: string): void {
  assert.is(JSON.stringify(detail.tags), JSON.stringify(JSON.parse(TAGS)), `${where}: tags`);
  assert.is(JSON.stringify(detail.metadata), JSON.stringify(JSON.parse(METADATA)), `${where}: metadata`);
  assert.ok(Object.hasOwn(detail.tags as object, '__proto__'), `${where}: the __proto__ tag is an own property`);
  assert.ok(Object.hasOwn(detail.metadata, '__proto__') && Object.hasOwn(detail.metadata, 'constructor'), `${where}: metadata keys are own properties`);
}

function assertNothingPolluted(): void {
  assert.is(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype has a "polluted" property');
  const now = prototypeNow();
  assert.equal(now.map(([name]) => name), prototypeBefore.map(([name]) => name), 'Object.prototype has other properties');
  assert.ok(now.every((entry, i) => entry.every((part, j) => part === prototypeBefore[i][j])), 'a property of Object.prototype changed');
}

test('a send with tags and metadata named __proto__, constructor, prototype is admitted and read back as sent, everywhere', async (ctx) => {
  const { w } = ctx;
  const sent = await send(ctx, bodyText(w));
  assert.is(sent.status, 202, sent.text);
  const id = JSON.parse(sent.text).id as string;
  const bearer = { authorization: `Bearer ${w.apiKey}` };

  // At once: the detail (folded from the email's stream when the read model has not caught up).
  assertKept(await getJson(ctx, `/v1/emails/${id}`, bearer), 'the first detail');
  // Once the projector has written the read model (the list shows it), from the read model.
  await waitUntil(async () => (await getJson(ctx, '/v1/emails?limit=100', bearer)).emails.some((e: { id: string }) => e.id === id), 'the email is listed', 10_000);
  assertKept(await getJson(ctx, `/v1/emails/${id}`, bearer), 'the detail from the read model');
  // The dashboard's detail of it (its page renders tags and metadata from this answer).
  assertKept(await getJson(ctx, `/v1/projects/${w.projectId}/emails/${id}`, { cookie: w.owner.cookie }), 'the dashboard detail');
  assertNothingPolluted();
});

test('such keys count for idempotency: the same body replays, a different __proto__ tag conflicts', async (ctx) => {
  const { w } = ctx;
  const key = { 'idempotency-key': `proto-${Date.now()}` };
  const first = await send(ctx, bodyText(w), key);
  assert.is(first.status, 202, first.text);
  const replay = await send(ctx, bodyText(w), key);
  assert.is(replay.status, 202, replay.text);
  assert.is(JSON.parse(replay.text).id, JSON.parse(first.text).id);
  const other = await send(ctx, bodyText(w, TAGS.replace('"v1"', '"v2"')), key);
  assert.is(other.status, 409, other.text);
  assert.is(JSON.parse(other.text).error.code, 'idempotency_conflict');
  assertNothingPolluted();
});

test('the tag rules still apply to such names: a tag value must be a string of letters, digits, _ and -', async (ctx) => {
  const { w } = ctx;
  const refused = await send(ctx, bodyText(w, '{"__proto__":{"polluted":"yes"}}', '{}'));
  assert.is(refused.status, 400, refused.text);
  assert.equal(JSON.parse(refused.text).error.code, 'validation_error');
  assert.match(JSON.parse(refused.text).error.message, /^body\.tags\.__proto__/);
  assertNothingPolluted();
});

test.run();
