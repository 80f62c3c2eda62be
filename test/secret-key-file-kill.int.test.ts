// A first start killed while it makes `<dataDir>/secret.key` (SIGKILL, an OOM kill, a container
// stopped during its first start): the key file appears whole or not at all (written under a name
// of its own, synced, then linked in), so the next start starts, rather than refusing an empty key
// file that only an operator deleting it by hand would get past.
import { existsSync, mkdtempSync, readFileSync, rmSync, watch } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { freePort, spawnRelay, waitForReady } from './support/relay-process.ts';

const test = suite('a first start killed while it makes the key file');

test('killed the moment a file for the key appears: the next start starts, with a whole key', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-review-key-'));
  try {
    const first = spawnRelay(['start'], { RELAY_DATA_DIR: dataDir, PORT: '0' });
    // The marker: the first file for the key in the data directory (the key file itself, or what
    // it is written under before it is linked in); the kill follows it at once.
    const watcher = watch(dataDir, (_event, name) => {
      if (name?.includes('secret.key')) first.child.kill('SIGKILL');
    });
    const exit = await first.exited;
    watcher.close();
    assert.is(exit.signal, 'SIGKILL', first.output());
    const keyFile = join(dataDir, 'secret.key');
    if (existsSync(keyFile)) assert.match(readFileSync(keyFile, 'utf8'), /^[A-Za-z0-9+/]{43}=\n$/, 'a key file is never there without its key');

    const port = await freePort();
    const second = spawnRelay(['start'], { RELAY_DATA_DIR: dataDir, PORT: String(port) });
    try {
      await waitForReady(`http://127.0.0.1:${port}`, second, 30_000);
    } finally {
      await second.stop();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
