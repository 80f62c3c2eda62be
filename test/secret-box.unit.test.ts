// The server secret: sealing (AES-256-GCM under per-purpose HKDF subkeys), MACs, key
// rotation, and where the master key comes from (RELAY_SECRET_KEY or a generated key file).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { KEY_FILE_NAME, loadSecretKeys, parseKey, SecretBox, SecretBoxError, splitKeyList } from '../infra/secrets/secret-box.ts';

const KEY_A = randomBytes(32);
const KEY_B = randomBytes(32);
const boxOf = (current: Buffer, previous: Buffer[] = []) => new SecretBox({ current, previous });

function throwsSecretBoxError(run: () => unknown, message: RegExp): void {
  try {
    run();
  } catch (error) {
    assert.instance(error, SecretBoxError);
    assert.match((error as Error).message, message);
    return;
  }
  assert.unreachable('expected open to throw');
}

/** Replaces one character of part `index` of a sealed value by another valid character. */
function alterPart(sealed: string, index: number, at = 0): string {
  const parts = sealed.split('.');
  const part = parts[index];
  const position = at < 0 ? part.length + at : at;
  const swapped = part[position] === 'A' ? 'B' : 'A';
  parts[index] = part.slice(0, position) + swapped + part.slice(position + 1);
  return parts.join('.');
}

// ---------------------------------------------------------------------------------------
const sealing = suite('SecretBox seal/open');

sealing('given a plaintext, when sealed and opened with the same purpose, then it comes back unchanged', () => {
  const box = boxOf(KEY_A);
  for (const plaintext of ['', 'x', 'a DKIM key -----BEGIN PRIVATE KEY-----\n…', 'ünïcødé ✉️', 'z'.repeat(10_000)]) {
    const sealed = box.seal(plaintext, 'dkim-private-key');
    assert.ok(box.isSealed(sealed));
    assert.is(box.open(sealed, 'dkim-private-key'), plaintext);
  }
});

sealing('given the same plaintext sealed twice, then the sealed values differ (fresh IV) and name the key', () => {
  const box = boxOf(KEY_A);
  const first = box.seal('secret', 'p');
  const second = box.seal('secret', 'p');
  assert.is.not(first, second);
  assert.match(first, /^v1\.[A-Za-z0-9_-]{8}\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]{22}$/);
  assert.is(first.split('.')[1], box.keyId);
  assert.not.ok(first.includes('secret'));
});

sealing('given a sealed value, when any of its parts is altered, then open refuses it', () => {
  const box = boxOf(KEY_A);
  const sealed = box.seal('the plaintext', 'p');
  throwsSecretBoxError(() => box.open(sealed.replace(/^v1/, 'v2'), 'p'), /not a sealed value/);
  throwsSecretBoxError(() => box.open(alterPart(sealed, 1), 'p'), /neither RELAY_SECRET_KEY/);
  for (const index of [2, 3, 4]) {
    throwsSecretBoxError(() => box.open(alterPart(sealed, index), 'p'), /altered/);
    throwsSecretBoxError(() => box.open(alterPart(sealed, index, -1), 'p'), /altered/);
  }
  throwsSecretBoxError(() => box.open(sealed.slice(0, -1), 'p'), /not a sealed value/);
  throwsSecretBoxError(() => box.open(`${sealed}A`, 'p'), /not a sealed value/);
});

sealing('given a value sealed for one purpose, when opened for another, then open refuses it', () => {
  const box = boxOf(KEY_A);
  throwsSecretBoxError(() => box.open(box.seal('webhook secret', 'webhook-secret'), 'dkim-private-key'), /for purpose "dkim-private-key"/);
});

sealing('given a value sealed with a context (an email id), then it opens with that context only', () => {
  const box = boxOf(KEY_A);
  const sealed = box.seal('content key of em_1', 'content-key', 'em_1');
  assert.is(box.open(sealed, 'content-key', 'em_1'), 'content key of em_1');
  throwsSecretBoxError(() => box.open(sealed, 'content-key', 'em_2'), /for purpose "content-key" and "em_2"/);
  throwsSecretBoxError(() => box.open(sealed, 'content-key'), /for purpose "content-key"/);
  throwsSecretBoxError(() => box.open(box.seal('no context', 'content-key'), 'content-key', 'em_1'), /altered/);
});

sealing('given a value sealed with another key, when opened without that key, then the error names the key ids', () => {
  const sealed = boxOf(KEY_A).seal('x', 'p');
  throwsSecretBoxError(() => boxOf(KEY_B).open(sealed, 'p'), new RegExp(`key ${boxOf(KEY_A).keyId}.*RELAY_SECRET_KEY \\(${boxOf(KEY_B).keyId}\\)`));
});

