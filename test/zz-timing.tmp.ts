import { suite, type Test } from 'uvu';
import { SECTIONS } from './conformance/index.ts';
import { harnessRef, startDistributedHarness } from './conformance/harness.ts';
const ref = harnessRef(() => startDistributedHarness(process.env.RELAY_KAFKA_BROKERS!, process.env.RELAY_MONGODB_URL!));
const times: Array<[number, string]> = [];
SECTIONS.forEach(([name, register], i) => {
  const real = suite(name);
  const timed = Object.assign((n: string, fn: any) => real(n, async (ctx: any) => { const s = Date.now(); try { await fn(ctx); } finally { times.push([Date.now() - s, `${name}: ${n}`]); } }), real) as unknown as Test;
  register(timed, ref);
  if (i === SECTIONS.length - 1) real.after(async () => { await ref.close(); times.sort((a, b) => b[0] - a[0]); for (const [ms, n] of times.slice(0, 25)) console.log(ms, n); });
  real.run();
});
