// JSON with object keys sorted at every level: two bodies that differ only in key order
// are the same request for idempotency.
//
// Iterative (an explicit stack), so no input can exhaust the call stack, and byte for byte the
// output of the recursive definition it replaced, which stored fingerprints were computed with:
//   primitive → JSON.stringify(value) ?? 'null'    (undefined, functions, symbols: 'null')
//   array     → '[' + items joined by ',' + ']'     (a hole writes nothing; undefined: 'null')
//   object    → '{' + own enumerable string keys whose value is not undefined, sorted by UTF-16
//               code units, each JSON.stringify(key) + ':' + value, joined by ',' + '}'
// (test/canonical-json.unit.test.ts compares the two on varied inputs.) A cycle, which made the
// recursive form overflow, is a TypeError.

const WRITE = 0;
const TEXT = 1;
const LEAVE = 2;

export function canonicalJson(value: unknown): string {
  let out = '';
  const kinds: number[] = [WRITE];
  const items: unknown[] = [value];
  const open = new Set<object>();
  const push = (kind: number, item: unknown) => {
    kinds.push(kind);
    items.push(item);
  };
  while (kinds.length > 0) {
    const kind = kinds.pop()!;
    const item = items.pop();
    if (kind === TEXT) {
      out += item as string;
      continue;
    }
    if (kind === LEAVE) {
      open.delete(item as object);
      continue;
    }
    if (item === null || typeof item !== 'object') {
      out += JSON.stringify(item) ?? 'null';
      continue;
    }
    if (open.has(item)) throw new TypeError('canonicalJson: the value holds a cycle');
    open.add(item);
    push(LEAVE, item);
    if (Array.isArray(item)) {
      push(TEXT, ']');
      for (let i = item.length - 1; i >= 0; i--) {
        if (i in item) push(WRITE, item[i]);
        if (i > 0) push(TEXT, ',');
      }
      push(TEXT, '[');
    } else {
      const entries = Object.entries(item as Record<string, unknown>)
        .filter(([, v]) => v !== undefined)
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      push(TEXT, '}');
      for (let i = entries.length - 1; i >= 0; i--) {
        push(WRITE, entries[i][1]);
        push(TEXT, `${JSON.stringify(entries[i][0])}:`);
        if (i > 0) push(TEXT, ',');
      }
      push(TEXT, '{');
    }
  }
  return out;
}
