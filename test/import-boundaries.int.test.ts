// The import-boundary check (.dependency-cruiser.cjs, `npm run check:boundaries`) catches what it
// promises: probe files with a deliberately wrong import are written into the layers, the
// checker's CLI is run on them alone (as CI runs it, same config), and it must fail naming the
// rule; probes whose imports are allowed must pass. The probes are type-correct, named
// `__relay_boundary_probe_<pid>_…` (the full check leaves such files out, so a run meanwhile is
// not confused) and always deleted.
import { spawnSync } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'uvu';
import * as assert from 'uvu/assert';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DEPCRUISE = join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruiser.mjs');
const PREFIX = `__relay_boundary_probe_${process.pid}_`;

interface Probe { file: string; source: string; rule?: string }

const probe = (dir: string, name: string, source: string, rule?: string): Probe => ({ file: `${dir}/${PREFIX}${name}`, source, rule });

// Each wrong probe breaks exactly one rule with exactly one import.
const WRONG: Probe[] = [
  probe('domain', 'infra.ts', "import type * as log from '../infra/ports/log.ts';\nexport type Probe = typeof log;\n", 'domain-is-pure'),
  probe('domain', 'node.ts', "import type * as fs from 'node:fs';\nexport type Probe = typeof fs;\n", 'domain-is-pure'),
  probe('domain', 'package.ts', "import type * as pino from 'pino';\nexport type Probe = typeof pino;\n", 'domain-is-pure'),
  probe('projections', 'apps.ts', "import type * as runtime from '../apps/runtime.ts';\nexport type Probe = typeof runtime;\n", 'projections-import-only-domain'),
  probe('infra', 'apps.ts', "import type * as runtime from '../apps/runtime.ts';\nexport type Probe = typeof runtime;\n", 'infra-not-upward'),
  probe('infra', 'projections.ts', "import type * as view from '../projections/email-view.ts';\nexport type Probe = typeof view;\n", 'infra-not-upward'),
  probe('apps/services', 'api.ts', "import type * as validation from '../api/validation.ts';\nexport type Probe = typeof validation;\n", 'no-api-from-services-or-domain'),
  probe('apps/api/plugins', 'services.schemas.ts', "import type * as collections from '../../services/collections.ts';\nexport type Probe = typeof collections;\n", 'schemas-not-services'),
  probe('apps', 'test.ts', "import type * as eventually from '../test/support/eventually.ts';\nexport type Probe = typeof eventually;\n", 'test-only-from-test'),
  // A dynamic import counts too.
  probe('infra', 'dynamic.ts', "export const probe = () => import('../apps/runtime.ts');\n", 'infra-not-upward'),
];

const RIGHT: Probe[] = [
  probe('domain', 'ok.ts', "import type * as errors from './errors.ts';\nexport type Probe = typeof errors;\n"),
  probe('projections', 'ok.ts', "import type * as events from '../domain/email/events.ts';\nexport type Probe = typeof events;\n"),
  probe('infra', 'ok.ts', "import type * as log from './ports/log.ts';\nimport type * as errors from '../domain/errors.ts';\nexport type Probe = [typeof log, typeof errors];\n"),
  probe('apps/api/plugins', 'ok.schemas.ts', "import type * as errors from '../../../domain/errors.ts';\nexport type Probe = typeof errors;\n"),
  probe('test', 'ok.ts', "import type * as runtime from '../apps/runtime.ts';\nexport type Probe = typeof runtime;\n"),
];

interface Violation { rule: string; from: string; to: string }
interface CheckResult { status: number | null; output: string; violations: Violation[] }

function depcruise(args: string[], seeProbes: boolean) {
  const run = spawnSync(process.execPath, [DEPCRUISE, '--config', '.dependency-cruiser.cjs', ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, RELAY_BOUNDARY_PROBES: seeProbes ? '1' : '0' },
    maxBuffer: 64 * 1024 * 1024,
    timeout: 60_000,
  });
  if (run.error) throw run.error;
  return run;
}

// The CLI as CI runs it (same config, the default "err" reporter whose exit status is the number
// of errors), restricted to the given files and their direct imports.
function check(files: string[]): CheckResult {
  const run = depcruise(['--max-depth', '1', ...files], true);
  const output = run.stdout + run.stderr;
  const violations = [...output.matchAll(/^\s*error (\S+): (\S+) → (\S+)\s*$/gm)].map(([, rule, from, to]) => ({ rule, from, to }));
  return { status: run.status, output, violations };
}

// The modules a cruise of `args` visits (JSON reporter).
function cruised(args: string[], seeProbes: boolean): string[] {
  const run = depcruise(['--output-type', 'json', ...args], seeProbes);
  try {
    return (JSON.parse(run.stdout) as { modules: Array<{ source: string }> }).modules.map((m) => m.source);
  } catch {
    throw new Error(`dependency-cruiser gave no JSON (status ${run.status}): ${run.stderr}${run.stdout.slice(0, 2000)}`);
  }
}

function withProbes(probes: Probe[], body: () => void): void {
  try {
    for (const p of probes) writeFileSync(join(ROOT, p.file), p.source);
    body();
  } finally {
    for (const p of probes) rmSync(join(ROOT, p.file), { force: true });
  }
}

test('every wrong probe fails the check, naming its rule', () => {
  withProbes(WRONG, () => {
    const result = check(WRONG.map((p) => p.file));
    for (const p of WRONG) {
      const found = result.violations.filter((v) => v.from === p.file).map((v) => v.rule);
      assert.equal(found, [p.rule], `${p.file}: ${JSON.stringify(found)}\n${result.output}`);
    }
    // Exactly those: nothing else in the (direct-imports-only) cruise was flagged.
    assert.is(result.violations.length, WRONG.length, result.output);
    assert.is(result.status, WRONG.length, 'the checker fails, its exit status counting the errors');
  });
});

test('probes whose imports are allowed pass', () => {
  withProbes(RIGHT, () => {
    const files = RIGHT.map((p) => p.file);
    const sources = cruised(['--max-depth', '1', ...files], true);
    for (const file of files) assert.ok(sources.includes(file), `${file} was cruised`);
    const result = check(files);
    assert.equal(result.violations, [], result.output);
    assert.is(result.status, 0, result.output);
  });
});

test('a full check running meanwhile does not see the probes', () => {
  withProbes([...WRONG, ...RIGHT], () => {
    const sources = cruised(['.'], false);
    assert.ok(sources.includes('domain/errors.ts'), 'the full check cruised the tree');
    assert.equal(sources.filter((s) => s.includes('__relay_boundary_probe_')), []);
  });
});

test('no probe is left behind', () => {
  for (const p of [...WRONG, ...RIGHT]) assert.not.ok(existsSync(join(ROOT, p.file)), p.file);
});

test.run();
