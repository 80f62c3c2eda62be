// Bench instrumentation: counts the SQL statements the embedded adapters run on this thread,
// the time spent in them and the write transactions, by the part of Relay that ran them
// (`startRelay`'s runPart: an AsyncLocalStorage context set as each part starts follows all
// of its work, its consumer loop, timers and requests included). Nothing in the adapters
// changes: enabling it wraps the methods of node:sqlite's DatabaseSync and StatementSync, so
// a process that never enables it pays nothing.
//
// A write transaction is a BEGIN (its COMMIT runs a turn later, counted with the part that
// opened the batch); a write is one group-commit write (a call of its run or runStatement). Statements other
// threads run (the pipeline thread's, with BENCH_PIPELINE_THREAD=1) are not counted.
import { AsyncLocalStorage } from 'node:async_hooks';
import { DatabaseSync, StatementSync } from 'node:sqlite';
import { GroupCommit } from '../../infra/sqlite/group-commit.ts';

export interface PartTally { statements: number; ms: number; transactions: number; writes: number }
export interface StatementTally { sql: string; count: number; ms: number }
export interface SqlStats { parts: Record<string, PartTally>; statements: StatementTally[] }

const current = new AsyncLocalStorage<string>();
let parts = new Map<string, PartTally>();
let statements = new Map<string, StatementTally>();
let enabled = false;

/** Runs a part's start inside its context (pass as startRelay's runPart). */
export const runPart = <T>(part: string, start: () => Promise<T>): Promise<T> => current.run(part, start);

const label = (sql: string) => sql.replace(/\s+/g, ' ').trim().slice(0, 110);

function partTally(): PartTally {
  const part = current.getStore() ?? 'other';
  let p = parts.get(part);
  if (!p) parts.set(part, (p = { statements: 0, ms: 0, transactions: 0, writes: 0 }));
  return p;
}

function tally(sql: string, ms: number): void {
  const p = partTally();
  p.statements++;
  p.ms += ms;
  if (sql.startsWith('BEGIN')) p.transactions++;
  let s = statements.get(sql);
  if (!s) statements.set(sql, (s = { sql: label(sql), count: 0, ms: 0 }));
  s.count++;
  s.ms += ms;
}

function wrap(proto: object, method: string, sqlOf: (self: unknown, args: unknown[]) => string): void {
  const original = (proto as Record<string, (...args: unknown[]) => unknown>)[method];
  Object.defineProperty(proto, method, {
    configurable: true, writable: true,
    value: function counted(this: unknown, ...args: unknown[]) {
      const began = performance.now();
      try {
        return original.apply(this, args);
      } finally {
        tally(sqlOf(this, args), performance.now() - began);
      }
    },
  });
}

/** Wraps the statement methods of this thread (once). */
export function countSql(): void {
  if (enabled) return;
  enabled = true;
  const source = (self: unknown) => (self as StatementSync).sourceSQL;
  for (const method of ['run', 'get', 'all', 'iterate']) wrap(StatementSync.prototype, method, source);
  wrap(DatabaseSync.prototype, 'exec', (_self, args) => String(args[0]));
  for (const method of ['run', 'runStatement'] as const) {
    const original = GroupCommit.prototype[method];
    Object.defineProperty(GroupCommit.prototype, method, {
      configurable: true, writable: true,
      value: function counted(this: GroupCommit, ...args: Parameters<GroupCommit['run']>) {
        partTally().writes++;
        return original.apply(this, args);
      },
    });
  }
}

export function resetSqlStats(): void {
  parts = new Map();
  statements = new Map();
}

export function sqlStats(): SqlStats {
  return {
    parts: Object.fromEntries(parts),
    statements: [...statements.values()].sort((a, b) => b.ms - a.ms),
  };
}

/** Every part's tally added up. */
export function sqlTotal(stats: SqlStats): PartTally {
  const total: PartTally = { statements: 0, ms: 0, transactions: 0, writes: 0 };
  for (const p of Object.values(stats.parts)) {
    total.statements += p.statements;
    total.ms += p.ms;
    total.transactions += p.transactions;
    total.writes += p.writes;
  }
  return total;
}
