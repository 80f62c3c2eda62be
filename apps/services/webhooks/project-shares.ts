// Each project's share of the webhooks processor's requests in flight. The bound per endpoint and
// the one on slow endpoints (./slow-endpoints.ts) leave a gap: endpoints that fail after a few
// seconds, under what makes an endpoint slow, are ordinary endpoints, and a project's 20 of them
// at 4 requests each would hold more than every slot, so another project's deliveries would wait
// behind that project's backlog.
//
// So a project's endpoints together hold at most `share` requests (a quarter) while another
// project has deliveries due, and at most `alone` (three quarters) while none has: one project
// alone (a single-project installation, or a quiet hour) is not held to a quarter of the
// processor, and another project's delivery that falls due still finds the last quarter free.
// Once a project holds its share, none of its deliveries starts (the dispatcher's bound of each
// of its endpoints is 0) and the schedule's reads leave out the project (dueDeliveries), as they
// leave out an endpoint at its bound: its backlog, however long, never fills the window in front
// of another project's deliveries. State is in memory, per process.

/** Endpoints whose project is remembered, at most: the one a read found longest ago is forgotten first. */
export const MAX_KNOWN_ENDPOINTS = 4_096;

export class ProjectShares {
  readonly #share: number;
  readonly #alone: number;
  /** No other project's delivery was due at the last read: a project may hold `alone`. */
  #othersIdle = false;
  /** Requests in flight (runs started, not ended) by project. */
  readonly #running = new Map<string, number>();
  /**
   * Each endpoint's project, as reads of the schedule found it (an endpoint never moves), most
   * recently found last: the dispatcher asks for an endpoint's bound by its id alone.
   */
  readonly #projectOf = new Map<string, string>();

  /**
   * `share`: the requests in flight that one project's endpoints may hold together while another
   * project has deliveries due; `alone` (at least `share`): while none has.
   */
  constructor(options: { share: number; alone?: number }) {
    this.#share = options.share;
    this.#alone = Math.max(options.share, options.alone ?? options.share);
  }

  /**
   * Reads the schedule (`read`: the deliveries due, leaving out the projects given) so that a
   * project holds no more than its share: first leaving out the projects at `share`; when that
   * finds nothing due and only one project is at its share, no other project waits, and the read
   * is made again leaving out only those at `alone`.
   */
  async due<T extends { endpointId: string; projectId: string }>(read: (leftOut: ReadonlySet<string>) => Promise<T[]>): Promise<T[]> {
    const atShare = this.#atLeast(this.#share);
    let due = await read(atShare);
    // Alone: one project at its share and nothing due of any other. Two at their share are not.
    this.#othersIdle = due.length === 0 && atShare.size === 1;
    if (this.#othersIdle) due = await read(this.#atLeast(this.#alone));
    this.read(due);
    return due;
  }

  /** A read of the schedule found deliveries to these endpoints, of these projects. */
  read(deliveries: Iterable<{ endpointId: string; projectId: string }>): void {
    for (const { endpointId, projectId } of deliveries) this.#know(endpointId, projectId);
  }

  /** A run of a delivery of the project's, to the endpoint, started. */
  started(projectId: string, endpointId: string): void {
    this.#know(endpointId, projectId);
    this.#running.set(projectId, (this.#running.get(projectId) ?? 0) + 1);
  }

  /** A run started with `started` ended. */
  ended(projectId: string): void {
    const left = (this.#running.get(projectId) ?? 1) - 1;
    if (left === 0) this.#running.delete(projectId);
    else this.#running.set(projectId, left);
  }

  /** The projects holding their share now: none of their deliveries may start, and reads leave them out. */
  full(): ReadonlySet<string> {
    return this.#atLeast(this.#cap());
  }

  /** Whether the endpoint's project holds its share (false for an endpoint no read found). */
  holdsShare(endpointId: string): boolean {
    const projectId = this.#projectOf.get(endpointId);
    return projectId !== undefined && (this.#running.get(projectId) ?? 0) >= this.#cap();
  }

  #cap(): number {
    return this.#othersIdle ? this.#alone : this.#share;
  }

  #atLeast(cap: number): Set<string> {
    const full = new Set<string>();
    for (const [projectId, running] of this.#running) if (running >= cap) full.add(projectId);
    return full;
  }

  #know(endpointId: string, projectId: string): void {
    // Deleted first, so that the map's order stays the order of the last reads.
    this.#projectOf.delete(endpointId);
    this.#projectOf.set(endpointId, projectId);
    if (this.#projectOf.size > MAX_KNOWN_ENDPOINTS) this.#projectOf.delete(this.#projectOf.keys().next().value!);
  }
}
