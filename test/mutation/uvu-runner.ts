// A StrykerJS test runner for uvu suites, in the worker's own process: the test files are
// imported once (types stripped by Node), and each mutant run calls the queued suites again
// with Stryker's active mutant switched on (domain/ is instrumented with every mutant, each
// behind a switch). A node process per mutant, as the command runner would start, costs about
// a second and a half; a run here costs what the tests cost. Mutants that only act while
// modules load (static ones) get a fresh worker from Stryker: this runner cannot reload.
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { declareClassPlugin, PluginKind } from '@stryker-mutator/api/plugin';
import {
  DryRunStatus, MutantRunStatus, TestStatus, toMutantRunResult,
  type DryRunOptions, type DryRunResult, type MutantRunOptions, type MutantRunResult, type TestResult, type TestRunner, type TestRunnerCapabilities,
} from '@stryker-mutator/api/test-runner';
import { DOMAIN_TESTS } from './domain-tests.ts';

type Suite = () => Promise<[string | true, number, number, number]>;
type Group = [string | null, ...Suite[]];

interface StrykerGlobal {
  activeMutant?: string;
  currentTestId?: string;
  hitLimit?: number;
  hitCount?: number;
  mutantCoverage?: unknown;
}

const uvu = globalThis as unknown as { UVU_DEFER?: number; UVU_INDEX?: number; UVU_QUEUE?: Group[]; __stryker__?: StrykerGlobal };
const stryker = (): StrykerGlobal => (uvu.__stryker__ ??= {});

class UvuTestRunner implements TestRunner {
  static inject = [] as const;
  #groups: Group[] | null = null;

  capabilities(): TestRunnerCapabilities {
    return { reloadEnvironment: false };
  }

  /** Imports the test files once: their suites queue up instead of running (as the uvu CLI does). */
  async #load(): Promise<Group[]> {
    if (this.#groups) return this.#groups;
    uvu.UVU_DEFER = 1;
    uvu.UVU_QUEUE = [];
    await import('uvu');
    for (const [index, file] of DOMAIN_TESTS.entries()) {
      uvu.UVU_INDEX = index;
      uvu.UVU_QUEUE.push([file]);
      await import(pathToFileURL(resolve(file)).href);
    }
    return (this.#groups = uvu.UVU_QUEUE);
  }

  /**
   * Runs the suites (those named in `only`, when given), each under its own test id, so that
   * what a suite reaches is its coverage (what the modules run while loading is static).
   */
  async #run(bail: boolean, only?: readonly string[]): Promise<TestResult[]> {
    const results: TestResult[] = [];
    const wanted = only ? new Set(only) : null;
    for (const [file, ...suites] of await this.#load()) {
      for (const [index, suite] of suites.entries()) {
        const name = `${file} #${index}`;
        if (wanted && !wanted.has(name)) continue;
        const started = Date.now();
        stryker().currentTestId = name;
        const [errors, passed, , total] = await suite().finally(() => (stryker().currentTestId = undefined));
        const timeSpentMs = Date.now() - started;
        if (passed === total) {
          results.push({ id: name, name, status: TestStatus.Success, timeSpentMs });
        } else {
          results.push({ id: name, name, status: TestStatus.Failed, failureMessage: String(errors).slice(0, 2000), timeSpentMs });
          if (bail) return results;
        }
      }
    }
    return results;
  }

  async dryRun(options: DryRunOptions): Promise<DryRunResult> {
    stryker().activeMutant = undefined;
    await this.#load();
    const tests = await this.#run(false);
    return { status: DryRunStatus.Complete, tests, ...(options.coverageAnalysis === 'off' ? {} : { mutantCoverage: stryker().mutantCoverage as DryRunResult extends { mutantCoverage?: infer C } ? C : never }) };
  }

  async mutantRun(options: MutantRunOptions): Promise<MutantRunResult> {
    const ns = stryker();
    ns.activeMutant = options.activeMutant.id;
    ns.hitLimit = options.hitLimit;
    ns.hitCount = options.hitLimit === undefined ? undefined : 0;
    try {
      const tests = await this.#run(!options.disableBail, options.testFilter);
      if (ns.hitLimit !== undefined && (ns.hitCount ?? 0) > ns.hitLimit) return { status: MutantRunStatus.Timeout, reason: `hit limit of ${ns.hitLimit} reached` };
      return toMutantRunResult({ status: DryRunStatus.Complete, tests });
    } finally {
      ns.activeMutant = undefined;
      ns.hitLimit = undefined;
    }
  }
}

export const strykerPlugins = [declareClassPlugin(PluginKind.TestRunner, 'uvu-in-process', UvuTestRunner)];
