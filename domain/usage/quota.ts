// Monthly recipient allowances (spec: Limits): 5,000 accepted To/CC/BCC recipients per
// workspace and UTC month, and 1,000 per development key, which also count toward the
// workspace. Those are the defaults; an operator may set others per workspace
// (`relay workspace quota`), kept on the workspace document. A member's dashboard test sends
// are charged under the member's user id: those in development projects to a development
// allowance of their own, those in production projects to the workspace alone. One event
// stream per workspace and month holds every charge; this decider turns a charge request, with
// the allowances in force when it was made, into RecipientsCharged or a quota_exceeded error.
// Pure.
import { Type, type Static } from '@sinclair/typebox';
import { RelayError, validationError } from '../errors.ts';
import { ChargedEmails } from './charged-emails.ts';

/** Accepted recipients per UTC month: the workspace's, and each of its development keys'. */
export interface MonthlyAllowances {
  workspaceRecipients: number;
  developmentKeyRecipients: number;
}

/** The spec's allowances, which a workspace has unless its operator set others. */
export const DEFAULT_ALLOWANCES: Readonly<MonthlyAllowances> = Object.freeze({ workspaceRecipients: 5_000, developmentKeyRecipients: 1_000 });

/** The largest allowance an operator may set (a billion recipients a month: no practical limit). */
export const MAX_ALLOWANCE = 1_000_000_000;

/** What a workspace document holds: only the allowances its operator set. */
export type AllowanceSettings = Partial<MonthlyAllowances>;

/** A workspace's allowances in force: each one set, else the spec's. */
export const allowancesOf = (settings: AllowanceSettings | undefined): MonthlyAllowances => ({
  workspaceRecipients: settings?.workspaceRecipients ?? DEFAULT_ALLOWANCES.workspaceRecipients,
  developmentKeyRecipients: settings?.developmentKeyRecipients ?? DEFAULT_ALLOWANCES.developmentKeyRecipients,
});

/** An allowance an operator sets: a whole number of recipients from 0 (no sending) to MAX_ALLOWANCE. */
export function checkAllowance(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0 || value > MAX_ALLOWANCE) {
    throw validationError(`${name}: must be a whole number of recipients from 0 to ${MAX_ALLOWANCE}, got ${value}`);
  }
  return value;
}

export const USAGE_STREAM_PREFIX = 'usage-';

/** "2026-11" for any instant of November 2026 UTC. */
export const monthOf = (at: Date): string => at.toISOString().slice(0, 7);

export const usageStreamId = (workspaceId: string, month: string): string => `${USAGE_STREAM_PREFIX}${workspaceId}-${month}`;

/** The instant `month` begins (UTC). */
export function monthStart(month: string): Date {
  const [year, m] = month.split('-').map(Number);
  return new Date(Date.UTC(year, m - 1, 1));
}

/** The instant the month after `month` begins (UTC): when its allowances reset. */
export function monthEnd(month: string): Date {
  const [year, m] = month.split('-').map(Number);
  return new Date(Date.UTC(year, m, 1));
}

export interface ChargeRecipients {
  type: 'ChargeRecipients';
  month: string;
  /** What the charge is keyed by: an email id is charged once, whatever request under it asks again. */
  emailId: string;
  /**
   * Recipients charged under this email id in the months either side (the ledger looks there
   * for an email id derived from an Idempotency-Key, whose attempts may straddle a month's end);
   * absent when none.
   */
  chargedInOtherMonths?: number;
  /** The request's fingerprint, recorded with the charge (it keys nothing). */
  fingerprint: string;
  apiKeyId: string;
  developmentKey: boolean;
  recipients: number;
  occurredAt: string;
  /** The workspace's allowances when the request came in. */
  allowances: MonthlyAllowances;
}

/** A workspace-month's charge for one admitted email (stream usage-<workspaceId>-<YYYY-MM>). */
export const RecipientsChargedDataSchema = Type.Object({
  emailId: Type.String(),
  fingerprint: Type.String({ description: "The fingerprint of the request charged (an email id is charged once, whatever its requests' fingerprints)." }),
  apiKeyId: Type.String(),
  developmentKey: Type.Boolean({ description: 'A development send (a development key\'s, or a member\'s test send in a development project): charged to that key\'s or member\'s development allowance too.' }),
  recipients: Type.Integer({ minimum: 0, description: 'To + CC + BCC; for a second charge under one email id (another body with its Idempotency-Key, with more recipients than the first), those beyond the first charge, which may be in the month before or after.' }),
  occurredAt: Type.String({ format: 'date-time' }),
});

export interface RecipientsCharged {
  type: 'RecipientsCharged';
  data: Static<typeof RecipientsChargedDataSchema>;
}

export type UsageEvent = RecipientsCharged;

