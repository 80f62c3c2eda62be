// `npm run bench`: runs every test/bench/*.bench.ts, one after the other, each in its own
// process (benchmarks must not share a machine's cores with each other). Not a test: it
// prints figures and fails only if a benchmark crashes.
// Usage: npm run bench -- [substring ...]   (npm runs the pinned Node 24)
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = fileURLToPath(new URL('.', import.meta.url));
const root = fileURLToPath(new URL('../..', import.meta.url));
const filters = process.argv.slice(2);
const files = readdirSync(dir)
  .filter((f) => f.endsWith('.bench.ts'))
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)))
  .sort();

let failed = 0;
for (const file of files) {
  console.log(`\n=== ${file}`);
  const code = await new Promise<number | null>((resolve) => {
    const child = spawn(process.execPath, [join(dir, file)], { cwd: root, stdio: 'inherit' });
    child.on('exit', (c) => resolve(c));
  });
  if (code !== 0) {
    failed++;
    console.log(`=== ${file} failed (exit ${code})`);
  }
}
if (files.length === 0) console.log('no benchmarks matched');
process.exitCode = failed > 0 ? 1 : 0;
