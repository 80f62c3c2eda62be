import { startEmbeddedHarness, basicSend } from '../conformance/harness.ts';
const h = await startEmbeddedHarness();
const t = await h.tenant();
for (const extra of [{ headers: { '': 'v' } }, { headers: { 'From': 'v' } }, { headers: { 'a b': 'v' } }, { tags: { '': 'v' } }, { tags: { rr_x: 'v' } }, { tags: { 'a.b': 'v' } }, { headers: { 'X-A': 'a\nb' } }, { to: [] }, { x: 1 }, { cc: ['a@b.test', 5] }]) {
  const r = await h.send(t.key, basicSend(t, extra));
  console.log(JSON.stringify(extra), r.statusCode, r.json().error?.message);
}
const b = basicSend(t); delete (b as any).subject;
console.log((await h.send(t.key, b)).json().error.message);
await h.close();
