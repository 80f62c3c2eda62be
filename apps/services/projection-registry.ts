// The read models built from the event store: each is one definition (stream-projection.ts)
// from which its live processor (apps/processors/registry.ts) and its rebuild
// (`relay projections rebuild <name>`) are derived.
import { applyToDeliverability, DELIVERABILITY_IGNORES, type DeliverabilityEmail } from '../../projections/deliverability.ts';
import { applyToEmailView, EMAIL_VIEW_IGNORES, type EmailView } from '../../projections/email-view.ts';
import { COLLECTIONS } from './collections.ts';
import { DELIVERABILITY_INDEXES } from './deliverability-stats.ts';
import { EMAIL_VIEW_INDEXES } from './email-reads.ts';
import { defineStreamProjection, type StreamProjection } from './stream-projection.ts';

/** The email list and detail read model (GET /v1/emails). */
export const EMAILS_PROJECTION = defineStreamProjection<EmailView, 'projector'>({
  name: 'emails',
  processor: 'projector',
  summary: 'keeps the email list and timeline read model (emails collection)',
  collection: COLLECTIONS.emails,
  indexes: EMAIL_VIEW_INDEXES,
  evolve: applyToEmailView,
  // A transaction's start is the sender's own mark: a quarter of the events, neither decoded nor written live.
  ignores: EMAIL_VIEW_IGNORES,
});

/** Per email, its recipients' outcomes: what GET /v1/projects/:projectId/stats sums (apps/services/deliverability-stats.ts). */
export const DELIVERABILITY_PROJECTION = defineStreamProjection<DeliverabilityEmail, 'deliverability'>({
  name: 'deliverability',
  processor: 'deliverability',
  summary: 'keeps the deliverability read model (deliverability collection): each email\'s outcomes per recipient domain, summed by the stats API',
  collection: COLLECTIONS.deliverability,
  indexes: DELIVERABILITY_INDEXES,
  evolve: applyToDeliverability,
  // A claim counts nothing (projections/deliverability.ts): a third of the events, neither decoded nor written live.
  ignores: DELIVERABILITY_IGNORES,
});

export const PROJECTIONS: Record<string, StreamProjection> = {
  emails: EMAILS_PROJECTION as unknown as StreamProjection,
  deliverability: DELIVERABILITY_PROJECTION as unknown as StreamProjection,
};
