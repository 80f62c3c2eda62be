// Webhook deliveries: one document per (webhook event, endpoint), holding the exact body (the
// same on every attempt), the state, when the next attempt is due and every attempt's log.
// The id is derived from the event and the endpoint, so fanning out the same email event
// again (redelivery, rebalance) creates nothing new. Each attempt is taken with
// compare-and-set before its request is made, so one dispatcher makes it; one that dies
// mid-attempt leaves it due again after a lease (at-least-once, as the spec's receivers expect).
// Disabling or deleting an endpoint ends its pending deliveries shortly after, in the background
// (endPendingDeliveries, run by ./delivery-endings.ts), and so does taking an event type out of
// its events for the deliveries of that type; any of them left pending then (a crash, a stop)
// ends as it falls due (./attempt.ts).
import { setImmediate } from 'node:timers/promises';
import { createHash } from 'node:crypto';
import { afterAttempt, type WebhookDeliveryStatus, type WebhookPolicy } from '../../../domain/webhooks/delivery.ts';
import type { WebhookEvent } from '../../../domain/webhooks/events.ts';
import type { WebhookAttemptLog, WebhookDeliveryView } from '../../../projections/email-view.ts';
import { DuplicateKeyError, type DocumentStore, type Stored, type Where } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { disableGenerationOf, endpointsOf, type WebhookEndpoint } from './endpoints.ts';

export interface WebhookDelivery {
  _id: string;
  emailId: string;
  projectId: string;
  endpointId: string;
  eventId: string;
  type: string;
  /** The request body, byte for byte, for every attempt. */
  body: string;
  status: WebhookDeliveryStatus;
  attempts: number;
  /** When the next attempt is due; while one runs, when its lease ends. Null once done. */
  nextAttemptAt: string | null;
  attemptLogs: WebhookAttemptLog[];
  /**
   * The endpoint's disable generation as the fan-out read it (0 when absent: see
   * disableGenerationOf). Below the endpoint's current one, the endpoint was disabled after that
   * read, so the delivery ends without a request.
   */
  disableGeneration?: number;
  createdAt: string;
  updatedAt: string;
}

export const deliveriesOf = (documents: DocumentStore) => documents.collection<WebhookDelivery>(COLLECTIONS.webhookDeliveries);

export const deliveryIdOf = (eventId: string, endpointId: string): string =>
  `whd_${createHash('sha256').update(`${eventId}\n${endpointId}`).digest('base64url').slice(0, 26)}`;

/**
 * Creates the deliveries of these events to these endpoints (those that exist already are left as
 * they are), each stamped with its endpoint's disable generation as read: an endpoint disabled
 * between that read and the insert holds a higher one, and the delivery ends (./attempt.ts).
 */
export async function fanOut(documents: DocumentStore, events: WebhookEvent[], endpoints: WebhookEndpoint[], now: Date): Promise<number> {
  let created = 0;
  for (const event of events) {
    const body = JSON.stringify(event);
    for (const endpoint of endpoints.filter((e) => e.enabled && e.events.includes(event.type))) {
      try {
        await deliveriesOf(documents).insert({
          _id: deliveryIdOf(event.id, endpoint._id),
          emailId: event.data.email_id,
          projectId: event.data.project_id,
          endpointId: endpoint._id,
          eventId: event.id,
          type: event.type,
          body,
          status: 'pending',
          attempts: 0,
          nextAttemptAt: now.toISOString(),
          attemptLogs: [],
          disableGeneration: disableGenerationOf(endpoint),
          createdAt: now.toISOString(),
          updatedAt: now.toISOString(),
        });
        created++;
      } catch (error) {
        if (!(error instanceof DuplicateKeyError)) throw error;
      }
    }
  }
  return created;
}

/** The schedule's order: by due time, ties by id. */
const DUE_ORDER: Array<[string, 'asc']> = [['nextAttemptAt', 'asc'], ['_id', 'asc']];

