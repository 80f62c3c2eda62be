// What a transport is in the middle of sending: close() refuses new sends and waits for these,
// so a shutdown never cuts a transaction whose outcome would then be unknown.
export class InFlight {
  readonly #name: string;
  readonly #running = new Set<Promise<unknown>>();
  #closed = false;

  constructor(name: string) {
    this.#name = name;
  }

  get closed(): boolean {
    return this.#closed;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new Error(`${this.#name} transport is closed`);
    const running = work();
    this.#running.add(running);
    try {
      return await running;
    } finally {
      this.#running.delete(running);
    }
  }

  /** Refuses new work and waits for what runs; false if it was closed already. */
  async close(): Promise<boolean> {
    if (this.#closed) return false;
    this.#closed = true;
    await Promise.allSettled([...this.#running]);
    return true;
  }
}