sealing('given rotation (current B, previous A), when opening a value sealed with A, then it opens and new values use B', () => {
  const oldSealed = boxOf(KEY_A).seal('sealed before rotation', 'p');
  const rotated = boxOf(KEY_B, [KEY_A]);
  assert.is(rotated.open(oldSealed, 'p'), 'sealed before rotation');
  const fresh = rotated.seal('after', 'p');
  assert.is(fresh.split('.')[1], boxOf(KEY_B).keyId);
  throwsSecretBoxError(() => boxOf(KEY_A).open(fresh, 'p'), /neither/);
});

sealing('isSealed tells sealed values from plain strings', () => {
  const box = boxOf(KEY_A);
  assert.ok(box.isSealed(box.seal('', 'p')));
  for (const value of ['', 'plain', 'v1.a.b.c.d', null, 42, undefined]) assert.not.ok(box.isSealed(value));
});

// ---------------------------------------------------------------------------------------
const macs = suite('SecretBox mac/macVerify');

macs('given data, when MAC\'d, then the MAC is a 32-byte HMAC that differs per purpose, data and key', () => {
  const box = boxOf(KEY_A);
  const mac = box.mac('verp', 'data');
  assert.is(mac.length, 32);
  assert.equal(box.mac('verp', Buffer.from('data')), mac);
  assert.is.not(box.mac('other', 'data').toString('hex'), mac.toString('hex'));
  assert.is.not(box.mac('verp', 'datb').toString('hex'), mac.toString('hex'));
  assert.is.not(boxOf(KEY_B).mac('verp', 'data').toString('hex'), mac.toString('hex'));
});

macs('given a MAC, when verified, then it passes for its purpose and data only, whole or truncated to ≥ 10 bytes', () => {
  const box = boxOf(KEY_A);
  const mac = box.mac('verp', 'data');
  assert.ok(box.macVerify('verp', 'data', mac));
  assert.ok(box.macVerify('verp', 'data', mac.subarray(0, 15)));
  assert.ok(box.macVerify('verp', 'data', new Uint8Array(mac.subarray(0, 10))));
  assert.not.ok(box.macVerify('verp', 'data', mac.subarray(0, 9)), 'below 80 bits is refused');
  assert.not.ok(box.macVerify('verp', 'datA', mac));
  assert.not.ok(box.macVerify('other', 'data', mac));
  const flipped = Buffer.from(mac);
  flipped[31] ^= 1;
  assert.not.ok(box.macVerify('verp', 'data', flipped));
  assert.not.ok(box.macVerify('verp', 'data', Buffer.concat([mac, Buffer.from([0])])));
});

macs('given rotation, when verifying a MAC made with the previous key, then it is accepted; a dropped key is not', () => {
  const oldMac = boxOf(KEY_A).mac('verp', 'in flight').subarray(0, 15);
  assert.ok(boxOf(KEY_B, [KEY_A]).macVerify('verp', 'in flight', oldMac));
  assert.not.ok(boxOf(KEY_B).macVerify('verp', 'in flight', oldMac));
  assert.equal(boxOf(KEY_B, [KEY_A]).mac('verp', 'x'), boxOf(KEY_B).mac('verp', 'x'), 'new MACs use the current key');
});

// ---------------------------------------------------------------------------------------
const keys = suite<{ dirs: string[] }>('loadSecretKeys', { dirs: [] });

const tempDir = (ctx: { dirs: string[] }) => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-secret-'));
  ctx.dirs.push(dir);
  return dir;
};

