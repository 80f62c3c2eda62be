// profile admission in-process
import { startEmbeddedHarness, basicSend } from '../conformance/harness.ts';
const h = await startEmbeddedHarness();
const tenants = [] as any[];
for (let i = 0; i < 20; i++) tenants.push(await h.tenant());
h.clock.frozenAt = null;
const t0 = performance.now();
let n = 0;
const N = 4000;
await Promise.all(Array.from({ length: 16 }, async () => {
  while (n < N) { const t = tenants[n++ % tenants.length]; const r = await h.send(t.key, basicSend(t, { cc: 'a@example.com' })); if (r.statusCode !== 202) { console.log(r.statusCode, r.body); } }
}));
console.log('rate', (N / (performance.now() - t0) * 1000).toFixed(0));
await h.close();
