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
// once then and keeps what the question needs of it (./usage-folds.ts), so the question costs no
// round trip for the rest of the month. Two attempts at the turn in this process are decided one
// after the other; in two processes at the same moment, both may still be charged.
//
// Folds are kept within a memory budget (./usage-folds.ts). A stream has one read under way at a
// time: those who ask for it meanwhile (members opening the usage page after a restart) wait for
// that read, then fold on from its result together.
import { setImmediate } from 'node:timers/promises';
import type { CommandOrigin } from '../../domain/events/metadata.ts';
import type { Decider } from '../../domain/decider.ts';
import { usageDecider } from '../../domain/usage/decider.ts';
import type { RelayError } from '../../domain/errors.ts';
import {
  decideCharges, monthEnd, monthOf, monthStart, usageStreamId, type ChargeOutcome, type ChargeRecipients, type MonthlyAllowances, type UsageEvent, type UsageState,
} from '../../domain/usage/quota.ts';
import { currentDurabilityScope, lostWritesReported, onLostWrites, writeOnBehalfOf, type DurabilityScope } from '../../infra/ports/durability.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import { handleCommand, loadStream } from './command-handler.ts';
import { UsageFolds, type Folded } from './usage-folds.ts';

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

interface Pending {
  command: ChargeRecipients;
  origin: CommandOrigin;
  /** The caller's deferred-durability scope, which must wait for the append that carries this charge. */
  scope: DurabilityScope | undefined;
  resolve: () => void;
  reject: (error: unknown) => void;
}

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
/** Within a minute of the month's start or end, where its charges may meet those of the month either side. */
const atTurn = (at: Date, month: string): boolean =>
  at.getTime() - monthStart(month).getTime() < MONTH_SETTLES_MS || monthEnd(month).getTime() - at.getTime() < MONTH_SETTLES_MS;

export class UsageLedger {
  readonly #events: EventStore;
  readonly #folds = new UsageFolds();
  /** Reads of streams under way, one per stream. */
  readonly #reads = new Map<string, Promise<Folded>>();
  readonly #queues = new Map<string, Pending[]>();
  /** Charges in flight near a month's turn, by email id: an attempt in another month waits for them. */
  readonly #atTurn = new Map<string, Array<{ month: string; settled: Promise<void> }>>();

  readonly #unsubscribe: () => void;

  constructor(events: EventStore) {
    this.#events = events;
    // A charge appended inside an admission's durability scope is folded in before it is
    // durable; if its batch is lost, the folds are wrong: read the streams again.
    this.#unsubscribe = onLostWrites(() => this.#folds.clear());
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
    const command = commandOf(charge);
    const scope = currentDurabilityScope();
    if (!charge.idempotent) return this.#enqueue(charge.workspaceId, command, charge.origin, scope);
    const turn = atTurn(charge.at, command.month);
    const before = turn ? undefined : this.#folds.final(usageStreamId(charge.workspaceId, previousMonth(command.month)));
    // Within a month, once the month before is final here and did not charge the id: decided at once.
    if (before && !before.mayHaveCharged(charge.emailId)) return this.#enqueue(charge.workspaceId, command, charge.origin, scope);
    const charged = this.#chargeAcrossMonths(charge, command, scope);
    if (turn) {
      const entry = { month: command.month, settled: charged.catch(() => {}) };
      this.#atTurn.set(charge.emailId, [...(this.#atTurn.get(charge.emailId) ?? []), entry]);
      void entry.settled.then(() => {
        const left = this.#atTurn.get(charge.emailId)?.filter((e) => e !== entry) ?? [];
        if (left.length > 0) this.#atTurn.set(charge.emailId, left);
        else this.#atTurn.delete(charge.emailId);
      });
    }
    return charged;
  }