/**
 * The endpoint ids other than `skipped`, as ranges between them (the store has no "not in").
 * With `status` (a delivery has a due time only while pending), each is a range of the
 * `pending` index: the skipped endpoints' deliveries are not even scanned, however many are due.
 */
function endpointsBetween(skipped: ReadonlySet<string>): Where[] {
  const bounds = [...skipped].sort();
  if (bounds.length === 0) return [{ status: 'pending' }];
  const ranges: Where[] = [{ status: 'pending', endpointId: { lt: bounds[0] } }];
  for (let i = 0; i < bounds.length; i++) {
    ranges.push({ status: 'pending', endpointId: i + 1 < bounds.length ? { gt: bounds[i], lt: bounds[i + 1] } : { gt: bounds[i] } });
  }
  return ranges;
}

const byDue = (a: WebhookDelivery, b: WebhookDelivery): number =>
  a.nextAttemptAt! < b.nextAttemptAt! ? -1 : a.nextAttemptAt! > b.nextAttemptAt! ? 1 : a._id < b._id ? -1 : a._id > b._id ? 1 : 0;

/** How far past `limit` rows the first look reads the due window before it leaves that to the ranges. */
const WINDOW_FACTOR = 4;

/**
 * Deliveries due at `now`, earliest first, at most `limit`, but none of the endpoints in
 * `skipped` (those with no room for another request) nor of the projects in `skippedProjects`
 * (those holding their share of the requests in flight: ./project-shares.ts): a slow endpoint's
 * backlog, or a project's, however long, never fills the window in front of another's deliveries.
 *
 * With endpoints or projects skipped, the `due` index is read first, a few fields of at most
 * WINDOW_FACTOR × `limit` rows, leaving out the skipped rows as they come: that look costs what is
 * due, however many deliveries wait for later. Only when the skipped rows fill that window is the
 * read split into ranges between the skipped endpoints (`pending` index), which skip those rows
 * entirely but scan every pending delivery of the other endpoints; a skipped project's endpoints
 * are skipped there (those it has, and those the window found), and any of its deliveries the
 * ranges still find (an endpoint deleted since) are left out of the answer.
 */
export async function dueDeliveries(
  documents: DocumentStore, now: Date, limit: number, skipped: ReadonlySet<string>, skippedProjects: ReadonlySet<string> = new Set(),
): Promise<Array<Stored<WebhookDelivery>>> {
  const deliveries = deliveriesOf(documents);
  const due = { nextAttemptAt: { lte: now.toISOString() } };
  if (skipped.size === 0 && skippedProjects.size === 0) return deliveries.find({ where: due, orderBy: DUE_ORDER, limit });
  const window = await deliveries.find({ where: due, orderBy: DUE_ORDER, limit: limit * WINDOW_FACTOR, fields: ['endpointId', 'projectId'] });
  const left = (delivery: Pick<WebhookDelivery, 'endpointId' | 'projectId'>) => skipped.has(delivery.endpointId) || skippedProjects.has(delivery.projectId);
  const wanted = window.filter((delivery) => !left(delivery)).slice(0, limit);
  if (wanted.length === limit || window.length < limit * WINDOW_FACTOR) {
    if (wanted.length === 0) return [];
    // Read again whole: one that changed in between is no longer due, or no longer pending (takeAttempt checks both).
    return (await deliveries.find({ where: { _id: { in: wanted.map((delivery) => delivery._id) } } })).sort(byDue);
  }
  const endpoints = new Set(skipped);
  for (const delivery of window) if (skippedProjects.has(delivery.projectId)) endpoints.add(delivery.endpointId);
  for (const projectId of skippedProjects) {
    for (const endpoint of await endpointsOf(documents).find({ where: { projectId }, fields: ['_id'] })) endpoints.add(endpoint._id);
  }
  const parts = await Promise.all(endpointsBetween(endpoints).map((range) =>
    deliveries.find({ where: { ...range, ...due }, orderBy: DUE_ORDER, limit })));
  return parts.flat().filter((delivery) => !left(delivery)).sort(byDue).slice(0, limit);
}

