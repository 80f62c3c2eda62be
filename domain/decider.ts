// What a stream type is, as pure functions: the commands it takes, the events it records and the
// state folded from them. apps/services/command-handler.ts reads, folds, decides and appends
// with these; nothing here does I/O.

export interface DomainEvent {
  type: string;
  data: object;
}

/** What an event store hands back, structurally (the domain knows no adapter). */
export interface StoredEventLike {
  id: string;
  streamId: string;
  revision: number;
  type: string;
  data: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  /** When the store recorded it. */
  recordedAt?: string;
}

/** How a stream type is read: upcast, fold. */
export interface StreamReader<S, E extends DomainEvent> {
  /** Folds events onto a state (one call per batch: some states are large to copy). */
  fold(events: E[], state: S): S;
  initialState(): S;
  /**
   * The stream's one reading point: turns a stored event of any schema version into today's
   * type; null for one this version cannot read, which the fold then skips.
   */
  upcast(stored: StoredEventLike): E | null;
  /** The schema version each event type is written with now (default 1). */
  schemaVersions?: Partial<Record<E['type'], number>>;
}

export interface Decider<C, S, E extends DomainEvent> extends StreamReader<S, E> {
  decide(command: C, state: S): E[];
}

/** For the `default:` of a switch over a union: a member left unhandled fails the typecheck here. */
export function unhandled(value: never, what: string): never {
  throw new Error(`unhandled ${what}: ${JSON.stringify(value)}`);
}
