// Charges accepted recipients to the monthly allowances through the event store: one stream
// per workspace and UTC month (`usage-<workspaceId>-<YYYY-MM>`), appended with the revision
// the decision was made on. Two API processes that charge at once cannot both pass: the
// second append fails with WrongExpectedRevisionError, that process reads the events it
// missed and decides again. No lock and no second store are involved, so the allowance holds
// on EventStoreDB with any number of API processes.
//
// Charges that queue up while an append is in flight go out together in the next append
// (group commit): under load a workspace costs one append per round, not one per request.
import { randomUUID } from 'node:crypto';
import {
  decideCharges, foldUsage, initialUsageState, monthOf, usageStreamId,
  type ChargeRecipients, type UsageEvent, type UsageState,
} from '../../domain/usage/quota.ts';
import { WrongExpectedRevisionError, type EventStore } from '../../infra/ports/event-store.ts';

export interface RecipientCharge {
  workspaceId: string;
  emailId: string;
  fingerprint: string;
  apiKeyId: string;
  developmentKey: boolean;
  recipients: number;
  at: Date;
}

interface Folded {
  state: UsageState;
  /** Revision of the stream's last event folded in; -1 for an empty stream. */
  revision: number;
}

interface Pending {
  command: ChargeRecipients;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** Streams whose folded state a process keeps; beyond it the oldest are forgotten (and re-read when needed). */
const CACHED_STREAMS = 2_000;
/** Charges sent in one append at most. */
const BATCH = 100;
/** Rounds lost to other processes before a charge gives up with an error (never observed in practice). */
const MAX_ATTEMPTS = 100;

export class UsageLedger {
  readonly #events: EventStore;
  readonly #folded = new Map<string, Folded>();
  readonly #queues = new Map<string, Pending[]>();

  constructor(events: EventStore) {
    this.#events = events;
  }

  /**
   * Charges the email's recipients to its workspace's month (and its development key's).
   * Resolves once the charge is in the stream, or when this email was charged already;
   * rejects with quota_exceeded when an allowance would be exceeded.
   */
  charge(charge: RecipientCharge): Promise<void> {
    const month = monthOf(charge.at);
    const stream = usageStreamId(charge.workspaceId, month);
    const command: ChargeRecipients = {
      type: 'ChargeRecipients',
      month,
      emailId: charge.emailId,
      fingerprint: charge.fingerprint,
      apiKeyId: charge.apiKeyId,
      developmentKey: charge.developmentKey,
      recipients: charge.recipients,
      occurredAt: charge.at.toISOString(),
    };
    return new Promise<void>((resolve, reject) => {
      const queue = this.#queues.get(stream);
      if (queue) {
        queue.push({ command, resolve, reject });
        return;
      }
      this.#queues.set(stream, [{ command, resolve, reject }]);
      void this.#drain(stream, month);
    });
  }

  /** The month's usage of a workspace as the stream holds it now. */
  async usage(workspaceId: string, at: Date): Promise<UsageState> {
    const month = monthOf(at);
    return (await this.#catchUp(usageStreamId(workspaceId, month), month)).state;
  }

  async #drain(stream: string, month: string): Promise<void> {
    const queue = this.#queues.get(stream)!;
    while (queue.length > 0) {
      const batch = queue.splice(0, BATCH);
      try {
        await this.#commit(stream, month, batch);
      } catch (error) {
        for (const pending of batch) pending.reject(error);
      }
    }
    this.#queues.delete(stream);
  }

  async #commit(stream: string, month: string, batch: Pending[]): Promise<void> {
    let folded = this.#folded.get(stream) ?? (await this.#catchUp(stream, month));
    for (let attempt = 1; ; attempt++) {
      const decided = decideCharges(batch.map((p) => p.command), folded.state);
      if (decided.events.length > 0) {
        try {
          const appended = await this.#events.append(
            stream,
            decided.events.map((e) => ({ id: randomUUID(), type: e.type, data: e.data as unknown as Record<string, unknown> })),
            { expectedRevision: folded.revision < 0 ? 'no_stream' : folded.revision },
          );
          this.#remember(stream, { state: decided.state, revision: appended.nextExpectedRevision });
        } catch (error) {
          if (!(error instanceof WrongExpectedRevisionError) || attempt >= MAX_ATTEMPTS) throw error;
          // Another process charged in between: fold what it wrote and decide again.
          folded = await this.#catchUp(stream, month);
          if (attempt > 3) await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt));
          continue;
        }
      }
      decided.outcomes.forEach((outcome, i) => (outcome.ok ? batch[i].resolve() : batch[i].reject(outcome.error)));
      return;
    }
  }

  /** Folds the events appended since this process last looked (the whole stream the first time). */
  async #catchUp(stream: string, month: string): Promise<Folded> {
    const known = this.#folded.get(stream) ?? { state: initialUsageState(month), revision: -1 };
    const fresh = await this.#events.readStream(stream, { fromRevision: known.revision + 1 });
    if (fresh.length === 0) return known;
    const folded = {
      state: foldUsage(fresh.map((e) => ({ type: e.type, data: e.data }) as unknown as UsageEvent), known.state),
      revision: fresh[fresh.length - 1].revision,
    };
    // Another caller may have folded further meanwhile: keep whichever saw more.
    const latest = this.#folded.get(stream);
    if (!latest || latest.revision < folded.revision) this.#remember(stream, folded);
    return folded;
  }

  #remember(stream: string, folded: Folded): void {
    this.#folded.delete(stream);
    this.#folded.set(stream, folded);
    if (this.#folded.size > CACHED_STREAMS) this.#folded.delete(this.#folded.keys().next().value!);
  }
}
