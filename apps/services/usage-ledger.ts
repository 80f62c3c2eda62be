// Charges accepted recipients to the monthly allowances through the event store: one stream
// per workspace and UTC month (`usage-<workspaceId>-<YYYY-MM>`), appended with the revision
// the decision was made on. Two API processes that charge at once cannot both pass: the
// second append fails with WrongExpectedRevisionError, that process reads the events it
// missed and decides again. No lock and no second store are involved, so the allowance holds
// on EventStoreDB with any number of API processes.
//
// Charges that queue up while an append is in flight go out together in the next append
// (group commit): under load a workspace costs one append per round, not one per request.
//
// An email id is charged once (spec: idempotent replays add no monthly usage), and the
// attempts of one request with an Idempotency-Key may fall in two months: two in flight either
// side of midnight UTC at a month's end, or a retry, after the month turned, of an attempt
// whose charge was made and whose email was not. So a charge under such an id also asks the
// month before (and, in a month's last minute, the month after) what was charged under it.
// The month before is final once a minute has passed since it ended: this process reads it
// once then and keeps its fold, so the question costs no round trip for the rest of the month.
// Two attempts at the turn in this process are decided one after the other; in two processes
// at the same moment, both may still be charged.
import type { CommandOrigin } from '../../domain/events/metadata.ts';
import type { Decider } from '../../domain/decider.ts';
import { usageDecider } from '../../domain/usage/decider.ts';
import {
  decideCharges, monthEnd, monthOf, monthStart, usageStreamId, type ChargeOutcome, type ChargeRecipients, type MonthlyAllowances, type UsageEvent, type UsageState,
} from '../../domain/usage/quota.ts';
import { currentDurabilityScope, lostWritesReported, onLostWrites, writeOnBehalfOf, type DurabilityScope } from '../../infra/ports/durability.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import { handleCommand, loadStream, type Loaded } from './command-handler.ts';

export interface RecipientCharge {
  workspaceId: string;
  emailId: string;
  fingerprint: string;
  apiKeyId: string;
  developmentKey: boolean;
  recipients: number;
  /** The workspace's allowances at this request. */
  allowances: MonthlyAllowances;
  at: Date;
  origin: CommandOrigin;
  /** The email id is derived from an Idempotency-Key: other attempts under it may have been charged in another month. */
  idempotent?: boolean;
}

type Folded = Loaded<UsageState>;

interface Pending {
  command: ChargeRecipients;
  origin: CommandOrigin;
  /** The caller's deferred-durability scope, which must wait for the append that carries this charge. */
  scope: DurabilityScope | undefined;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** Streams whose folded state a process keeps; beyond it the oldest are forgotten (and re-read when needed). */
const CACHED_STREAMS = 2_000;
/** Charges sent in one append at most. */
const BATCH = 100;
/** Rounds lost to other processes before a charge gives up with an error (never observed in practice). */
const MAX_ATTEMPTS = 100;
/**
 * How long after a month's end charges dated in it may still be appended: a charge queued
 * behind an append, another process's clock a little behind. Past it, the month is final.
 */
const MONTH_SETTLES_MS = 60_000;

const previousMonth = (month: string): string => monthOf(new Date(monthStart(month).getTime() - 1));
const nextMonth = (month: string): string => monthOf(monthEnd(month));

export class UsageLedger {
  readonly #events: EventStore;
  readonly #folded = new Map<string, Folded>();
  /** Streams of months that were over (and settled) when this process last folded them: their folds are final. */
  readonly #final = new Set<string>();
  readonly #queues = new Map<string, Pending[]>();
  /** Charges in flight near a month's turn, by email id: an attempt in another month waits for them. */
  readonly #atTurn = new Map<string, Array<{ month: string; settled: Promise<void> }>>();

  readonly #unsubscribe: () => void;