keys.after.each((ctx) => {
  for (const dir of ctx.dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

keys('given RELAY_SECRET_KEY as base64, base64url or hex, when loaded, then it is the current key and no file is written', async (ctx) => {
  const dir = tempDir(ctx);
  for (const text of [KEY_A.toString('base64'), KEY_A.toString('base64url'), KEY_A.toString('hex'), KEY_A.toString('hex').toUpperCase(), ` ${KEY_A.toString('base64')}\n`]) {
    const loaded = await loadSecretKeys({ secretKey: text, dataDir: dir });
    assert.equal(loaded.current, KEY_A);
    assert.is(loaded.source, 'env');
  }
  assert.throws(() => statSync(join(dir, KEY_FILE_NAME)));
});

keys('given a bad RELAY_SECRET_KEY, when loaded, then it is refused naming the variable and never echoing the value', async () => {
  const bad = ['short', randomBytes(31).toString('base64'), randomBytes(33).toString('base64'), KEY_A.toString('hex').slice(1), `${KEY_A.toString('hex')}00`, 'é'.repeat(44)];
  for (const secretKey of bad) {
    try {
      await loadSecretKeys({ secretKey, dataDir: null });
      assert.unreachable(`accepted ${secretKey}`);
    } catch (error) {
      assert.match((error as Error).message, /RELAY_SECRET_KEY must be 32 random bytes/);
      assert.not.ok((error as Error).message.includes(secretKey), 'the error must not contain the key');
    }
  }
});

keys('given a bad RELAY_SECRET_KEY_PREVIOUS entry, when loaded, then it is refused naming the variable and entry', async () => {
  try {
    await loadSecretKeys({ secretKey: KEY_B.toString('hex'), previousKeys: [KEY_A.toString('hex'), 'nope'], dataDir: null });
    assert.unreachable('accepted a bad previous key');
  } catch (error) {
    assert.match((error as Error).message, /RELAY_SECRET_KEY_PREVIOUS \(entry 2\)/);
  }
});

keys('given previous keys as one comma separated value, when loaded, then each becomes a previous key', async () => {
  assert.equal(splitKeyList(` ${KEY_A.toString('hex')}, ,${KEY_B.toString('base64')} `), [KEY_A.toString('hex'), KEY_B.toString('base64')]);
  const loaded = await loadSecretKeys({ secretKey: randomBytes(32).toString('hex'), previousKeys: [`${KEY_A.toString('hex')},${KEY_B.toString('base64')}`], dataDir: null });
  assert.equal(loaded.previous, [KEY_A, KEY_B]);
});

keys('given neither RELAY_SECRET_KEY nor a data directory, when loaded, then RELAY_SECRET_KEY is required', async () => {
  try {
    await loadSecretKeys({ dataDir: null });
    assert.unreachable('loaded without any key');
  } catch (error) {
    assert.match((error as Error).message, /RELAY_SECRET_KEY is required/);
  }
  try {
    await loadSecretKeys({ secretKey: '  ', dataDir: null });
    assert.unreachable('loaded with a blank key');
  } catch (error) {
    assert.match((error as Error).message, /RELAY_SECRET_KEY is required/);
  }
});

keys('given no RELAY_SECRET_KEY, when loaded twice, then a 0600 key file is created once and reused', async (ctx) => {
  const dir = join(tempDir(ctx), 'nested', 'data');
  const first = await loadSecretKeys({ dataDir: dir });
  const path = join(dir, KEY_FILE_NAME);
  assert.is(first.source, 'file');
  assert.is(first.keyFile, path);
  assert.is(first.current.length, 32);
  assert.is(statSync(path).mode & 0o777, 0o600);
  assert.equal(parseKey(readFileSync(path, 'utf8')), first.current, 'the file holds the key in RELAY_SECRET_KEY form');
  const second = await loadSecretKeys({ dataDir: dir });
  assert.equal(second.current, first.current);
  const sealed = new SecretBox(first).seal('survives a restart', 'p');
  assert.is(new SecretBox(second).open(sealed, 'p'), 'survives a restart');
});

keys('given RELAY_SECRET_KEY and an existing key file, when loaded, then the variable wins', async (ctx) => {
  const dir = tempDir(ctx);
  await loadSecretKeys({ dataDir: dir });
  const loaded = await loadSecretKeys({ secretKey: KEY_A.toString('base64'), dataDir: dir });
  assert.equal(loaded.current, KEY_A);
});

keys('given a damaged key file, when loaded, then it is refused naming the file', async (ctx) => {
  const dir = tempDir(ctx);
  writeFileSync(join(dir, KEY_FILE_NAME), 'not a key\n', { mode: 0o600 });
  try {
    await loadSecretKeys({ dataDir: dir });
    assert.unreachable('accepted a damaged key file');
  } catch (error) {
    assert.match((error as Error).message, new RegExp(`key file .*${KEY_FILE_NAME} must be 32 random bytes`));
  }
});

keys('given several loads starting at once in one process, then they all get the same key', async (ctx) => {
  const dir = tempDir(ctx);
  const loaded = await Promise.all(Array.from({ length: 8 }, () => loadSecretKeys({ dataDir: dir })));
  for (const each of loaded) assert.equal(each.current, loaded[0].current);
});

keys('given several processes starting at once, then they all get the same key', async (ctx) => {
  const dir = tempDir(ctx);
  const moduleUrl = new URL('../infra/secrets/secret-box.ts', import.meta.url).href;
  const script = `const { loadSecretKeys } = await import(${JSON.stringify(moduleUrl)});
    const keys = await loadSecretKeys({ dataDir: ${JSON.stringify(dir)} });
    process.stdout.write(keys.current.toString('hex'));`;
  const run = promisify(execFile);
  const outputs = await Promise.all(Array.from({ length: 4 }, () => run(process.execPath, ['--input-type=module', '-e', script])));
  const hexes = outputs.map((o) => o.stdout);
  assert.match(hexes[0], /^[0-9a-f]{64}$/);
  for (const hex of hexes) assert.is(hex, hexes[0]);
  assert.is(parseKey(readFileSync(join(dir, KEY_FILE_NAME), 'utf8')).toString('hex'), hexes[0]);
});

sealing.run();
macs.run();
keys.run();
