// Template render throughput: a plain HTML template and an MJML one, rendered from the
// compiled-template cache (merge + sanitize), plus the cost of compiling each once (what a
// cache miss costs: MJML compile + parse + analysis). Then what a send pays: the same
// rendering on the template rendering thread (infra/rendering/template-threads.ts), one at a
// time (the round trip's latency) and 16 at once (throughput), with this thread's CPU per
// rendering (what the event loop the API shares still spends on it).
//
//   node test/bench/render.bench.ts          (or: npm run bench render)
//   BENCH_SECONDS=3 BENCH_WARMUP_SECONDS=1
import { cpus } from 'node:os';
import { threadCpuUsage } from 'node:process';
import { checkTemplateVariables } from '../../domain/templates/variables.ts';
import { CompiledTemplateCache } from '../../infra/rendering/compiled-template-cache.ts';
import { compileTemplate, type TemplateSource } from '../../infra/rendering/template-renderer.ts';
import { TemplateThreads } from '../../infra/rendering/template-threads.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 1);

const PLAIN: TemplateSource = {
  subject: 'Your order {{orderId}} has shipped, {{firstName}}',
  html: `<!doctype html><html><head><meta name="viewport" content="width=device-width"><style>@media (max-width:480px){.c{width:100%!important}}</style></head>
<body><table role="presentation" width="600" align="center"><tr><td class="c" style="padding:16px;font-family:Arial">
<h1>Hi {{firstName}},</h1><p>Order <strong>{{orderId}}</strong> is on its way to {{city}}.</p>
{{#if express}}<p style="color:#c00">Express delivery: arrives {{eta}}.</p>{{else}}<p>Standard delivery: arrives {{eta}}.</p>{{/if}}
<p><a href="{{trackingUrl}}" style="background:#0a7;color:#fff;padding:8px 16px">Track your parcel</a></p>
<p style="font-size:12px;color:#777">{{#unless vip}}Join our club for free shipping.{{/unless}} Questions? Reply to this email.</p>
</td></tr></table></body></html>`,
  text: 'Hi {{firstName}},\nOrder {{orderId}} is on its way to {{city}} and arrives {{eta}}.\nTrack it: {{trackingUrl}}',
};

const MJML: TemplateSource = {
  subject: PLAIN.subject,
  html: `<mjml>
  <mj-head><mj-title>Order {{orderId}}</mj-title><mj-preview>Arrives {{eta}}</mj-preview></mj-head>
  <mj-body background-color="#f4f4f4">
    <mj-section background-color="#ffffff">
      <mj-column><mj-text font-size="20px">Hi {{firstName}},</mj-text>
        <mj-text>Order <strong>{{orderId}}</strong> is on its way to {{city}}.</mj-text>
        <mj-text>{{#if express}}Express delivery: arrives {{eta}}.{{else}}Standard delivery: arrives {{eta}}.{{/if}}</mj-text>
        <mj-button href="{{trackingUrl}}" background-color="#00aa77">Track your parcel</mj-button>
      </mj-column>
      <mj-column><mj-image src="https://cdn.example.test/parcel.png" alt="Parcel" width="200px" /></mj-column>
    </mj-section>
    <mj-section><mj-column><mj-text font-size="12px" color="#777777">{{#unless vip}}Join our club for free shipping.{{/unless}} Questions? Reply to this email.</mj-text></mj-column></mj-section>
  </mj-body>
</mjml>`,
  text: PLAIN.text,
};

const VALUES = checkTemplateVariables({
  firstName: 'Ann <& Co>',
  orderId: 'A-10442',
  city: 'Lyon',
  express: true,
  eta: 'Tuesday',
  trackingUrl: 'https://track.example.test/A-10442?ref=email&x=1',
  vip: false,
});

/** `work` in `parallel` loops; prints ops/s, wall time per op and this thread's CPU per op. */
async function measureAsync(label: string, work: () => Promise<unknown>, parallel = 1): Promise<void> {
  const warmUntil = performance.now() + WARMUP_SECONDS * 1000;
  while (performance.now() < warmUntil) await work();
  let ops = 0;
  const started = performance.now();
  const cpuAtStart = threadCpuUsage();
  const until = started + SECONDS * 1000;
  await Promise.all(Array.from({ length: parallel }, async () => {
    while (performance.now() < until) {
      await work();
      ops++;
    }
  }));
  const cpu = threadCpuUsage(cpuAtStart);
  const seconds = (performance.now() - started) / 1000;
  const cpuMs = (cpu.user + cpu.system) / 1000 / ops;
  console.log(`${label.padEnd(52)} ${(ops / seconds).toFixed(0).padStart(9)} ops/s ${((seconds * 1000 * parallel) / ops).toFixed(3).padStart(9)} ms/op ${cpuMs.toFixed(3).padStart(9)}`);
}

const cpu = cpus();
console.log(`render: node ${process.version}, ${cpu.length} × ${cpu[0]?.model.trim()}, ${SECONDS} s per case after ${WARMUP_SECONDS} s warm-up`);
console.log(`${'case'.padEnd(52)} ${'ops/s'.padStart(9)}       ${'ms/op'.padStart(9)} ${'CPU ms/op (this thread)'}`);

const cache = new CompiledTemplateCache();
const plain = await cache.get('tpl_plain', 1, () => compileTemplate(PLAIN));
const mjml = await cache.get('tpl_mjml', 1, () => compileTemplate(MJML));
const sizes = { plain: plain.render(VALUES).html!.length, mjml: mjml.render(VALUES).html!.length };

// What a send does: take the compiled template from the cache, merge, sanitize.
await measureAsync(`render plain (cached, ${sizes.plain} B html)`, async () => (await cache.get('tpl_plain', 1, () => compileTemplate(PLAIN))).render(VALUES));
await measureAsync(`render MJML (cached, ${sizes.mjml} B html)`, async () => (await cache.get('tpl_mjml', 1, () => compileTemplate(MJML))).render(VALUES));
await measureAsync('compile plain (cache miss)', () => compileTemplate(PLAIN));
await measureAsync('compile MJML (cache miss)', () => compileTemplate(MJML));
console.log(`cache: ${cache.hits} hits, ${cache.misses} misses`);

// What a send pays since rendering moved off the event loop: the round trip to the rendering thread.
const threads = new TemplateThreads({ timeLimitMs: 2000 });
const saved = (id: string, source: TemplateSource) => ({ ...source, _id: id, revision: 1 });
await threads.render('bench', saved('tpl_plain', PLAIN), VALUES);
await threads.render('bench', saved('tpl_mjml', MJML), VALUES);
await measureAsync('send render plain (rendering thread, 1 at a time)', () => threads.render('bench', saved('tpl_plain', PLAIN), VALUES));
await measureAsync('send render MJML (rendering thread, 1 at a time)', () => threads.render('bench', saved('tpl_mjml', MJML), VALUES));
await measureAsync('send render plain (rendering thread, 16 at once)', () => threads.render('bench', saved('tpl_plain', PLAIN), VALUES), 16);
console.log(`the rendering thread was given each template's source ${threads.sourcesGiven === 2 ? 'once' : `${threads.sourcesGiven} times`}`);
await threads.close();
