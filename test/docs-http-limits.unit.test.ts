// docs/configuration.md, "HTTP limits" (fixed; apps/api/connection-limits.ts): after a refusal
// sent before the body is read, "what the client still sends is discarded (up to X, Y after a
// 401), then the socket closes (after A s at most, B s after a 401)". Those figures must be the
// ones the server applies (DEFAULT_LIMITS), as apps/api/INTERFACE-DECISIONS.md (Lengths) states them.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DEFAULT_LIMITS } from '../apps/api/connection-limits.ts';
import { readDoc } from './support/doc-blocks.ts';

const test = suite('docs/configuration.md: the HTTP limits are what the server applies');

const bytes = (n: string, unit: string) => Number(n) * (unit === 'MiB' ? 1024 * 1024 : 1024);

test('what a refused request may still send, and how long its socket stays', () => {
  const doc = readDoc('docs/configuration.md').replace(/\s+/g, ' ');
  const m = /discarded \(up to (\d+) (KiB|MiB), (\d+) (KiB|MiB) after a 401\), then the socket closes \(after (\d+) s at most, (\d+) s after a 401\)/.exec(doc);
  assert.ok(m, 'the sentence is in docs/configuration.md');
  const [, b, bu, ub, ubu, s, us] = m!;
  assert.equal({
    lingerBytes: bytes(b, bu), unauthenticatedLingerBytes: bytes(ub, ubu), lingerMs: Number(s) * 1000, unauthenticatedLingerMs: Number(us) * 1000,
  }, {
    lingerBytes: DEFAULT_LIMITS.lingerBytes, unauthenticatedLingerBytes: DEFAULT_LIMITS.unauthenticatedLingerBytes,
    lingerMs: DEFAULT_LIMITS.lingerMs, unauthenticatedLingerMs: DEFAULT_LIMITS.unauthenticatedLingerMs,
  });
});

test.run();
