// Template render throughput: a plain HTML template and an MJML one, rendered from the
// compiled-template cache (merge + sanitize, as every send does), plus the cost of compiling
// each once (what a cache miss costs: MJML compile + parse + analysis).
//
//   node test/bench/render.bench.ts          (or: npm run bench render)
//   BENCH_SECONDS=3 BENCH_WARMUP_SECONDS=1
import { cpus } from 'node:os';
import { checkTemplateVariables } from '../../domain/templates/variables.ts';
import { CompiledTemplateCache } from '../../infra/rendering/compiled-template-cache.ts';
import { compileTemplate, type TemplateSource } from '../../infra/rendering/template-renderer.ts';

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

async function measureAsync(label: string, work: () => Promise<unknown>): Promise<void> {
  const warmUntil = performance.now() + WARMUP_SECONDS * 1000;
  while (performance.now() < warmUntil) await work();
  let ops = 0;
  const started = performance.now();
  const until = started + SECONDS * 1000;
  while (performance.now() < until) {
    await work();
    ops++;
  }
  const seconds = (performance.now() - started) / 1000;
  console.log(`${label.padEnd(40)} ${(ops / seconds).toFixed(0).padStart(9)} ops/s ${((seconds * 1000) / ops).toFixed(3).padStart(9)} ms/op`);
}

const cpu = cpus();
console.log(`render: node ${process.version}, ${cpu[0]?.model.trim()}, ${SECONDS} s per case after ${WARMUP_SECONDS} s warm-up, one core`);
console.log(`${'case'.padEnd(40)} ${'ops/s'.padStart(9)}       ${'ms/op'.padStart(9)}`);

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