  /**
   * The refusal the charge gets when that is certain without a read: decided as charge() decides
   * it, on the month as this process last folded it, since usage only grows and a refusal now is
   * still one after a wait (but for a concurrent attempt under the same Idempotency-Key, which may
   * win either way). Undefined when the charge may pass, when the month is not folded here, for an
   * id derived from an Idempotency-Key unless the month before is final here and did not charge
   * it, and within a minute of the month's turn (after a wait, the charge may fall in the next).
   */
  certainRefusal(charge: RecipientCharge): RelayError | undefined {
    const command = commandOf(charge);
    const folded = this.#folds.fold(usageStreamId(charge.workspaceId, command.month));
    if (!folded || atTurn(charge.at, command.month)) return undefined;
    if (charge.idempotent && (this.#folds.final(usageStreamId(charge.workspaceId, previousMonth(command.month)))?.mayHaveCharged(charge.emailId) ?? true)) return undefined;
    const [outcome] = decideCharges([command], folded.state).outcomes;
    return outcome.ok ? undefined : outcome.error;
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
      if (this.#folds.final(stream)?.mayHaveCharged(charge.emailId) === false) continue;
      const final = stream === before && atMs - monthStart(month).getTime() >= MONTH_SETTLES_MS;
      const recipients = (await this.#catchUp(stream, other, final)).state.charged.recipientsOf(charge.emailId);
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
      loaded: this.#folds.fold(stream) ?? (await this.#catchUp(stream, month)),
      attempts: MAX_ATTEMPTS,
    }));
    // At equal revisions the append's own state wins: a cached fold may hold a charge whose
    // commit failed (handleCommand then folded the stream again). A loss reported meanwhile may
    // be this append's: its state is not learned, and the stream is read again when needed.
    const cached = this.#folds.fold(stream);
    if (lostWritesReported() !== lossesBefore) this.#folds.forget(stream);
    else if (!cached || cached.revision <= handled.revision) this.#folds.keep(stream, { state: handled.state, revision: handled.revision });
    outcomes.forEach((outcome, i) => (outcome.ok ? batch[i].resolve() : batch[i].reject(outcome.error)));
  }

  /**
   * Folds the events appended since this process last looked (the whole stream the first time),
   * sharing a read of the stream under way: begun before this call, it may miss what was
   * appended since, so this call then folds on from its result, in one read with every other
   * call that waited for it. A month `final` is kept as such (./usage-folds.ts).
   */
  async #catchUp(stream: string, month: string, final = false): Promise<Folded> {
    const under = this.#reads.get(stream);
    if (!under) return this.#read(stream, month, this.#folds.fold(stream), final);
    const shared = await under.catch(() => undefined);
    const next = this.#reads.get(stream);
    if (next && next !== under) return next;
    return this.#read(stream, month, newer(shared, this.#folds.fold(stream)), final);
  }

  #read(stream: string, month: string, from: Folded | undefined, final: boolean): Promise<Folded> {
    const read = (async () => {
      const folded = await foldInPages(this.#events, stream, usageDecider(month), from);
      // Another caller (an append) may have folded further meanwhile: keep whichever saw more.
      const latest = newer(folded, this.#folds.fold(stream))!;
      if (final) this.#folds.keepFinal(stream, latest);
      else if (latest === folded) this.#folds.keep(stream, folded);
      return latest;
    })();
    this.#reads.set(stream, read);
    const settled = () => {
      if (this.#reads.get(stream) === read) this.#reads.delete(stream);
    };
    read.then(settled, settled);
    return read;
  }
}

/** Charges read and folded per page of a month's stream. */
const FOLD_PAGE = 5_000;

/**
 * The stream folded on from `from`, FOLD_PAGE events a read with a turn of the event loop between
 * reads: a month of a million charges read at once held the thread about 6 s and 1.9 GB (the
 * embedded store reads a stream in one statement); page by page, only a page is held at a time.
 */
async function foldInPages(events: EventStore, stream: string, reader: ReturnType<typeof usageDecider>, from: Folded | undefined): Promise<Folded> {
  let folded = from;
  for (;;) {
    const start = folded?.revision ?? -1;
    const next = await loadStream(events, stream, reader, { from: folded, upTo: start + FOLD_PAGE });
    // A short page is the stream's end.
    if (next.revision < start + FOLD_PAGE) return next;
    folded = next;
    await setImmediate();
  }
}

const newer = (a: Folded | undefined, b: Folded | undefined): Folded | undefined => (!a || (b && b.revision > a.revision) ? b : a);

/** The charge as the month's decider takes it. */
const commandOf = (charge: RecipientCharge): ChargeRecipients => ({
  type: 'ChargeRecipients',
  month: monthOf(charge.at),
  emailId: charge.emailId,
  fingerprint: charge.fingerprint,
  apiKeyId: charge.apiKeyId,
  developmentKey: charge.developmentKey,
  recipients: charge.recipients,
  occurredAt: charge.at.toISOString(),
  allowances: charge.allowances,
});

const withOtherMonths = (command: ChargeRecipients, recipients: number | undefined): ChargeRecipients =>
  (recipients === undefined ? command : { ...command, chargedInOtherMonths: recipients });
