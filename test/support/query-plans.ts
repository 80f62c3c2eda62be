// What a read through the real API asked SQLite, and how SQLite plans it: the list statements
// (those with an ORDER BY) a callback ran over one table, recorded by wrapping node:sqlite's
// StatementSync for the callback's duration only, and EXPLAIN QUERY PLAN of one of them on a
// connection of the test's own.
import { StatementSync, type DatabaseSync, type SQLInputValue } from 'node:sqlite';

export interface RanStatement { sql: string; params: SQLInputValue[] }

/** `run`'s result, and the ordered reads of `table` (quoted in the SQL) it ran, in order. */
export async function listStatementsOf<R>(table: string, run: () => Promise<R>): Promise<{ result: R; ran: RanStatement[] }> {
  const ran: RanStatement[] = [];
  const proto = StatementSync.prototype as unknown as Record<'all' | 'get' | 'iterate', (...args: unknown[]) => unknown>;
  const originals = { all: proto.all, get: proto.get, iterate: proto.iterate };
  for (const method of ['all', 'get', 'iterate'] as const) {
    proto[method] = function recorded(this: StatementSync, ...params: unknown[]) {
      if (this.sourceSQL.includes(`"${table}"`) && /\bORDER BY\b/.test(this.sourceSQL)) ran.push({ sql: this.sourceSQL, params: params as SQLInputValue[] });
      return originals[method].apply(this, params);
    };
  }
  try {
    return { result: await run(), ran };
  } finally {
    Object.assign(proto, originals);
  }
}

/** The lines of SQLite's plan for a recorded statement. */
export function planOf(file: DatabaseSync, { sql, params }: RanStatement): string[] {
  return (file.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((row) => row.detail);
}
