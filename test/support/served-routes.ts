// The routes an app serves, read from fastify's printRoutes tree: "METHOD /path", every
// parameter written ":" (the tree does not keep their names). Route-coverage tests compare it
// with their own tables, so a route added later without a row fails them.
import type { TestApp } from './app.ts';

export function servedRoutes(t: Pick<TestApp, 'app'>): Set<string> {
  const served = new Set<string>();
  const stack: string[] = [];
  for (const line of t.app.printRoutes({ commonPrefix: false }).split('\n')) {
    const at = line.search(/[^│├└─\s]/);
    if (at < 0) continue;
    stack.length = at / 4 - 1;
    const match = /^(\S+)(?: \(([^)]*)\))?/.exec(line.slice(at))!;
    stack.push(match[1].replace(/:[\w|:]+/g, ':'));
    for (const method of match[2]?.split(', ') ?? []) served.add(`${method} ${stack.join('')}`);
  }
  return served;
}
