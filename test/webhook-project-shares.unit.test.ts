// A project's share of the webhooks dispatcher's requests in flight
// (apps/services/webhooks/project-shares.ts): which projects hold theirs, whose endpoints the
// dispatcher then gives a bound of 0 (an endpoint's project is known from the reads of the
// schedule), and the bounded memory of endpoints.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { MAX_KNOWN_ENDPOINTS, ProjectShares } from '../apps/services/webhooks/project-shares.ts';

test('a project holds its share once its runs in flight reach it, and no longer once one ends; other projects are not held', () => {
  const projects = new ProjectShares({ share: 2 });
  projects.read([{ endpointId: 'a1', projectId: 'A' }, { endpointId: 'a2', projectId: 'A' }, { endpointId: 'b1', projectId: 'B' }]);
  projects.started('A', 'a1');
  assert.equal([...projects.full()], []);
  assert.not.ok(projects.holdsShare('a2'));
  projects.started('A', 'a1');
  projects.started('B', 'b1');
  assert.equal([...projects.full()], ['A']);
  assert.ok(projects.holdsShare('a1'), 'an endpoint with runs in flight');
  assert.ok(projects.holdsShare('a2'), 'an endpoint of the project read but not running');
  assert.not.ok(projects.holdsShare('b1'));
  assert.not.ok(projects.holdsShare('unknown'), 'an endpoint no read found');
  projects.ended('A');
  assert.equal([...projects.full()], []);
  assert.not.ok(projects.holdsShare('a2'));
});

test('a project alone may hold up to `alone`; once another project has deliveries due, its share again', async () => {
  const projects = new ProjectShares({ share: 2, alone: 3 });
  const pending = [{ endpointId: 'a1', projectId: 'A' }];
  const readLeavingOut: string[][] = [];
  let dueOfB = false;
  const read = async (leftOut: ReadonlySet<string>) => {
    readLeavingOut.push([...leftOut]);
    return [...pending, ...(dueOfB ? [{ endpointId: 'b1', projectId: 'B' }] : [])].filter((d) => !leftOut.has(d.projectId));
  };
  projects.started('A', 'a1');
  projects.started('A', 'a1');
  // Given A at its share and nothing else due, when the schedule is read, then A's deliveries are read and A may go on.
  assert.equal((await projects.due(read)).map((d) => d.projectId), ['A']);
  assert.equal(readLeavingOut, [['A'], []], 'read leaving A out, then again with A below its cap when alone');
  assert.not.ok(projects.holdsShare('a1'));
  projects.started('A', 'a1');
  assert.ok(projects.holdsShare('a1'), 'at `alone`');
  // Given B's delivery due, when the schedule is read, then B's is read and A is held to its share again.
  dueOfB = true;
  readLeavingOut.length = 0;
  assert.equal((await projects.due(read)).map((d) => d.projectId), ['B']);
  assert.equal(readLeavingOut, [['A']], 'one read: another project waits');
  projects.ended('A');
  assert.ok(projects.holdsShare('a1'), 'two in flight: its share while B waits');
});

test('endpoints remembered are bounded, the one read longest ago forgotten first', () => {
  const projects = new ProjectShares({ share: 1 });
  projects.read(Array.from({ length: MAX_KNOWN_ENDPOINTS }, (_, i) => ({ endpointId: `e${i}`, projectId: 'B' })));
  projects.started('B', 'e0');
  assert.ok(projects.holdsShare('e1'));
  projects.read([{ endpointId: 'other', projectId: 'C' }]);
  assert.not.ok(projects.holdsShare('e1'), 'forgotten: read longest ago');
  assert.ok(projects.holdsShare('e0'), 'kept: started since');
  assert.ok(projects.holdsShare('e2'));
});

test.run();
