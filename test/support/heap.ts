// The heap a test process holds, measured as the memory suites do: gc exposed at run time (no
// flag on the command line, so `node test/X.test.ts` and the runner measure alike), collected
// after a turn of the event loop (settled promises' microtasks still hold what they resolved)
// until a collection frees less than a KiB.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** The heap in use once collections free nothing more. */
export async function settledHeapUsed(): Promise<number> {
  await new Promise((resolve) => setImmediate(resolve));
  let used = Infinity;
  for (let i = 0; i < 10; i++) {
    gc();
    const now = process.memoryUsage().heapUsed;
    if (used - now < 1024) return Math.min(used, now);
    used = now;
  }
  return used;
}
