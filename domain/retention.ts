// How long Relay keeps its operational data: state that serves the running service, not the
// record of what happened (that is the event store, kept for ever). `relay retention` removes
// each kind once its period is over (apps/services/operational-retention.ts); message bodies
// have their own seven-day rule (apps/services/content-vault.ts).

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

export const OPERATIONAL_RETENTION = {
  /**
   * A webhook delivery that succeeded or failed, with its attempt logs, 30 days after its last
   * attempt: until then EmailDetail.webhookDeliveries shows it.
   */
  finishedWebhookDeliveryMs: 30 * DAY_MS,
  /**
   * A delivery work item a day past due is looked at again: removed when its email has no
   * delivery step left (a step that finished without its item being removed), kept otherwise.
   */
  overdueWorkItemMs: DAY_MS,
  /** A dashboard session once it has expired: it can never be used again. */
  expiredSessionMs: 0,
  /** An invitation once it lapsed (14 days unanswered): it answers 404 like a missing one. */
  lapsedInvitationMs: 0,
  /** Request-rate slots an hour after their window ended (API processes sweep them sooner while they run). */
  rateLimitSlotMs: HOUR_MS,
  /** A development key's request-rate window a day after it ended (a new one opens with the next request). */
  rateLimitWindowMs: DAY_MS,
  /** RELAY_SEND_RATE's per-second slots an hour after their second (senders sweep them sooner while they run). */
  sendRateSlotMs: HOUR_MS,
  /**
   * TLS session counts a week after their UTC day ended: a day's TLS report is built from them
   * the next day and, when sending fails, tried again for two days (apps/services/tls-reports/).
   */
  tlsSessionCountMs: 7 * DAY_MS,
  /** A day's TLS report record (sent, failed, no destination) 30 days after its day ended. */
  tlsReportMs: 30 * DAY_MS,
  /** A sender instance's site snapshot (`relay sites`) a day after it was last written: running senders rewrite theirs every few seconds. */
  siteSnapshotMs: DAY_MS,
  /** An MTA-STS policy once its max_age has run out: the next delivery to the domain fetches it again. */
  expiredMtaStsPolicyMs: 0,
  /**
   * The suppressor's record of a bounce or complaint it handled, 30 days after, as long as the
   * webhooks' per-event dedupe: the same event handled again after that blocks its address again.
   */
  handledSuppressionSourceMs: 30 * DAY_MS,
} as const;

/** The instant before which data of this kind is past its period at `now`. */
export const retentionCutoff = (periodMs: number, now: Date): Date => new Date(now.getTime() - periodMs);
