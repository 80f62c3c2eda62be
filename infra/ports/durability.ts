// One durability wait per command instead of one per write.
//
// A store's write promise normally settles once the write is durable. A command that makes
// several writes in sequence (an admission: rate slots, content key, usage charge, email)
// would then wait for one commit and fsync per write. Inside `deferDurability`, a store whose
// writes become durable later than they take effect (the embedded sqlite stores, with their
// group commit) resolves a successful write as soon as it took effect on its connection, and
// records what must still become durable; the scope then waits for all of it once, before it
// returns or throws. So the caller still answers nothing that a power loss could undo, and the
// command's writes share one commit round.
//
// Only successes are given early: a refusal (a revision conflict, a taken key) still settles
// once the batch it was decided in is durable, because the caller's next step after a refusal
// is a read, and reads see only committed data.
//
// Stores that acknowledge a write only once it is durable (EventStoreDB, MongoDB with
// w: majority, j: true) never register anything: a scope costs them nothing.
import { AsyncLocalStorage } from 'node:async_hooks';

/** Something that can say when everything written through it so far is durable. */
export interface DurabilityBarrier {
  /** Resolves once every write that took effect before this call is durable; rejects if one never will be. */
  barrier(): Promise<void>;
}

export class DurabilityScope {
  readonly #pending = new Set<DurabilityBarrier>();
  /** Barriers asked for by a settle that has not ended: a concurrent settle waits for them too. */
  readonly #asked = new Set<Promise<void>>();
  /** A barrier that failed: every later settle fails with it, since the writes it covered are lost. */
  #lost: { error: unknown } | null = null;
  #closed = false;

  /** False once its command has settled: later writes in its async context are not given early. */
  get open(): boolean {
    return !this.#closed;
  }

  /** Records that a write through `store` took effect in this scope but may not be durable yet. */
  wrote(store: DurabilityBarrier): void {
    this.#pending.add(store);
  }

  /** Takes over what `other` still has to see become durable. */
  adopt(other: DurabilityScope): void {
    for (const store of other.#pending) this.#pending.add(store);
  }

  /**
   * Resolves once every write recorded before the call is durable, including those whose
   * barrier a concurrent settle asked for; rejects when one of them never will be.
   */
  async settle(): Promise<void> {
    for (;;) {
      if (this.#lost) throw this.#lost.error;
      if (this.#pending.size > 0) {
        const stores = [...this.#pending];
        this.#pending.clear();
        const asked: Promise<void> = Promise.all(stores.map((store) => store.barrier())).then(
          () => void this.#asked.delete(asked),
          (error: unknown) => {
            this.#lost ??= { error };
            this.#asked.delete(asked);
          },
        );
        this.#asked.add(asked);
      }
      if (this.#asked.size === 0) return;
      await Promise.all(this.#asked);
    }
  }

  /** Ends the scope (deferDurability does, once its command has settled). */
  close(): void {
    this.#closed = true;
  }
}

const scopes = new AsyncLocalStorage<DurabilityScope>();

/**
 * The scope the current async context runs in, if any (for store adapters). A timer or loop
 * started inside a command keeps the command's context after it answered: its writes must not
 * be given early to a scope nobody settles any more, so a closed scope counts as none.
 */
export function currentDurabilityScope(): DurabilityScope | undefined {
  const scope = scopes.getStore();
  return scope?.open ? scope : undefined;
}

/**
 * Inside a scope: waits until every write the scope made so far is durable, for a step that
 * must not happen before (a delivery's claim before its SMTP transaction). Outside: nothing.
 */
export async function durableSoFar(): Promise<void> {
  await currentDurabilityScope()?.settle();
}

/**
 * Calls `then` once every write made so far in the current scope is durable (or lost), without
 * holding the caller; outside a scope, at once. For a wake-up whose reader is on another
 * connection and must find the write there (a dispatcher kicked for the item just written).
 */
export function afterDurable(then: () => void): void {
  const scope = currentDurabilityScope();
  if (!scope) then();
  else scope.settle().then(then, then);
}

/**
 * Runs `command` with deferred durability and settles like it once all of its writes are
 * durable. When that wait fails, the scope fails with the store's error whatever the command
 * answered: an answer, a refusal included, may rest on writes that are now lost. The command
 * is handed its scope, for a step that needs part of its writes durable early (scope.settle()).
 */
export async function deferDurability<T>(command: (scope: DurabilityScope) => Promise<T>): Promise<T> {
  const scope = new DurabilityScope();
  let outcome: { ok: true; value: T } | { ok: false; error: unknown };
  try {
    outcome = { ok: true, value: await scopes.run(scope, () => command(scope)) };
  } catch (error) {
    outcome = { ok: false, error };
  }
  try {
    await scope.settle();
  } finally {
    scope.close();
  }
  if (!outcome.ok) throw outcome.error;
  return outcome.value;
}

/**
 * Runs a write made on behalf of several commands at once (the usage ledger appends the charges
 * of concurrent admissions together): what must still become durable goes to each caller's
 * scope, not to the scope of whichever caller's context happened to start the write. A caller
 * outside any scope must only hear of a durable write, so then this waits for durability itself.
 */
export async function writeOnBehalfOf<T>(callers: ReadonlyArray<DurabilityScope | undefined>, write: () => Promise<T>): Promise<T> {
  const own = new DurabilityScope();
  let value: T;
  try {
    value = await scopes.run(own, write);
  } catch (error) {
    await own.settle().catch(() => {});
    throw error;
  }
  for (const caller of callers) caller?.adopt(own);
  if (callers.some((caller) => caller === undefined)) await own.settle();
  return value;
}

const lostWritesListeners = new Set<(error: unknown) => void>();
let lostWritesReports = 0;

/**
 * Subscribes a cache built from what writes returned (the usage ledger's folded streams) to
 * news that writes given early inside a scope were lost after all (their batch failed to
 * commit or sync): whatever it learned from them is wrong. Returns the unsubscribe.
 */
export function onLostWrites(listener: (error: unknown) => void): () => void {
  lostWritesListeners.add(listener);
  return () => lostWritesListeners.delete(listener);
}

/**
 * How many times early writes were reported lost so far. A cache that learns from a write's
 * result compares it before and after the write: the report can come before the result does
 * (a batch that commits, and fails, inside the write that filled it).
 */
export function lostWritesReported(): number {
  return lostWritesReports;
}

/** For store adapters: writes given early inside a scope were lost. */
export function reportLostWrites(error: unknown): void {
  lostWritesReports++;
  for (const listener of lostWritesListeners) {
    try {
      listener(error);
    } catch {
      // One listener's failure must not keep the news from the others.
    }
  }
}