  constructor(events: EventStore) {
    this.#events = events;
    // A charge appended inside an admission's durability scope is folded in before it is
    // durable; if its batch is lost, the folds are wrong: read the streams again.
    this.#unsubscribe = onLostWrites(() => {
      this.#folded.clear();
      this.#final.clear();
    });
  }

  close(): void {
    this.#unsubscribe();
  }

  /**
   * Charges the email's recipients to its workspace's month (and its development key's).
   * Resolves once the charge is in the stream, or when this email id was charged already (by
   * this request or any other under the id, whatever its fingerprint, in this month or, for an
   * id derived from an Idempotency-Key, the one either side: nothing is added then); rejects
   * with quota_exceeded when an allowance would be exceeded.
   */
  charge(charge: RecipientCharge): Promise<void> {
    const month = monthOf(charge.at);
    const command: ChargeRecipients = {
      type: 'ChargeRecipients',
      month,
      emailId: charge.emailId,
      fingerprint: charge.fingerprint,
      apiKeyId: charge.apiKeyId,
      developmentKey: charge.developmentKey,
      recipients: charge.recipients,
      occurredAt: charge.at.toISOString(),
      allowances: charge.allowances,
    };
    const scope = currentDurabilityScope();
    if (!charge.idempotent) return this.#enqueue(charge.workspaceId, command, charge.origin, scope);
    const atMs = charge.at.getTime();
    const atTurn = atMs - monthStart(month).getTime() < MONTH_SETTLES_MS || monthEnd(month).getTime() - atMs < MONTH_SETTLES_MS;
    const before = atTurn ? undefined : this.#finalFold(usageStreamId(charge.workspaceId, previousMonth(month)));
    // Within a month, once the month before is final here: decided at once.
    if (before) return this.#enqueue(charge.workspaceId, withOtherMonths(command, before.state.charged.recipientsOf(charge.emailId)), charge.origin, scope);
    const charged = this.#chargeAcrossMonths(charge, command, scope);
    if (atTurn) {
      const entry = { month, settled: charged.catch(() => {}) };
      this.#atTurn.set(charge.emailId, [...(this.#atTurn.get(charge.emailId) ?? []), entry]);
      void entry.settled.then(() => {
        const left = this.#atTurn.get(charge.emailId)?.filter((e) => e !== entry) ?? [];
        if (left.length > 0) this.#atTurn.set(charge.emailId, left);
        else this.#atTurn.delete(charge.emailId);
      });
    }
    return charged;
  }

  /** A charge that asks the months either side first: what they charged under its email id. */
  async #chargeAcrossMonths(charge: RecipientCharge, command: ChargeRecipients, scope: DurabilityScope | undefined): Promise<void> {
    const { month } = command;
    const atMs = charge.at.getTime();
    // Attempts charged in another month by this process are decided first, so this one sees them.
    const others = (this.#atTurn.get(charge.emailId) ?? []).filter((e) => e.month !== month);
    if (others.length > 0) await Promise.all(others.map((e) => e.settled));
    const before = usageStreamId(charge.workspaceId, previousMonth(month));
    const folds = [{ stream: before, month: previousMonth(month) }];
    if (monthEnd(month).getTime() - atMs < MONTH_SETTLES_MS) folds.push({ stream: usageStreamId(charge.workspaceId, nextMonth(month)), month: nextMonth(month) });
    let elsewhere: number | undefined;
    for (const { stream, month: other } of folds) {
      const folded = this.#finalFold(stream) ?? (await this.#catchUp(stream, other));
      if (stream === before && atMs - monthStart(month).getTime() >= MONTH_SETTLES_MS) this.#final.add(stream);
      const recipients = folded.state.charged.recipientsOf(charge.emailId);
      if (recipients !== undefined) elsewhere = (elsewhere ?? 0) + recipients;
    }
    return this.#enqueue(charge.workspaceId, withOtherMonths(command, elsewhere), charge.origin, scope);
  }

  #enqueue(workspaceId: string, command: ChargeRecipients, origin: CommandOrigin, scope: DurabilityScope | undefined): Promise<void> {
    const stream = usageStreamId(workspaceId, command.month);
    return new Promise<void>((resolve, reject) => {
      const pending = { command, origin, scope, resolve, reject };
      const queue = this.#queues.get(stream);
      if (queue) {
        queue.push(pending);
        return;
      }
      this.#queues.set(stream, [pending]);
      void this.#drain(stream, command.month);
    });
  }

  /** The stream's fold, when this process folded it after its month was over and settled (kept as recently used). */
  #finalFold(stream: string): Folded | undefined {
    const folded = this.#final.has(stream) ? this.#folded.get(stream) : undefined;
    if (folded) this.#remember(stream, folded);
    return folded;
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
    // The batch's outcomes are those of the last decision: after a conflict it is decided
    // again on what the other process wrote.
    let outcomes: ChargeOutcome[] = [];
    // Each event is named by the request whose charge made it (several requests under one email
    // id may share a batch: the first is charged, the others add nothing or only their excess).
    let originOf = new Map<UsageEvent, CommandOrigin>();
    const decider: Decider<ChargeRecipients[], UsageState, UsageEvent> = {
      ...usageDecider(month),
      decide: (commands, state) => {
        const decided = decideCharges(commands, state);
        outcomes = decided.outcomes;
        originOf = new Map(outcomes.flatMap((outcome, i) => (outcome.ok ? outcome.events.map((event) => [event, batch[i].origin] as const) : [])));
        return decided.events;
      },
    };
    const lossesBefore = lostWritesReported();
    // The append carries every charge of the batch: each caller's durability scope waits for
    // it (the drain runs in the context of whichever caller started it, long gone by now).
    const handled = await writeOnBehalfOf(batch.map((p) => p.scope), async () => handleCommand(this.#events, stream, decider, batch.map((p) => p.command), {
      origin: (event) => originOf.get(event)!,
      loaded: this.#folded.get(stream) ?? (await this.#catchUp(stream, month)),
      attempts: MAX_ATTEMPTS,
    }));
    // At equal revisions the append's own state wins: a cached fold may hold a charge whose
    // commit failed (handleCommand then folded the stream again). A loss reported meanwhile may
    // be this append's: its state is not learned, and the stream is read again when needed.
    const cached = this.#folded.get(stream);
    if (lostWritesReported() !== lossesBefore) {
      this.#folded.delete(stream);
      this.#final.delete(stream);
    } else if (!cached || cached.revision <= handled.revision) this.#remember(stream, { state: handled.state, revision: handled.revision });
    outcomes.forEach((outcome, i) => (outcome.ok ? batch[i].resolve() : batch[i].reject(outcome.error)));
  }

  /** Folds the events appended since this process last looked (the whole stream the first time). */
  async #catchUp(stream: string, month: string): Promise<Folded> {
    const known = this.#folded.get(stream);
    const folded = await loadStream(this.#events, stream, usageDecider(month), { from: known });
    // Another caller may have folded further meanwhile: keep whichever saw more.
    const latest = this.#folded.get(stream);
    if (!latest || latest.revision < folded.revision) this.#remember(stream, folded);
    return folded;
  }

  #remember(stream: string, folded: Folded): void {
    this.#folded.delete(stream);
    this.#folded.set(stream, folded);
    if (this.#folded.size > CACHED_STREAMS) {
      const oldest = this.#folded.keys().next().value!;
      this.#folded.delete(oldest);
      this.#final.delete(oldest);
    }
  }
}

const withOtherMonths = (command: ChargeRecipients, recipients: number | undefined): ChargeRecipients =>
  (recipients === undefined ? command : { ...command, chargedInOtherMonths: recipients });