/**
 * When the earliest delivery due after `after` is due (null when none is): those due by then
 * are dueDeliveries' to read.
 */
export async function nextDueAfter(documents: DocumentStore, after: Date): Promise<string | null> {
  const [first] = await deliveriesOf(documents).find({ where: { nextAttemptAt: { gt: after.toISOString() } }, orderBy: DUE_ORDER, limit: 1 });
  return first?.nextAttemptAt ?? null;
}

/** Takes the next attempt of a due delivery; null when another dispatcher took it (or it is no longer due). */
export async function takeAttempt(documents: DocumentStore, delivery: Stored<WebhookDelivery>, now: Date, policy: WebhookPolicy): Promise<Stored<WebhookDelivery> | null> {
  if (delivery.status !== 'pending' || delivery.nextAttemptAt === null || delivery.nextAttemptAt > now.toISOString()) return null;
  const { _v, ...body } = delivery;
  return deliveriesOf(documents).replace({
    ...body,
    attempts: delivery.attempts + 1,
    nextAttemptAt: new Date(now.getTime() + policy.attemptLeaseMs).toISOString(),
    updatedAt: now.toISOString(),
  }, _v);
}

/** Records the outcome of the attempt taken: the delivery as stored, or null when the lease was lost meanwhile (another dispatcher took over). */
export async function recordAttempt(
  documents: DocumentStore, taken: Stored<WebhookDelivery>, log: Omit<WebhookAttemptLog, 'number'>, now: Date, policy: WebhookPolicy,
): Promise<Stored<WebhookDelivery> | null> {
  const next = afterAttempt(taken.attempts, { httpStatus: log.httpStatus, errorCode: log.errorCode }, now, policy);
  const { _v, ...body } = taken;
  return deliveriesOf(documents).replace({
    ...body,
    status: next.status,
    nextAttemptAt: next.nextAttemptAt,
    attemptLogs: [...taken.attemptLogs, { number: taken.attempts, ...log }],
    updatedAt: now.toISOString(),
  }, _v);
}

/** Why an endpoint's pending deliveries all end without a request: it was disabled or deleted. */
export type EndpointClosed = 'endpoint_disabled' | 'endpoint_deleted';
/** Why a delivery ends without a request: its endpoint was closed, or no longer subscribes to the delivery's event type. */
export type DeliveryClosed = EndpointClosed | 'endpoint_unsubscribed';

/**
 * Why the endpoint (null: gone) no longer takes the delivery, or null when it does: what an
 * attempt ends a delivery for (./attempt.ts), and what a background run ends one for when the
 * endpoint's event types were cut (endPendingDeliveries), so that both give the same reason.
 */
export function closedReason(endpoint: WebhookEndpoint | null, delivery: WebhookDelivery): DeliveryClosed | null {
  if (!endpoint) return 'endpoint_deleted';
  if (!endpoint.enabled || disableGenerationOf(delivery) < disableGenerationOf(endpoint)) return 'endpoint_disabled';
  if (!(endpoint.events as readonly string[]).includes(delivery.type)) return 'endpoint_unsubscribed';
  return null;
}

/**
 * Closes a delivery, without a request (`reason` in its attempt log); false when it is no longer
 * pending or changed since it was read (compare-and-set) and nothing was written.
 */
export async function abandon(documents: DocumentStore, delivery: Stored<WebhookDelivery>, reason: DeliveryClosed, now: Date): Promise<boolean> {
  if (delivery.status !== 'pending') return false;
  const { _v, ...body } = delivery;
  return (await deliveriesOf(documents).replace({
    ...body,
    status: 'failed',
    nextAttemptAt: null,
    attemptLogs: [...delivery.attemptLogs, { number: delivery.attempts, httpStatus: null, errorCode: reason, durationMs: 0, createdAt: now.toISOString() }],
    updatedAt: now.toISOString(),
  }, _v)) !== null;
}

