// README.md ("Modes", Distributed) and docs/distributed.md tell the operator which processes to
// run, one `relay processor <name>` per consumer group. Every processor Relay has must be
// among them: one left out is a consumer group nobody runs, and its read model never fills
// (the deliverability processor keeps the collection GET /v1/projects/:id/stats sums).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { PROCESSORS } from '../apps/processors/registry.ts';
import { readDoc } from './support/doc-blocks.ts';

const test = suite('the distributed-mode instructions run every processor');

/** Processor names the prose and shell lines of a passage tell the operator to run. */
function processorsNamed(text: string): Set<string> {
  const names = new Set<string>();
  for (const m of text.matchAll(/relay -- processor ([a-z-]+)/g)) names.add(m[1]);
  // README: "# and sender, suppressor, webhooks: one group each"
  const and = /processor projector\s+#\s*and ([a-z, -]+):/.exec(text);
  if (and) for (const n of and[1].split(',')) names.add(n.trim());
  return names;
}

const all = PROCESSORS.map((p) => p.name).sort();

test('README.md, Modes → Distributed', () => {
  const readme = readDoc('README.md');
  const section = readme.slice(readme.indexOf('**Distributed**'), readme.indexOf('## Performance'));
  const named = processorsNamed(section);
  assert.equal(all.filter((n) => !named.has(n)), [], `README names ${[...named].sort().join(', ')}; Relay has ${all.join(', ')}`);
});

test('docs/distributed.md, the first shell block', () => {
  const doc = readDoc('docs/distributed.md');
  const block = /```sh\n([\s\S]*?)```/.exec(doc)![1];
  const named = processorsNamed(block);
  assert.equal(all.filter((n) => !named.has(n)), [], `docs/distributed.md names ${[...named].sort().join(', ')}; Relay has ${all.join(', ')}`);
});

test.run();
