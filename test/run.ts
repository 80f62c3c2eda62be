// Runs the uvu suites, one process per file (a hung or crashed file cannot take the
// others down), and ends with one line "N passed, N failed[, N skipped]" for CI.
// Usage: npm test -- [unit|int|e2e ...] [--filter substring]   (npm runs the pinned Node 24)
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const filterAt = args.indexOf('--filter');
const filter = filterAt >= 0 ? args.splice(filterAt, 2)[1] : undefined;
const kinds = args.length > 0 ? args : ['unit', 'int', 'e2e'];
const fileTimeoutMs = Number(process.env.RELAY_TEST_FILE_TIMEOUT_MS ?? 10 * 60_000);
const concurrency = Number(process.env.RELAY_TEST_CONCURRENCY ?? 2);

function listTests(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'node_modules') return [];
    return statSync(path).isDirectory() ? listTests(path) : [path];
  });
}

const files = listTests(join(root, 'test'))
  .filter((f) => kinds.some((k) => f.endsWith(`.${k}.test.ts`)))
  .filter((f) => !filter || f.includes(filter))
  .sort((a, b) => kinds.findIndex((k) => a.endsWith(`.${k}.test.ts`)) - kinds.findIndex((k) => b.endsWith(`.${k}.test.ts`)) || a.localeCompare(b));

interface Outcome { file: string; passed: number; failed: number; skipped: number; ms: number; output: string }

function runFile(file: string): Promise<Outcome> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [file], {
      cwd: root,
      env: { ...process.env, FORCE_COLOR: '0', NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => {
      output += `\n[runner] ${relative(root, file)} timed out after ${fileTimeoutMs} ms; killed\n`;
      child.kill('SIGKILL');
    }, fileTimeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      const total = Number(/Total:\s+(\d+)/.exec(output)?.[1] ?? NaN);
      const passed = Number(/Passed:\s+(\d+)/.exec(output)?.[1] ?? 0);
      const skipped = Number(/Skipped:\s+(\d+)/.exec(output)?.[1] ?? 0);
      // uvu's Total counts the tests that ran; skipped ones are outside it.
      let failed = Number.isNaN(total) ? 1 : total - passed;
      // A file that printed a clean summary but then exited non-zero (an unhandled error after
      // the tests, a hang killed by the timer) still failed.
      if (failed === 0 && code !== 0) failed = 1;
      resolve({ file, passed, failed, skipped, ms: Date.now() - started, output });
    });
  });
}

const outcomes: Outcome[] = [];
let next = 0;
async function worker() {
  while (next < files.length) {
    const file = files[next++];
    const outcome = await runFile(file);
    outcomes.push(outcome);
    const label = outcome.failed > 0 ? 'FAIL' : 'ok  ';
    console.log(`${label} ${relative(root, file)}  ${outcome.passed} passed, ${outcome.failed} failed${outcome.skipped ? `, ${outcome.skipped} skipped` : ''}  (${outcome.ms} ms)`);
    if (outcome.failed > 0 || process.env.RELAY_TEST_VERBOSE) console.log(outcome.output.replace(/^/gm, '    | '));
    else if (outcome.skipped > 0) {
      for (const line of outcome.output.split('\n').filter((l) => /skip/i.test(l) && !/Skipped:/.test(l))) console.log(`    | ${line}`);
    }
  }
}
await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));

const sum = (k: 'passed' | 'failed' | 'skipped') => outcomes.reduce((n, o) => n + o[k], 0);
const skipped = sum('skipped');
console.log(`${sum('passed')} passed, ${sum('failed')} failed${skipped ? `, ${skipped} skipped` : ''}`);
process.exitCode = sum('failed') > 0 || files.length === 0 ? 1 : 0;