/** Taken by an attempt whose lease has not ended: its request may be in flight. */
const leased = (delivery: WebhookDelivery, now: Date): boolean =>
  delivery.attempts > (delivery.attemptLogs.at(-1)?.number ?? 0) && delivery.nextAttemptAt !== null && delivery.nextAttemptAt > now.toISOString();

/**
 * Pending deliveries ended per batch by endPendingDeliveries: one read and one round of writes
 * (sharing a commit) between two turns of the event loop.
 */
export const END_BATCH = 100;

/** What a run of endPendingDeliveries ends of an endpoint's pending deliveries. */
export interface Ending {
  /**
   * After a disable or a deletion: those whose disable generation is below `below` (the
   * endpoint's after that change; Infinity for a deletion), with `reason`.
   */
  closed?: { reason: EndpointClosed; below: number };
  /**
   * After event types were taken out of the endpoint's events: those of a type it does not
   * subscribe to, as each batch reads the endpoint (endpoint_unsubscribed). Read then rather than
   * named by the change: a type subscribed to again meanwhile keeps its deliveries, as it would
   * at their attempts.
   */
  unsubscribed?: boolean;
}

export interface EndingOptions {
  now: () => Date;
  /** Asked before each batch: true leaves the rest (the process stops; attempts end them as they fall due). */
  stopped: () => boolean;
  /** Told how many deliveries each batch ended, by reason. */
  onEnded?: (reason: DeliveryClosed, count: number) => void;
}

/**
 * Ends the endpoint's pending deliveries that `ending` names (`reason` in their attempt log, as
 * an attempt finding the endpoint so would: abandon), rather than when each next falls due.
 * After a disable, those made since carry `below` or more and are left: the endpoint may have
 * been enabled again. One made before the change but inserted after this run read past it is
 * the attempt's to end (./attempt.ts). Read over the `pending` index END_BATCH at a time, each
 * ended by compare-and-set, yielding to the event loop between batches: a backlog of any size
 * never holds the process. One taken by an attempt (leased) is left to that attempt:
 * attemptWebhookDelivery looks at the endpoint again once it recorded its outcome, and ends the
 * delivery if it is still pending. One that changed since it was read (an attempt took it) is
 * left to its attempt the same way. Returns how many it ended; a failed write throws once its
 * batch has settled.
 */
export async function endPendingDeliveries(documents: DocumentStore, endpointId: string, ending: Ending, options: EndingOptions): Promise<number> {
  let ended = 0;
  let after: Record<string, string> | undefined;
  while (!options.stopped()) {
    const batch = await deliveriesOf(documents).find({
      where: { status: 'pending', endpointId },
      orderBy: [['status', 'asc'], ['endpointId', 'asc'], ['nextAttemptAt', 'asc'], ['_id', 'asc']],
      limit: END_BATCH,
      after,
    });
    // After the batch, just before its writes: the types as close to those writes as an attempt reads them.
    const endpoint = ending.unsubscribed && batch.length > 0 ? await endpointsOf(documents).get(endpointId) : null;
    const now = options.now();
    const reasonFor = (delivery: WebhookDelivery): DeliveryClosed | null => {
      if (ending.closed && disableGenerationOf(delivery) < ending.closed.below) return ending.closed.reason;
      // Only unsubscribed: a disable or deletion meanwhile is its own run's to end, with its reason.
      if (endpoint && closedReason(endpoint, delivery) === 'endpoint_unsubscribed') return 'endpoint_unsubscribed';
      return null;
    };
    const ends = batch.flatMap((delivery) => {
      const reason = leased(delivery, now) ? null : reasonFor(delivery);
      return reason === null ? [] : [{ delivery, reason }];
    });
    const written = await Promise.allSettled(ends.map(({ delivery, reason }) => abandon(documents, delivery, reason, now)));
    const counts = new Map<DeliveryClosed, number>();
    written.forEach((w, i) => {
      if (w.status === 'fulfilled' && w.value) counts.set(ends[i].reason, (counts.get(ends[i].reason) ?? 0) + 1);
    });
    for (const [reason, count] of counts) {
      ended += count;
      options.onEnded?.(reason, count);
    }
    const failed = written.find((w) => w.status === 'rejected');
    if (failed) throw failed.reason;
    if (batch.length < END_BATCH) break;
    const last = batch[batch.length - 1];
    after = { status: 'pending', endpointId, nextAttemptAt: last.nextAttemptAt!, _id: last._id };
    await setImmediate();
  }
  return ended;
}

