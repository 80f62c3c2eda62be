// Work that must not overlap for one key (the reports about one email: each is decided on the
// stream its predecessor appended to) while work for other keys goes on at the same time. Within
// a process this replaces a revision conflict and its retries with a wait; across processes the
// command handler's retry still decides.

export class SerialByKey {
  readonly #tails = new Map<string, Promise<void>>();

  /** Runs `task` once every task given earlier for `key` has settled. */
  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const result = (this.#tails.get(key) ?? Promise.resolve()).then(task);
    const tail = result.then(() => {}, () => {});
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }

  /** Keys with work queued or running. */
  get size(): number {
    return this.#tails.size;
  }
}
