// The dashboard's assets after a failed load: the modules are read and stripped once, on the
// first request, and kept; a load that fails (here a module Node's type stripper refuses) fails
// the requests of that moment only, and once the file is mended the next request serves it.
// Through HTTP on the dashboard's routes, serving a directory of real files the test can break.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { dashboardRoutes } from '../apps/dashboard/dashboard.ts';

interface Ctx { dir: string; app: FastifyInstance; base: string }

const test = suite<Ctx>('dashboard assets: a failed load is not kept');

test.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-assets-'));
  const clientDir = join(ctx.dir, 'client');
  const stylesheet = join(ctx.dir, 'dashboard.css');
  mkdirSync(clientDir);
  writeFileSync(join(clientDir, 'main.ts'), "const greeting: string = 'hello';\nexport default greeting;\n");
  // Erasable TypeScript has no enums: stripping this module fails, and with it the whole load.
  writeFileSync(join(clientDir, 'colour.ts'), 'export enum Colour { Red, Green }\n');
  writeFileSync(stylesheet, 'body { margin: 0; }\n');
  ctx.app = Fastify({ logger: false });
  await dashboardRoutes(ctx.app, { dashboardOrigin: 'http://localhost', env: 'development' }, { clientDir, stylesheet });
  ctx.base = await ctx.app.listen({ host: '127.0.0.1', port: 0 });
});
test.after(async (ctx) => {
  await ctx.app?.close();
  if (ctx.dir) rmSync(ctx.dir, { recursive: true, force: true });
});

test('a request after a failed load loads again, and serves the mended module', async ({ dir, base }) => {
  const first = await fetch(`${base}/assets/main.ts`);
  assert.is(first.status, 500, 'the load with a module the stripper refuses fails');
  await first.arrayBuffer();

  writeFileSync(join(dir, 'client', 'colour.ts'), "export const Colour = { Red: 0, Green: 1 } as const;\n");
  const main = await fetch(`${base}/assets/main.ts`);
  assert.is(main.status, 200, 'the failure of the first load was kept');
  assert.is(await main.text(), "const greeting         = 'hello';\nexport default greeting;\n");
  const colour = await fetch(`${base}/assets/colour.ts`);
  assert.is(colour.status, 200);
  assert.match(await colour.text(), /export const Colour = \{ Red: 0, Green: 1 \}/);
  assert.is((await fetch(`${base}/assets/dashboard.css`)).status, 200);
});

test.run();
