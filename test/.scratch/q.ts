import { startEmbeddedHarness } from '../conformance/harness.ts';
const h = await startEmbeddedHarness();
const t = await h.tenant();
for (const q of ['limit=0', 'limit=101', 'limit=1.5', 'limit=ten', 'limit=-1', 'limit=', 'limit=1e1', 'limit=+5', 'limit= 5', 'limit=5&limit=6', 'cursor=', 'status=', 'sender=']) {
  const r = await h.request('GET', `/v1/emails?${q}`, { key: t.key.secret });
  console.log(JSON.stringify(q), r.statusCode, r.body.slice(0, 100));
}
await h.close();