/** EmailDetail.webhookDeliveries: at most 100, newest first. */
export async function deliveryViewsOf(documents: DocumentStore, emailId: string, limit = 100): Promise<WebhookDeliveryView[]> {
  const found = await deliveriesOf(documents).find({ where: { emailId }, orderBy: [['createdAt', 'desc'], ['_id', 'desc']], limit });
  return found.map((d) => ({ id: d._id, eventId: d.eventId, status: d.status, nextAttemptAt: d.nextAttemptAt, attemptLogs: d.attemptLogs }));
}

/** An endpoint's delivery as its page shows it: which email and event, and every attempt (not the body). */
export type EndpointDeliveryView = Omit<WebhookDelivery, '_id' | 'projectId' | 'endpointId' | 'body' | 'disableGeneration'> & { id: string };

/**
 * The endpoint's deliveries, newest first, `limit` at a time; `cursor` is the last delivery id
 * of the previous page (null when it is not one of this endpoint's: the caller answers 404).
 */
export async function endpointDeliveries(
  documents: DocumentStore,
  endpointId: string,
  page: { limit: number; cursor?: string },
): Promise<{ deliveries: EndpointDeliveryView[]; nextCursor: string | null } | null> {
  let after: Record<string, string> | undefined;
  if (page.cursor !== undefined) {
    const last = await deliveriesOf(documents).get(page.cursor);
    if (!last || last.endpointId !== endpointId) return null;
    after = { endpointId, createdAt: last.createdAt, _id: last._id };
  }
  const found = await deliveriesOf(documents).find({
    where: { endpointId },
    orderBy: [['endpointId', 'asc'], ['createdAt', 'desc'], ['_id', 'desc']],
    limit: page.limit + 1,
    after,
  });
  const shown = found.slice(0, page.limit);
  return {
    deliveries: shown.map((d) => ({
      id: d._id, emailId: d.emailId, eventId: d.eventId, type: d.type, status: d.status, attempts: d.attempts,
      nextAttemptAt: d.nextAttemptAt, attemptLogs: d.attemptLogs, createdAt: d.createdAt, updatedAt: d.updatedAt,
    })),
    nextCursor: found.length > page.limit ? shown[shown.length - 1]._id : null,
  };
}

export async function ensureDeliveryIndexes(documents: DocumentStore): Promise<void> {
  await deliveriesOf(documents).ensureIndexes([
    { name: 'due', fields: [['nextAttemptAt', 'asc'], ['_id', 'asc']] },
    // Due deliveries of ranges of endpoints (dueDeliveries, while some endpoint is at its bound).
    { name: 'pending', fields: [['status', 'asc'], ['endpointId', 'asc'], ['nextAttemptAt', 'asc'], ['_id', 'asc']] },
    { name: 'email', fields: [['emailId', 'asc'], ['createdAt', 'desc'], ['_id', 'desc']] },
    { name: 'endpoint', fields: [['endpointId', 'asc'], ['createdAt', 'desc'], ['_id', 'desc']] },
  ]);
}
