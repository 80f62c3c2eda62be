// Tests only: a reader connection whose statements fail on demand, to show what the adapters
// and the parts above them do when their file cannot be read for a while (a lock held past the
// busy timeout, an I/O error). Each statement asks `fault` before it runs; an error it returns
// is thrown instead of running it, as sqlite's own would be. Writes go through the writer
// connection and are not touched.
import type { DatabaseSync, StatementSync } from 'node:sqlite';

/** Asked with a statement's SQL before each run; an error to throw instead, or null to run it. */
export type ReadFault = (sql: string) => Error | null;

const RUNS = new Set<PropertyKey>(['all', 'get', 'iterate', 'run']);

export function withReadFault(db: DatabaseSync, fault: ReadFault): DatabaseSync {
  return new Proxy(db, {
    get(target, property) {
      if (property === 'prepare') return (sql: string) => faultyStatement(target.prepare(sql), sql, fault);
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

function faultyStatement(statement: StatementSync, sql: string, fault: ReadFault): StatementSync {
  return new Proxy(statement, {
    get(target, property) {
      const value = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      if (!RUNS.has(property)) return value.bind(target);
      return (...args: unknown[]) => {
        const error = fault(sql);
        if (error) throw error;
        return value.apply(target, args);
      };
    },
  });
}
