// Summarizes a V8 .cpuprofile (as written by `node --cpu-prof`): where the self time went, by
// function and by file, so a benchmark can say where its time goes without a profiler UI.
//   node test/bench/cpu-profile.ts file.cpuprofile [top]
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A short place for a script URL: a package name, a path inside the repository, or node's own. */
function placeOf(url: string): string {
  if (!url) return '(native/V8)';
  const path = url.startsWith('file://') ? fileURLToPath(url) : url;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (pkg) return `npm:${pkg[1]}`;
  if (path.startsWith(ROOT)) return path.slice(ROOT.length);
  return path.startsWith('node:') ? path : `node:${path}`;
}

export interface ProfileSummary {
  totalMs: number;
  /** Time the process had nothing to run. */
  idleMs: number;
  byFunction: Array<{ name: string; ms: number }>;
  byPlace: Array<{ name: string; ms: number }>;
  /** Time with the function anywhere on the stack (each function once per sample), Relay's own code only. */
  inclusive: Array<{ name: string; ms: number }>;
}

export function summarizeProfile(file: string, top = 15): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const nameOf = (n: ProfileNode) => `${n.callFrame.functionName || '(anonymous)'} ${placeOf(n.callFrame.url)}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ''}`;
  const ours = (n: ProfileNode) => /\/(apps|infra|domain|projections)\//.test(n.callFrame.url) && !n.callFrame.url.includes('node_modules');
  const inclusive = new Map<string, number>();
  // Per stack (profile node), the set of Relay functions on it; computed once per node.
  const stackNames = new Map<number, string[]>();
  const namesOn = (id: number): string[] => {
    let names = stackNames.get(id);
    if (names) return names;
    const up = parent.get(id);
    const node = byId.get(id)!;
    names = up === undefined ? [] : namesOn(up);
    if (ours(node)) {
      const name = nameOf(node);
      if (!names.includes(name)) names = [...names, name];
    }
    stackNames.set(id, names);
    return names;
  };
  const self = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  for (const [id, us] of self) for (const name of namesOn(id)) inclusive.set(name, (inclusive.get(name) ?? 0) + us);
  const byFunction = new Map<string, number>();
  const byPlace = new Map<string, number>();
  let idle = 0;
  let total = 0;
  for (const [id, us] of self) {
    const { functionName, url } = byId.get(id)!.callFrame;
    total += us;
    if (functionName === '(idle)') {
      idle += us;
      continue;
    }
    const place = placeOf(url);
    const name = nameOf(byId.get(id)!);
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    // GC and the like have no script: they are named by their function.
    const placeName = url ? place : functionName;
    byPlace.set(placeName, (byPlace.get(placeName) ?? 0) + us);
  }
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]).slice(0, top).map(([name, us]) => ({ name, ms: us / 1000 }));
  return { totalMs: total / 1000, idleMs: idle / 1000, byFunction: sorted(byFunction), byPlace: sorted(byPlace), inclusive: sorted(inclusive) };
}

export function printProfileSummary(label: string, file: string, top = 15): void {
  const s = summarizeProfile(file, top);
  const busy = s.totalMs - s.idleMs;
  const pct = (ms: number) => `${((ms / busy) * 100).toFixed(1).padStart(5)}%`;
  console.log(`\n${label}: ${file}`);
  console.log(`  ${(s.totalMs / 1000).toFixed(1)} s profiled, ${(busy / 1000).toFixed(1)} s busy (${((busy / s.totalMs) * 100).toFixed(0)}% of one core); self time, share of busy:`);
  console.log('  by file/package:');
  for (const e of s.byPlace) console.log(`    ${pct(e.ms)}  ${e.name}`);
  console.log('  by function:');
  for (const e of s.byFunction) console.log(`    ${pct(e.ms)}  ${e.name}`);
  console.log('  Relay functions, inclusive (on the stack; an async function counts between its awaits):');
  for (const e of s.inclusive) console.log(`    ${pct(e.ms)}  ${e.name}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (!process.argv[2]) {
    console.error('usage: node test/bench/cpu-profile.ts file.cpuprofile [top]');
    process.exit(2);
  }
  printProfileSummary('profile', process.argv[2], Number(process.argv[3] ?? 25));
}
