// docs/configuration.md, "HTTP limits" (fixed; apps/api/connection-limits.ts): after a refusal
// sent before the body is read, "what the client still sends is discarded (up to X; after a 401,
// up to the route's own body limit, L for a send; after a 404, Y), then the socket closes (after
// A s at most, and after a 401 also once B s pass without a byte; C s after a 404)". Those
// figures must be the ones the server applies (DEFAULT_LIMITS, the send's body limit), as
// apps/api/INTERFACE-DECISIONS.md (Lengths) states them.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DEFAULT_LIMITS } from '../apps/api/connection-limits.ts';
import { MAX_REQUEST_BYTES } from '../apps/api/server.ts';
import { readDoc } from './support/doc-blocks.ts';

const test = suite('docs/configuration.md: the HTTP limits are what the server applies');

const bytes = (n: string, unit: string) => Number(n) * (unit === 'MiB' ? 1024 * 1024 : 1024);

test('what a refused request may still send, and how long its socket stays', () => {
  const doc = readDoc('docs/configuration.md').replace(/\s+/g, ' ');
  const m = new RegExp(
    'discarded \\(up to (\\d+) (KiB|MiB); after a 401, up to the route\'s own body limit, (\\d+) (KiB|MiB) for a send; after a 404, (\\d+) (KiB|MiB)\\), '
    + 'then the socket closes \\(after (\\d+) s at most, and after a 401 also once (\\d+) s passes without a byte; (\\d+) s after a 404\\)',
  ).exec(doc);
  assert.ok(m, 'the sentence is in docs/configuration.md');
  const [, b, bu, sb, sbu, ub, ubu, s, idle, us] = m!;
  assert.equal({
    lingerBytes: bytes(b, bu), sendBodyLimit: bytes(sb, sbu), unauthenticatedLingerBytes: bytes(ub, ubu),
    lingerMs: Number(s) * 1000, idleAfter401Ms: Number(idle) * 1000, unauthenticatedLingerMs: Number(us) * 1000,
  }, {
    lingerBytes: DEFAULT_LIMITS.lingerBytes, sendBodyLimit: MAX_REQUEST_BYTES, unauthenticatedLingerBytes: DEFAULT_LIMITS.unauthenticatedLingerBytes,
    lingerMs: DEFAULT_LIMITS.lingerMs, idleAfter401Ms: DEFAULT_LIMITS.unauthenticatedLingerMs, unauthenticatedLingerMs: DEFAULT_LIMITS.unauthenticatedLingerMs,
  });
});

test.run();
