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
// check reports that failure, and admission must neither depend on it nor wait for it. A read
// still unanswered when a send's wait runs out (a broker that is down: its client retries for
// seconds before it gives up) counts as unknown, and the send goes ahead; while reads fail or
// come late, sends go ahead at once, without waiting for the next read, which comes
// `retryAfterFailureMs` after a failure, doubling up to MAX_RETRY_AFTER_FAILURE_MS.
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
  /** A backlog read that failed or answered too late for a send (logged once per failure streak by the caller). */
  onReadError?: (error: unknown) => void;
  /** The wait before the read after a failed one; doubles at each failure in a row. Default 5 s. */
  retryAfterFailureMs?: number;
}

/** The longest wait between backlog reads while they fail. */
const MAX_RETRY_AFTER_FAILURE_MS = 60_000;

/** A read that has not answered in time: what the backlog is, is not known. */
const UNKNOWN = null;

export class AdmissionFlow {
  readonly #options: AdmissionFlowOptions;
  readonly #refreshMs: number;
  readonly #retryAfterFailureMs: number;
  #backlog = 0;
  #readAt = Number.NEGATIVE_INFINITY;
  #reading: { answer: Promise<number | null>; startedAt: number } | null = null;
  /** The last read failed or came too late: sends do not wait for the next one. */
  #unreadable = false;
  /** No read before this (performance.now()), after a failure. */
  #retryAt = Number.NEGATIVE_INFINITY;
  #nextRetryDelay: number;
  #waiting = 0;

  constructor(options: AdmissionFlowOptions) {
    this.#options = options;
    this.#refreshMs = options.refreshMs ?? 50;
    this.#retryAfterFailureMs = options.retryAfterFailureMs ?? 5000;
    this.#nextRetryDelay = this.#retryAfterFailureMs;
  }

  /**
   * Resolves when the send may go ahead: at once while the pipeline keeps up, after maxWaitMs at
   * the latest. `beforeWaiting` runs only when the send is about to wait: what it throws is the
   * send's answer at once (a refusal it already knows), and the send does not wait.
   */
  async pass(beforeWaiting?: () => void): Promise<FlowOutcome> {
    if (this.#options.maxBacklog === 0) return 'admitted';
    const started = performance.now();
    let backlog = await this.#current(started + this.#options.maxWaitMs);
    if (backlog === UNKNOWN || mayAdmit(this.#options, backlog, 0)) return 'admitted';
    beforeWaiting?.();
    this.#waiting++;
    let waited = 0;
    try {
      do {
        // Until the next read can differ, or the wait runs out.
        await new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.min(this.#refreshMs, this.#options.maxWaitMs - waited))));
        backlog = await this.#current(started + this.#options.maxWaitMs);
        waited = performance.now() - started;
      } while (backlog !== UNKNOWN && !mayAdmit(this.#options, backlog, waited));
    } finally {
      this.#waiting--;
    }
    // Gone ahead without the backlog under the bound: as after the longest wait.
    const outcome = backlog === UNKNOWN || waited >= this.#options.maxWaitMs ? 'timed_out' : 'caught_up';
    this.#options.onWaited?.(outcome, waited);
    return outcome;
  }

  /** Sends waiting now. */
  get waiting(): number {
    return this.#waiting;
  }

  /**
   * The last backlog read, read again when older than refreshMs; one read at a time for all
   * sends. UNKNOWN when the read has not answered by `deadline` (nor within maxWaitMs of its
   * start), and at once while reads fail or come late.
   */
  #current(deadline: number): Promise<number | null> | number | null {
    const now = performance.now();
    if (now - this.#readAt < this.#refreshMs) return this.#backlog;
    if (!this.#reading && now >= this.#retryAt) this.#reading = { answer: this.#read(), startedAt: now };
    const reading = this.#reading;
    if (reading === null || this.#unreadable) return UNKNOWN;
    const due = Math.min(deadline, reading.startedAt + this.#options.maxWaitMs) - now;
    if (due <= 0) return UNKNOWN;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => {
        if (this.#reading === reading && !this.#unreadable) {
          this.#unreadable = true;
          this.#options.onReadError?.(new Error(`the backlog read has not answered within ${Math.round(performance.now() - reading.startedAt)} ms`));
        }
        resolve(UNKNOWN);
      }, due);
    });
    return Promise.race([reading.answer, late]).finally(() => clearTimeout(timer));
  }

  /** One read; the sends that stopped waiting for it see its answer from their next pass on. */
  #read(): Promise<number | null> {
    return this.#options.backlog().then(
      (records) => {
        this.#backlog = records;
        this.#readAt = performance.now();
        this.#unreadable = false;
        this.#nextRetryDelay = this.#retryAfterFailureMs;
        this.#options.onBacklog?.(records);
        return records;
      },
      (error: unknown) => {
        this.#options.onReadError?.(error);
        this.#unreadable = true;
        this.#retryAt = performance.now() + this.#nextRetryDelay;
        this.#nextRetryDelay = Math.min(this.#nextRetryDelay * 2, MAX_RETRY_AFTER_FAILURE_MS);
        return UNKNOWN;
      },
    ).finally(() => {
      this.#reading = null;
    });
  }
}
