// A uvu suite that, given a reason, registers every test as skipped instead: its hooks never
// run (so a contract opens nothing), uvu counts the tests under "Skipped", and the reason is
// printed once, on a line the runner (test/run.ts) echoes for files with skipped tests.
import { suite } from 'uvu';
import type { Callback, Test } from 'uvu';

export function skippableSuite<T>(name: string, skipReason?: string): Test<T> {
  const real = suite<T>(name);
  if (skipReason === undefined) return real;
  const hook = Object.assign((_hook: Callback<T>) => {}, { each: (_hook: Callback<T>) => {} });
  const skipped: Test<T> = Object.assign((testName: string) => real.skip(testName), {
    only: (testName: string) => real.skip(testName),
    skip: (testName?: string) => real.skip(testName),
    before: hook,
    after: hook,
    run: () => {
      console.log(`${name} skipped: ${skipReason}`);
      real.run();
    },
  });
  return skipped;
}
