// RELAY_DATA_DIR that names a regular file, or a path under one, stops `relay start` with
// Node's bare error and exit 1: "relay: EEXIST: file already exists, mkdir '…'" (ENOTDIR for a
// path under a file), followed by "(RELAY_LOG_LEVEL=debug shows where it failed)". The message
// does not name the variable and the exit code is not the configuration one.
//
// Where: apps/runtime.ts:82 (NOT_WRITABLE holds only EACCES, EPERM and EROFS) and 127-134
// (openStores turns only those codes into a ConfigError naming RELAY_DATA_DIR; EEXIST and
// ENOTDIR are rethrown as they are).
//
// Expected (README "a bad value stops the process at start with a message naming the variable",
// docs/configuration.md "exit 78"): one line "relay: invalid configuration: RELAY_DATA_DIR: …"
// saying that the path is not a directory, and exit 78.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { describeOutcome, startOutcome } from './support/start-outcome.ts';

const scratch = mkdtempSync(join(tmpdir(), 'relay-data-dir-file-'));
const aFile = join(scratch, 'not-a-directory');
writeFileSync(aFile, 'a file, not a directory\n');

for (const [what, dataDir] of [['a regular file', aFile], ['a path under a regular file', join(aFile, 'data')]] as const) {
  test(`relay start with RELAY_DATA_DIR naming ${what} exits 78 naming RELAY_DATA_DIR`, async () => {
    const result = await startOutcome(['start'], { RELAY_DATA_DIR: dataDir });
    assert.is(result.outcome, 'exited', describeOutcome(result));
    if (result.outcome !== 'exited') return;
    assert.is(result.code, 78, `exit code (78: configuration): ${describeOutcome(result)}`);
    assert.match(result.output, /^relay: invalid configuration: RELAY_DATA_DIR: /m, describeOutcome(result));
    assert.not.match(result.output, /\n\s+at /, `a stack trace: ${describeOutcome(result)}`);
  });
}

test.after(() => rmSync(scratch, { recursive: true, force: true }));

test.run();
