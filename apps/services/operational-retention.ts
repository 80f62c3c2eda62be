// Operational data past its period (domain/retention.ts), removed by `relay retention`: what
// the running service needs for a while and would otherwise keep for ever (webhook deliveries
// with their attempt logs, delivery work items left behind, expired sessions, lapsed
// invitations, rate-limit slots and windows, sign-in failures no longer counted, TLS session
// counts and reports, stopped senders' site snapshots, expired MTA-STS policies, the suppressor's
// handled bounces and complaints). Each kind is one deleteWhere on its own period,
// safe in several processes at once; nothing here touches an event or a read model.
import type { DeliveryPolicy } from '../../domain/email/delivery.ts';
import type { CommandOrigin } from '../../domain/events/metadata.ts';
import { OPERATIONAL_RETENTION, retentionCutoff } from '../../domain/retention.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import { COLLECTIONS } from './collections.ts';
import { syncWorkItem, workItems } from './delivery/work-items.ts';
import { sessionsOf } from './management/sessions.ts';
import { pruneSignInThrottles } from './management/sign-in-throttle.ts';
import { suppressionSourcesOf } from './management/suppression-sources.ts';
import { invitationsOf } from './management/workspaces.ts';
import { deliveriesOf } from './webhooks/deliveries.ts';

/** What one pass removed, by kind. */
export interface PruneReport {
  webhookDeliveries: number;
  workItems: number;
  sessions: number;
  invitations: number;
  rateLimitSlots: number;
  rateLimitWindows: number;
  sendRateSlots: number;
  /** Sign-in failures past their forget period (apps/services/management/sign-in-throttle.ts). */
  signInFailures: number;
  tlsSessionCounts: number;
  tlsReports: number;
  siteSnapshots: number;
  mtaStsPolicies: number;
  suppressionSources: number;
}

export interface PruneDeps {
  documents: DocumentStore;
  events: EventStore;
  /** The process's delivery policy (services.policies.delivery), which work items are derived with. */
  deliveryPolicy: DeliveryPolicy;
}

/** Overdue work items looked at per pass: a backlog is worked off over several passes. */
const WORK_ITEMS_PER_PASS = 500;

const ORIGIN: CommandOrigin = { correlationId: 'retention', causationId: 'retention' };

export async function pruneOperationalData(deps: PruneDeps, now: Date): Promise<PruneReport> {
  const { documents } = deps;
  const before = (periodMs: number) => retentionCutoff(periodMs, now);
  const iso = (periodMs: number) => before(periodMs).toISOString();
  const ms = (periodMs: number) => before(periodMs).getTime();
  return {
    webhookDeliveries: await deliveriesOf(documents).deleteWhere({
      status: { in: ['succeeded', 'failed'] }, updatedAt: { lt: iso(OPERATIONAL_RETENTION.finishedWebhookDeliveryMs) },
    }),
    workItems: await settleOverdueWorkItems(deps, iso(OPERATIONAL_RETENTION.overdueWorkItemMs)),
    sessions: await sessionsOf(documents).deleteWhere({ expiresAt: { lte: iso(OPERATIONAL_RETENTION.expiredSessionMs) } }),
    invitations: await invitationsOf(documents).deleteWhere({ expiresAt: { lte: iso(OPERATIONAL_RETENTION.lapsedInvitationMs) } }),
    rateLimitSlots: await documents.collection(COLLECTIONS.rateLimitSlots).deleteWhere({ expiresAt: { lt: ms(OPERATIONAL_RETENTION.rateLimitSlotMs) } }),
    rateLimitWindows: await documents.collection(COLLECTIONS.rateLimitWindows).deleteWhere({ endMs: { lt: ms(OPERATIONAL_RETENTION.rateLimitWindowMs) } }),
    sendRateSlots: await documents.collection(COLLECTIONS.sendRateSlots).deleteWhere({
      second: { lt: Math.floor(ms(OPERATIONAL_RETENTION.sendRateSlotMs) / 1000) },
    }),
    signInFailures: await pruneSignInThrottles(documents, now),
    // A day's lines go once the day ended a whole period ago: their day is before the cutoff's.
    tlsSessionCounts: await documents.collection(COLLECTIONS.tlsSessionCounts).deleteWhere({ day: { lt: utcDay(before(OPERATIONAL_RETENTION.tlsSessionCountMs)) } }),
    tlsReports: await documents.collection(COLLECTIONS.tlsReports).deleteWhere({ day: { lt: utcDay(before(OPERATIONAL_RETENTION.tlsReportMs)) } }),
    siteSnapshots: await documents.collection(COLLECTIONS.sites).deleteWhere({ updatedAt: { lt: iso(OPERATIONAL_RETENTION.siteSnapshotMs) } }),
    mtaStsPolicies: await documents.collection(COLLECTIONS.mtaStsPolicies).deleteWhere({ expiresAt: { lte: ms(OPERATIONAL_RETENTION.expiredMtaStsPolicyMs) } }),
    suppressionSources: await suppressionSourcesOf(documents).deleteWhere({ handledAt: { lt: iso(OPERATIONAL_RETENTION.handledSuppressionSourceMs) } }),
  };
}

/** YYYY-MM-DD of an instant, in UTC (the days TLS reports are counted by). */
const utcDay = (at: Date): string => at.toISOString().slice(0, 10);

/**
 * A work item long past due is either waiting for a sender that is down, or was left behind by
 * a step that finished: syncing it with its email's stream keeps the first and removes the
 * second (syncWorkItem only ever moves an item forward, and removes it only when nothing is due).
 */
async function settleOverdueWorkItems(deps: PruneDeps, dueBefore: string): Promise<number> {
  const overdue = await workItems(deps.documents).find({ where: { dueAt: { lt: dueBefore } }, orderBy: [['dueAt', 'asc'], ['_id', 'asc']], limit: WORK_ITEMS_PER_PASS });
  let removed = 0;
  for (const item of overdue) {
    const synced = await syncWorkItem(deps.documents, deps.events, item._id, item.origin ?? ORIGIN, deps.deliveryPolicy);
    if (synced === null) removed++;
  }
  return removed;
}