export interface UsageState {
  month: string;
  workspaceRecipients: number;
  /** Recipients charged per API key (or member: their test sends) this month. */
  byKey: Record<string, number>;
  /** Of those, the ones charged as development sends: what a development allowance counts. */
  developmentByKey: Record<string, number>;
  /**
   * Every email id charged this month, with the recipients charged under it. An email id is one
   * email (with an Idempotency-Key, the one email that key names in its project), so requests
   * under one id are charged once between them: a retry of the same request, and concurrent
   * requests with other bodies that lose the admission to it (409 idempotency_conflict, not
   * charged). Streams written when charges were keyed by email id and fingerprint fold the same
   * way (their counts summed per id).
   */
  charged: ChargedEmails;
}

export const initialUsageState = (month: string): UsageState => ({ month, workspaceRecipients: 0, byKey: {}, developmentByKey: {}, charged: ChargedEmails.empty });

export type QuotaAllowance = 'development_key' | 'workspace';

function exceeded(allowance: QuotaAllowance, state: UsageState, used: number, limit: number, requested: number): RelayError {
  const resetsAt = monthEnd(state.month).toISOString();
  const whose = allowance === 'workspace' ? "the workspace's monthly allowance" : "this development key's monthly allowance";
  return new RelayError(
    'quota_exceeded',
    `quota exceeded: ${whose} of ${limit} recipients is used up (${used} used, ${requested} requested); it resets at ${resetsAt}`,
    { allowance, limit, used, requested, resetsAt },
  );
}

/**
 * Events of a charge. An email id is charged once, in whichever month: charged again, whatever
 * the fingerprint, it adds nothing and is never refused ([]), unless this request has more
 * recipients than were charged under the id (another body under the same Idempotency-Key,
 * racing the first): then the recipients beyond are charged (and may be refused), since either
 * body may be the one admitted and the allowance must hold whichever is. Throws quota_exceeded.
 */
export function decideCharge(command: ChargeRecipients, state: UsageState): UsageEvent[] {
  if (command.month !== state.month) throw new Error(`charge for ${command.month} decided on usage of ${state.month}`);
  if (!Number.isSafeInteger(command.recipients) || command.recipients < 0) throw new Error(`invalid recipient count ${command.recipients}`);
  const here = state.charged.recipientsOf(command.emailId);
  const elsewhere = command.chargedInOtherMonths;
  const already = here === undefined && elsewhere === undefined ? undefined : (here ?? 0) + (elsewhere ?? 0);
  if (already !== undefined && command.recipients <= already) return [];
  const recipients = command.recipients - (already ?? 0);
  const { workspaceRecipients, developmentKeyRecipients } = command.allowances;
  if (command.developmentKey) {
    const used = state.developmentByKey[command.apiKeyId] ?? 0;
    if (used + recipients > developmentKeyRecipients) throw exceeded('development_key', state, used, developmentKeyRecipients, recipients);
  }
  if (state.workspaceRecipients + recipients > workspaceRecipients) {
    throw exceeded('workspace', state, state.workspaceRecipients, workspaceRecipients, recipients);
  }
  const { emailId, fingerprint, apiKeyId, developmentKey, occurredAt } = command;
  return [{ type: 'RecipientsCharged', data: { emailId, fingerprint, apiKeyId, developmentKey, recipients, occurredAt } }];
}

/** Folds events onto `state` (which stays as it was). */
export function foldUsage(events: UsageEvent[], state: UsageState): UsageState {
  // A later version's events count nothing here.
  const charges = events.filter((event) => event.type === 'RecipientsCharged');
  if (charges.length === 0) return state;
  const byKey = { ...state.byKey };
  let developmentByKey = state.developmentByKey;
  let workspaceRecipients = state.workspaceRecipients;
  for (const { data } of charges) {
    workspaceRecipients += data.recipients;
    byKey[data.apiKeyId] = (byKey[data.apiKeyId] ?? 0) + data.recipients;
    if (data.developmentKey) {
      if (developmentByKey === state.developmentByKey) developmentByKey = { ...developmentByKey };
      developmentByKey[data.apiKeyId] = (developmentByKey[data.apiKeyId] ?? 0) + data.recipients;
    }
  }
  const charged = state.charged.with(charges.map(({ data }) => data));
  return { month: state.month, workspaceRecipients, byKey, developmentByKey, charged };
}

export type ChargeOutcome = { ok: true; events: UsageEvent[] } | { ok: false; error: RelayError };

/**
 * Decides several charges of one month in order, each on the state the previous ones left:
 * how one append can carry every charge that queued up meanwhile.
 */
export function decideCharges(commands: ChargeRecipients[], state: UsageState): { outcomes: ChargeOutcome[]; events: UsageEvent[]; state: UsageState } {
  const outcomes: ChargeOutcome[] = [];
  const events: UsageEvent[] = [];
  let current = state;
  for (const command of commands) {
    try {
      const decided = decideCharge(command, current);
      current = foldUsage(decided, current);
      events.push(...decided);
      outcomes.push({ ok: true, events: decided });
    } catch (error) {
      if (!(error instanceof RelayError)) throw error;
      outcomes.push({ ok: false, error });
    }
  }
  return { outcomes, events, state: current };
}
