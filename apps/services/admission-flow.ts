// Admission flow control: a send waits while the pipeline is too far behind, as Postfix's
// smtpd waits (in_flow_delay) while its queue manager does not keep up. Admission costs a
// fraction of what the rest of an email's life costs (composing, signing, delivering,
// projecting), so without it clients that send as fast as they are answered fill the log
// faster than the processors drain it, and the lag grows for as long as they send: minutes
// between a 202 and the email being listed or sent. Waiting in front of admission makes such
// clients go at the pipeline's pace, and the lag stays bounded.
//
// The backlog is what the slowest watched consumer group has not handled yet (records of the
// events topic, Log.groupOffsets), read at most once per `refreshMs` and only while sends come
// in. A send goes ahead once the backlog is at or under `maxBacklog`, or after `maxWaitMs`
// however far behind the pipeline is: flow control slows clients down, it never refuses or
// loses an email, and a stopped processor (which its own alerts report) costs each send at
// most `maxWaitMs`. A backlog that cannot be read lets sends through: the log's readiness
// check reports that failure, and admission must not depend on it.
import { partitionLag, type Log } from '../../infra/ports/log.ts';

export interface AdmissionFlowPolicy {
  /** Records the slowest watched group may be behind while sends go ahead at once; 0 = off. */
  maxBacklog: number;
  /** The longest a send waits for the pipeline before it goes ahead anyway. */
  maxWaitMs: number;
}

/** Whether a send that has waited `waitedMs` goes ahead with the pipeline `backlog` records behind. */
export const mayAdmit = (policy: AdmissionFlowPolicy, backlog: number, waitedMs: number): boolean =>
  policy.maxBacklog === 0 || backlog <= policy.maxBacklog || waitedMs >= policy.maxWaitMs;

/** What one send's pass through the gate came to. */
export type FlowOutcome = 'admitted' | 'caught_up' | 'timed_out';

/** Records the slowest of `groups` has not handled on `topic` (its lag summed over the partitions). */
export async function slowestGroupBacklog(log: Log, topic: string, groups: readonly string[]): Promise<number> {
  const behind = new Map<string, number>(groups.map((group) => [group, 0]));
  for (const o of await log.groupOffsets(topic, groups)) behind.set(o.group, (behind.get(o.group) ?? 0) + partitionLag(o));
  return Math.max(0, ...behind.values());
}

export interface AdmissionFlowOptions extends AdmissionFlowPolicy {
  /** The backlog now (slowestGroupBacklog, or a test's). */
  backlog: () => Promise<number>;
  /** How old a backlog read may be before the next send reads it again. */
  refreshMs?: number;
  /** Each backlog read (the relay_admission_backlog_records gauge). */
  onBacklog?: (records: number) => void;
  /** Each send that had to wait, once it goes ahead (relay_admission_flow_waits_total). */
  onWaited?: (outcome: Exclude<FlowOutcome, 'admitted'>, waitedMs: number) => void;
  /** A backlog read that failed (logged once per failure streak by the caller). */
  onReadError?: (error: unknown) => void;
}

export class AdmissionFlow {
  readonly #options: AdmissionFlowOptions;
  readonly #refreshMs: number;
  #backlog = 0;
  #readAt = Number.NEGATIVE_INFINITY;
  #reading: Promise<number> | null = null;
  #waiting = 0;

  constructor(options: AdmissionFlowOptions) {
    this.#options = options;
    this.#refreshMs = options.refreshMs ?? 50;
  }

  /** Resolves when the send may go ahead: at once while the pipeline keeps up. */
  async pass(): Promise<FlowOutcome> {
    if (this.#options.maxBacklog === 0) return 'admitted';
    const started = performance.now();
    let waited = 0;
    if (mayAdmit(this.#options, await this.#current(), waited)) return 'admitted';
    this.#waiting++;
    try {
      do {
        // Until the next read can differ, or the wait runs out.
        await new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.min(this.#refreshMs, this.#options.maxWaitMs - waited))));
        waited = performance.now() - started;
      } while (!mayAdmit(this.#options, await this.#current(), waited));
    } finally {
      this.#waiting--;
    }
    const outcome = waited >= this.#options.maxWaitMs ? 'timed_out' : 'caught_up';
    this.#options.onWaited?.(outcome, waited);
    return outcome;
  }

  /** Sends waiting now. */
  get waiting(): number {
    return this.#waiting;
  }

  /** The last backlog read, read again when older than refreshMs; one read at a time for all sends. */
  #current(): Promise<number> | number {
    if (performance.now() - this.#readAt < this.#refreshMs) return this.#backlog;
    this.#reading ??= this.#options.backlog().then(
      (records) => {
        this.#backlog = records;
        this.#options.onBacklog?.(records);
        return records;
      },
      (error: unknown) => {
        this.#options.onReadError?.(error);
        this.#backlog = 0;
        return 0;
      },
    ).finally(() => {
      this.#readAt = performance.now();
      this.#reading = null;
    });
    return this.#reading;
  }
}
