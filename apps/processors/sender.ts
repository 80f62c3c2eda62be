// The sender (group `<ns>.sender`): reacts to every lifecycle event of an email by bringing its
// work item (apps/services/delivery/work-items.ts) in line with the stream, and runs the items
// that are due (apps/services/delivery/attempt.ts) through the dispatcher
// (apps/pipeline/dispatcher.ts): first attempts at once, retries and claim recoveries at their
// time. Sending happens outside the consumer's handler, so a slow destination or a failing
// email never holds up the other emails of its partition; the handler only records what is
// due, durably. Any number of instances share the work: claims on the email's stream pick one sender.
import { claimDeadline } from '../../domain/email/delivery.ts';
import { emailIdOfStream } from '../../domain/email/events.ts';
import { originOfEvent } from '../../domain/events/metadata.ts';
import { resealContentKeys, type ContentKeyReseal } from '../services/content-vault.ts';
import { resealDkimKeys, type ResealOutcome, type UnopenableDkimKey } from '../services/dkim-key-vault.ts';
import { runDeliveryStep } from '../services/delivery/attempt.ts';
import { deliveryOutcomeReport } from '../services/delivery/outcome-report.ts';
import {
  dueWorkItems, dueWorkspaceItems, ensureWorkItemIndexes, openClaimItems, scanNextWorkspace, syncWorkItem, workItems, workspaceOfItem, type WorkItem,
} from '../services/delivery/work-items.ts';
import { loadEmail } from '../services/email-stream.ts';
import { ensureSendRateIndexes } from '../services/send-rate.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { afterDurable } from '../../infra/ports/durability.ts';
import { startDispatcher, type Dispatcher } from '../pipeline/dispatcher.ts';
import { startTlsReporting } from '../services/tls-reports/daily-reports.ts';
import { ensureTlsSessionCountIndexes } from '../services/tls-reports/session-counts.ts';
import { MAX_LOOKUPS, observedBySites, publishSites, type SiteRegistry, type WantedLookup } from '../services/delivery/sites.ts';
import { defineProcessor, type ProcessorDeps, type ProcessorRuntime } from './processor.ts';

const SITE_KEY = 'site ';

function siteKeyOfItem(sites: SiteRegistry, item: WorkItem): string {
  return item.step !== 'recover' && item.domain ? `${SITE_KEY}${sites.keyOf(item.domain)}` : `email ${item._id}`;
}

/**
 * Takes a slot of the item's site for this attempt (or takeover): the site's key, or null for an item
 * that has no site (a recovery, only BCC recipients left). When the site is paused or at its rate,
 * the item moves to the site's next free slot (its claim untouched) and false is returned.
 */
async function takeSiteSlot(documents: DocumentStore, sites: SiteRegistry, item: WorkItem): Promise<string | null | false> {
  if (item.step === 'recover' || !item.domain) return null;
  const site = await sites.resolve(item.domain);
  const slot = sites.take(site);
  if (slot.ok) return site;
  const { _v, ...rest } = item as WorkItem & { _v: number };
  if (_v !== undefined) await workItems(documents).replace({ ...rest, dueAt: new Date(slot.retryAt).toISOString() }, _v);
  return false;
}

/** Pages of due items (of the dispatcher's read size) one look reads at most, passing over sites that have no room. */
const DUE_PAGES = 10;
/** Reads of workspaces' own pages one look makes, at most (what the earliest page holds costs none). */
const WORKSPACE_READS = 64;
/** The first page of a workspace's items a look reads, at least (each further page of it twice the last). */
const WORKSPACE_PAGE = 8;
/** Reads one look spends looking for workspaces whose due mail lies past the earliest page. */
const SCAN_READS = 4;
/** Workspaces remembered as having mail due past the earliest page, at most (and per site, as served there). */
const KNOWN_WORKSPACES = 1024;
/** Sites whose turns are remembered, at most: the least recently served there are forgotten first. */
const TURN_SITES = 1024;
/** Workspaces remembered as served at a site, at most, counted over every site remembered. */
const TURN_ENTRIES = 16 * 1024;

/** What one sender instance carries from look to look about workspaces' turns. */
interface TurnCursor {
  /** Where the scan for workspaces with due mail goes on (scanNextWorkspace); null: from the start. */
  scanAfter: string | null;
  /** Workspaces the scan found with mail due, and those fresh ones given a turn, until a look finds none of their mail due. */
  known: Set<string>;
  /**
   * Workspaces whose item this instance's consumer just wrote, due now (a new email): the next
   * look gives them a turn whatever lies ahead of them in the schedule.
   */
  fresh: Set<string>;
  /**
   * Workspaces by when one of their items last started (a site slot taken, a transaction begun),
   * least recently first: a look gives the first turns to those that waited longest.
   */
  served: Set<string>;
  /**
   * Per site (by key; the least recently served site first): its workspaces by when one of their
   * items last took a slot there (a number that grows with each), least recently first. A
   * workspace a site does not remember has waited there longer than any it remembers.
   */
  servedAt: Map<string, Map<string, number>>;
  /** Workspaces remembered in servedAt, over every site. */
  servedAtCount: number;
  /** The number of the last slot taken at a site. */
  slots: number;
}

export const newTurnCursor = (): TurnCursor => ({
  scanAfter: null, known: new Set(), fresh: new Set(), served: new Set(), servedAt: new Map(), servedAtCount: 0, slots: 0,
});

/** Puts `workspace` last in the set's order (the most recent), the first forgotten past KNOWN_WORKSPACES. */
function remember(workspaces: Set<string>, workspace: string): void {
  workspaces.delete(workspace);
  workspaces.add(workspace);
  if (workspaces.size > KNOWN_WORKSPACES) workspaces.delete(workspaces.values().next().value!);
}

/** Records that an item of `workspace` starts now: its workspace's turns come after the others' until they start one too. */
const served = (cursor: TurnCursor, workspace: string): void => remember(cursor.served, workspace);

/**
 * Records that an item of `workspace` took a slot of `site` now: there, its turns come after
 * those of the other workspaces, until they take one too, whatever any of them sends elsewhere.
 * Bounded: a site remembers KNOWN_WORKSPACES workspaces, and TURN_SITES sites with TURN_ENTRIES
 * workspaces in all are remembered; the least recently served go first, which are those that
 * would come first anyway.
 */
function servedAtSite(cursor: TurnCursor, site: string, workspace: string): void {
  let order = cursor.servedAt.get(site);
  if (order) cursor.servedAt.delete(site);
  else order = new Map();
  cursor.servedAt.set(site, order);
  if (order.delete(workspace)) cursor.servedAtCount--;
  order.set(workspace, ++cursor.slots);
  cursor.servedAtCount++;
  if (order.size > KNOWN_WORKSPACES) {
    order.delete(order.keys().next().value!);
    cursor.servedAtCount--;
  }
  // This site is the most recent: the oldest is another one whenever a bound is passed.
  while (cursor.servedAt.size > TURN_SITES || cursor.servedAtCount > TURN_ENTRIES) {
    const [oldest, forgotten] = cursor.servedAt.entries().next().value!;
    cursor.servedAt.delete(oldest);
    cursor.servedAtCount -= forgotten.size;
  }
}

/**
 * Records that this instance's consumer wrote an item of `workspace` that is due now (its write
 * durable): the next look gives the workspace a turn. Other instances find it as they find any
 * (the earliest page, the scan); this one, which wrote it, need not wait for either.
 */
const scheduledDue = (cursor: TurnCursor, workspace: string): void => remember(cursor.fresh, workspace);

/** One workspace's place in a look: its items read and not taken yet, and where its next page starts. */
interface Turn {
  workspace: string;
  buffer: WorkItem[];
  /** The last of its items read (null: none yet, its next page starts at its earliest). */
  last: WorkItem | null;
  /** The size of its last page read (0: none read yet). */
  pageSize: number;
  /** Nothing more of it is due past what was read. */
  exhausted: boolean;
  /** Nothing more of it to take in this look. */
  done: boolean;
  /** Lookups asked for it in this look. */
  wanted: number;
}

interface DueRead {
  documents: DocumentStore;
  sites: SiteRegistry;
  cursor: TurnCursor;
  /** Items this instance runs now: nothing to start again. */
  running: ReadonlySet<string>;
  looked: () => void;
}

/** One item a look picked for a site, and its place in the site's turns. */
interface SitePick {
  item: WorkItem;
  workspace: string;
  /** Items of its workspace picked for the site before it in this look. */
  nth: number;
}

/**
 * Due items in workspace turns: each workspace's earliest due item in turn, then each one's
 * next, and so on; within a workspace earliest first (by dueAt, then _id), as for a workspace
 * alone. The schedule is every workspace's, and a site's connections and rate, a smarthost's
 * pool and the DNS lookups of new domains are shared by all of them: served by due time alone,
 * one workspace's burst (a newsletter of 2,000) would make another's one email (a sign-in code)
 * wait for the whole burst. In turns, it waits behind a few items of each busy workspace.
 *
 * Which workspaces have mail due: those in the earliest page of the schedule (one read of the
 * dueAt index, whoever's mail it is), and, when that page is full, those whose item this
 * instance's consumer just wrote due (scheduledDue: a new email, which nothing else would find
 * soon, as first attempts are dated 1970 and ordered by their time-ordered ids, behind the whole
 * backlog) and those a scan over the workspaces finds further on: SCAN_READS reads a look (one
 * read a workspace, due or not: a look's cost must not grow with the workspaces whose mail is all
 * due later), going on from look to look. Both are remembered until a look finds none of their
 * mail due. The first turns go to the workspaces that waited longest since one of their items
 * started, so that no workspace is always first.
 *
 * At a site, the workspaces take turns of their own, whatever they send elsewhere: the items a
 * look picks for the site go in the order of the site's turns (each workspace's first one there
 * before any workspace's second; among those, first the workspace whose item took a slot of the
 * site longest ago), and the first to start takes the site's next slot (takeSiteSlot): at a site
 * whose rate takes one message per slot, the one sent. When the site has no room left in the
 * look, an item that comes before the last one picked for it in the site's turns takes its place.
 *
 * At most `room` items (the dispatcher's free slots): an item read beyond them would wait in
 * the dispatcher's queue in front of another workspace's item that comes due meanwhile.
 *
 * Within a workspace, at most as many items per site as the site has room for: items of a site
 * that is full (slow, or sending at its limit) are passed over for other sites', within
 * DUE_PAGES pages of `window` items read in all and WORKSPACE_READS reads (a page per workspace
 * per turn at most), so a backlog at one site never fills the window the dispatcher reads.
 *
 * An item whose recipient domain was not looked up yet is passed over too, while its site is
 * looked up in the background (a bounded number at once, through the DNS cache, shared out
 * in workspace turns too): until then its key would be the domain itself, with a limit of its
 * own, and new domains served by one MX set (Google Workspace, Microsoft 365) would each run as
 * a site of their own, past the real site's `connections`. `looked` (a kick of the dispatcher)
 * reads it again once its site is known.
 */
async function dueBySite(read: DueRead, now: Date, room: number, window: number, full: ReadonlySet<string>): Promise<WorkItem[]> {
  const { documents, sites, cursor, running } = read;
  const picked: WorkItem[] = [];
  if (room <= 0) return picked;
  const picksAt = new Map<string, SitePick[]>();
  const wanted: WantedLookup[] = [];
  const wantedDomains = new Set<string>();

  // Taken before the page is read: each was noted once its item was durable, so a page that holds
  // everything due holds their items.
  const fresh = [...cursor.fresh];
  cursor.fresh.clear();
  let earliest: WorkItem[];
  try {
    earliest = await dueWorkItems(documents, now, window);
  } catch (error) {
    for (const workspace of fresh) scheduledDue(cursor, workspace);
    throw error;
  }
  let budget = DUE_PAGES * window - earliest.length;
  // A short page holds everything due: every workspace's turn is what it holds.
  const pageHoldsAll = earliest.length < window;
  const byWorkspace = new Map<string, Turn>();
  const turnOf = (workspace: string): Turn => {
    let turn = byWorkspace.get(workspace);
    if (!turn) {
      turn = { workspace, buffer: [], last: null, pageSize: 0, exhausted: pageHoldsAll, done: false, wanted: 0 };
      byWorkspace.set(workspace, turn);
    }
    return turn;
  };
  for (const item of earliest) {
    const turn = turnOf(workspaceOfItem(item));
    turn.buffer.push(item);
    turn.last = item;
  }
  if (pageHoldsAll) cursor.known.clear();
  else {
    for (let reads = 0; reads < SCAN_READS; reads++) {
      const found = await scanNextWorkspace(documents, now, cursor.scanAfter);
      if (found === null) {
        // Past the last workspace: the next look starts over.
        cursor.scanAfter = null;
        break;
      }
      cursor.scanAfter = found.workspace;
      if (found.due && cursor.known.size < KNOWN_WORKSPACES) cursor.known.add(found.workspace);
    }
    // Room for the fresh ones before the scan's finds: the scan finds those again, nothing else finds these.
    for (const workspace of fresh) remember(cursor.known, workspace);
    for (const workspace of cursor.known) turnOf(workspace);
  }

  // Those that never started an item first (in workspace order), then the one that started one
  // longest ago: however many looks come between two slots of a site, the next slot's first turn
  // is the workspace that waited longest for one.
  const ordered = [...byWorkspace.keys()].filter((name) => !cursor.served.has(name)).sort();
  for (const name of cursor.served.keys()) if (byWorkspace.has(name)) ordered.push(name);
  const turns = ordered.map((name) => byWorkspace.get(name)!);
  const place = new Map(ordered.map((name, index) => [name, index]));
  let reads = WORKSPACE_READS;

  /**
   * Negative when `a` comes before `b` in the site's turns: fewer items of its workspace before
   * it, then its workspace's last slot there longer ago (none remembered: longest), then its
   * workspace's turn in this look.
   */
  const atSite = (site: string, a: SitePick, b: SitePick): number => {
    const slots = cursor.servedAt.get(site);
    return a.nth - b.nth || (slots?.get(a.workspace) ?? 0) - (slots?.get(b.workspace) ?? 0) || place.get(a.workspace)! - place.get(b.workspace)!;
  };

  /** Takes the item when it can start now: as siteKeyOfItem, with a site only when it is known. */
  const take = (item: WorkItem, turn: Turn): boolean => {
    if (running.has(item._id)) return false;
    if (item.step !== 'recover' && item.domain) {
      const site = sites.knownKeyOf(item.domain);
      if (site === null) {
        // A workspace never gets more lookups at once than there are: its domains past those can wait.
        if (turn.wanted < MAX_LOOKUPS && !wantedDomains.has(item.domain) && !sites.lookingUp(item.domain)) {
          turn.wanted++;
          wantedDomains.add(item.domain);
          wanted.push({ domain: item.domain, workspace: turn.workspace });
        }
        return false;
      }
      if (full.has(`${SITE_KEY}${site}`)) return false;
      const picks = picksAt.get(site) ?? [];
      const pick: SitePick = { item, workspace: turn.workspace, nth: picks.filter((p) => p.workspace === turn.workspace).length };
      if (picks.length + sites.inFlight(site) >= sites.concurrency(site)) {
        // No room left at the site in this look: the last picked there in its turns gives way to
        // this one if this one comes before it (an earlier round's pick of a workspace that waited less there).
        const last = picks.reduce<SitePick | null>((worst, p) => (worst === null || atSite(site, p, worst) > 0 ? p : worst), null);
        if (last === null || atSite(site, pick, last) >= 0) return false;
        picks.splice(picks.indexOf(last), 1);
        picked.splice(picked.indexOf(last.item), 1);
      }
      picks.push(pick);
      picksAt.set(site, picks);
    }
    picked.push(item);
    return true;
  };

  /** The workspace's next item that can start, reading one page of its items at most. */
  const takeTurn = async (turn: Turn): Promise<void> => {
    for (let paged = false; ;) {
      while (turn.buffer.length > 0) if (take(turn.buffer.shift()!, turn)) return;
      if (turn.exhausted || budget <= 0 || reads <= 0) {
        turn.done = true;
        return;
      }
      // Its next page on its next turn: the pages read are shared out in turns too.
      if (paged) return;
      // The first in proportion to the room left per workspace (many workspaces do not each read
      // the whole room), each further one twice the last (a long backlog at full sites is passed quickly).
      turn.pageSize = turn.pageSize === 0 ? Math.max(WORKSPACE_PAGE, Math.ceil((room - picked.length) / turns.length)) : 2 * turn.pageSize;
      const size = Math.min(budget, window, turn.pageSize);
      const page = await dueWorkspaceItems(documents, turn.workspace, now, turn.last, size);
      paged = true;
      reads--;
      budget -= page.length;
      turn.exhausted = page.length < size;
      // A remembered workspace with nothing due any more is forgotten.
      if (page.length === 0 && turn.last === null) cursor.known.delete(turn.workspace);
      if (page.length > 0) turn.last = page[page.length - 1];
      turn.buffer = page;
    }
  };

  for (let active = turns; picked.length < room && active.length > 0; active = active.filter((turn) => !turn.done)) {
    for (const turn of active) {
      if (turn.done) continue;
      await takeTurn(turn);
      if (picked.length >= room) break;
    }
  }
  // Each site's picks in the site's turns, in the places its picks took: the dispatcher starts them
  // in this order, and the first to start takes the site's next slot.
  for (const [site, picks] of picksAt) {
    if (picks.length < 2) continue;
    const places = picks.map((p) => picked.indexOf(p.item)).sort((x, y) => x - y);
    picks.sort((a, b) => atSite(site, a, b));
    places.forEach((at, i) => {
      picked[at] = picks[i].item;
    });
  }
  sites.lookUp(wanted, read.looked);
  return picked;
}

/**
 * Emails one instance works on at once, at most. With a transport that runs a bounded number
 * of transactions at once (a smarthost's pooled connections), twice that: one composing while
 * one is on the wire, so a claim never waits long for a connection (a claim that waits past its
 * start grace is taken over by another sender: domain/email/delivery.ts).
 */
const CONCURRENCY = 64;
/** Open claims read one by one at start to say what becomes of them; past these, the schedule's word is taken. */
const INHERITED_CLAIMS_READ = 200;
/** How often an idle instance looks for due items (retries, recoveries, other instances' leftovers). */
const POLL_MS = 1000;

export const sender = defineProcessor({
  name: 'sender',
  summary: 'delivers queued emails through RELAY_DELIVERY (outbox, smtp or mx), with durable retries',
  eventTypes: ['EmailAccepted', 'DeliveryClaimed', 'DeliveryAttempted', 'DeliveryFailed'],
  async init(deps): Promise<Dispatcher & Required<Pick<ProcessorRuntime, 'stopClaiming'>> & { scheduled(item: WorkItem): void }> {
    await ensureWorkItemIndexes(deps.documents);
    await ensureSendRateIndexes(deps.documents);
    logDkimReseal(deps, await resealDkimKeys(deps.documents, deps.services.secrets));
    await deps.services.warmCompose();
    await deps.services.transport().warm?.();
    const mx = deps.services.mxDelivery();
    if (mx) await ensureTlsSessionCountIndexes(deps.documents);
    // Yesterday's TLS reports (RFC 8460), from the sessions every sender instance counted.
    const reporting = mx ? startTlsReporting({
      documents: deps.documents, dns: mx.dns, transport: deps.services.transport(), secrets: deps.services.secrets, from: deps.config.tlsRptFrom, egress: deps.services.egress,
      https: { dnsServers: deps.config.dnsServers, allow: deps.config.webhookAllow }, now: deps.now, onError: deps.onError,
      ...(deps.onWarning ? { onWarning: deps.onWarning } : {}),
    }) : null;
    // Per-site scheduling (apps/services/delivery/sites.ts): each site gets at most its share of
    // this instance's concurrency, and a paused or rate-limited site's items move to its next slot
    // instead of waiting at the head of the schedule, so no site holds up the others.
    const sites = deps.services.sites();
    const publishing = publishSites(deps.documents, sites, deps.onError);
    const transport = observedBySites(deps.services.transport(), sites);
    await logOpenClaims(deps);
    const delivery = {
      observe: deliveryOutcomeReport({
        metrics: deps.metrics?.delivery,
        transport: transport.name,
        warn: (message, fields) => (deps.onWarning ?? deps.onInfo)?.(message, fields),
        error: (message, fields) => (deps.onAlert ?? deps.onWarning)?.(message, fields),
        now: deps.now,
      }),
      events: deps.events,
      emails: deps.services.emails,
      policy: deps.services.policies.delivery,
      documents: deps.documents,
      secrets: deps.services.secrets,
      transport,
      sendRate: deps.services.sendRate,
      compose: deps.services.compose,
      now: deps.now,
    };
    // Its series from 0: the first failed step after a start is then an increase an alert sees.
    const runFailures = deps.metrics?.dispatchRunFailures('sender');
    // Set once the dispatcher exists: a site lookup that ends makes it read the schedule again.
    let kick = () => {};
    let inFlight = () => 0;
    const concurrency = transport.capacity ? Math.min(CONCURRENCY, 2 * transport.capacity) : CONCURRENCY;
    const running = new Set<string>();
    const read: DueRead = { documents: deps.documents, sites, cursor: newTurnCursor(), running, looked: () => kick() };
    // Stopping waits for the steps in flight (their outcome is recorded): stopping mid-transaction
    // would leave exactly the unknown outcome that claims exist to contain.
    const dispatcher = startDispatcher<WorkItem>({
      due: (now, limit, full) => dueBySite(read, now, Math.min(limit, concurrency - inFlight()), limit, full),
      id: (item) => item._id,
      dueAt: (item) => item.dueAt,
      // A first attempt, a retry or a takeover is scheduled by its recipient's site; a recovery by itself.
      key: (item) => siteKeyOfItem(sites, item),
      run: async (item) => {
        running.add(item._id);
        try {
          const site = await takeSiteSlot(deps.documents, sites, item);
          if (site === false) return;
          served(read.cursor, workspaceOfItem(item));
          // Sites only where they shape: elsewhere no slot is taken and every domain is its own.
          if (site !== null && sites.shaping) servedAtSite(read.cursor, site, workspaceOfItem(item));
          const result = await runDeliveryStep(delivery, item).catch((error: Error) => {
            throw new Error(`delivery of ${item._id} (${item.step} ${item.attempt}) failed: ${error.message}`, { cause: error });
          });
          deps.onDebug?.('delivery step', { emailId: item._id, step: item.step, attempt: item.attempt, result });
        } finally {
          running.delete(item._id);
        }
      },
    }, { concurrency, perKey: (key) => (key.startsWith(SITE_KEY) ? sites.concurrency(key.slice(SITE_KEY.length)) : 1), pollMs: POLL_MS, now: deps.now, onError: deps.onError, onRunFailed: () => runFailures?.inc(), onStuckRun: () => runFailures?.inc() });
    kick = () => dispatcher.kick();
    inFlight = () => dispatcher.status().inFlight;
    // Started last, so that no failure of the start leaves it running.
    const contentKeys = resealContentKeysAside(deps);
    return {
      ...dispatcher,
      // An item the consumer wrote, due now and durable: its workspace has a turn in the next look.
      scheduled: (item) => {
        scheduledDue(read.cursor, workspaceOfItem(item));
        dispatcher.kick();
      },
      // The work items go on being brought in line with the events the consumer reads meanwhile,
      // for the next start to send.
      stopClaiming: () => dispatcher.stop(),
      stop: async () => {
        await contentKeys.stop();
        await reporting?.stop();
        await dispatcher.stop();
        await publishing.stop();
      },
    };
  },
  async handle(event, dispatcher, deps) {
    const emailId = emailIdOfStream(event.streamId);
    // The dispatcher syncs the item after each step it takes, so for its own events the item
    // is usually derived from this revision or a later one already: nothing to read. An item
    // is only ever deleted by a sync that found the delivery finished, and a partition brings
    // an email's events in order, so a later event without an item has nothing left to do.
    const current = await workItems(deps.documents).get(emailId);
    if (current ? current.streamRevision >= event.revision : event.type !== 'EmailAccepted') return;
    const item = await syncWorkItem(deps.documents, deps.events, emailId, originOfEvent(event), deps.services.policies.delivery);
    // The dispatcher reads another connection: it finds the item once its round made it durable.
    if (item && item.dueAt <= deps.now().toISOString()) afterDurable(() => dispatcher.scheduled(item));
  },
});

/** Unopenable keys named in the start log, at most; the count says how many there are. */
const UNOPENABLE_KEYS_LOGGED = 100;

/**
 * The re-seal's count at info, every start: `remaining: 0` once every process runs on the new
 * key tells the operator the previous key is no longer needed for DKIM keys (docs/operations.md).
 */
function logDkimReseal(deps: ProcessorDeps, outcome: ResealOutcome): void {
  deps.onInfo?.('re-sealed DKIM keys under the current secret key', { keyId: deps.services.secrets.keyId, resealed: outcome.changed, remaining: outcome.remaining });
  logUnopenableDkimKeys(deps, outcome.unopenable);
}

/**
 * The content keys' re-seal (content-vault.ts), beside sending: it reads every key of the
 * retention window, which must not hold up the start. Its count at info once it ends, as the DKIM
 * keys' (`remaining: 0`: the previous key is no longer needed for message bodies), and at warn
 * the emails whose key no configured secret key opens. A stop cuts it short, said by nothing:
 * the next start goes over the keys again.
 */
function resealContentKeysAside(deps: ProcessorDeps): { stop(): Promise<void> } {
  const abort = new AbortController();
  const done = resealContentKeys(deps.documents, deps.services.secrets, deps.now, abort.signal).then(
    (outcome) => outcome && logContentKeyReseal(deps, outcome),
    (error: Error) => deps.onError(new Error(`re-sealing content keys under the current secret key failed (the next start tries again): ${error.message}`, { cause: error })),
  );
  return {
    async stop() {
      abort.abort();
      await done;
    },
  };
}

function logContentKeyReseal(deps: ProcessorDeps, outcome: ContentKeyReseal): void {
  deps.onInfo?.('re-sealed content keys under the current secret key', { keyId: deps.services.secrets.keyId, resealed: outcome.changed, remaining: outcome.remaining });
  if (outcome.unopenableCount === 0) return;
  (deps.onWarning ?? deps.onInfo)?.('content keys that no configured secret key opens: the bodies of these emails can be neither sent nor shown until their secret key is back in RELAY_SECRET_KEY_PREVIOUS (docs/operations.md, "The secret key")', {
    count: outcome.unopenableCount,
    emails: outcome.unopenable,
    ...(outcome.unopenableCount > outcome.unopenable.length ? { more: true } : {}),
  });
}

function logUnopenableDkimKeys(deps: ProcessorDeps, unopenable: UnopenableDkimKey[]): void {
  if (unopenable.length === 0) return;
  (deps.onWarning ?? deps.onInfo)?.('DKIM keys that no configured secret key opens: email from these domains fails as message_unbuildable until their secret key is back in RELAY_SECRET_KEY_PREVIOUS (docs/delivery.md, "Secret and rotation")', {
    count: unopenable.length,
    domains: unopenable.slice(0, UNOPENABLE_KEYS_LOGGED),
    ...(unopenable.length > UNOPENABLE_KEYS_LOGGED ? { more: true } : {}),
  });
}

/**
 * Says what this sender finds open at start: claims of other instances (or of one that
 * stopped) and when their grace ends: those whose transaction never began are taken over then
 * and sent, those with a transaction begun become delivery_unknown unless their holder records
 * an outcome first (or, for the outbox, are settled by what it holds: attempt.ts, recover).
 */
async function logOpenClaims(deps: ProcessorDeps): Promise<void> {
  const items = await openClaimItems(deps.documents, INHERITED_CLAIMS_READ + 1);
  if (items.length === 0) return;
  const policy = deps.services.policies.delivery;
  const due = { takeover: [] as string[], unknown: [] as string[] };
  for (const item of items.slice(0, INHERITED_CLAIMS_READ)) {
    // The schedule may be behind the stream (a transaction began since): the stream decides.
    const deadline = claimDeadline((await loadEmail(deps.events, item._id)).state, deps.services.policies.delivery);
    if (deadline) due[deadline.kind].push(deadline.at);
  }
  // Claims the stream shows settled since the schedule was read (another sender that runs
  // finished them meanwhile) leave nothing to say.
  if (due.takeover.length === 0 && due.unknown.length === 0 && items.length <= INHERITED_CLAIMS_READ) return;
  const span = (times: string[]) => (times.length === 0 ? null : { count: times.length, from: times.reduce((a, b) => (a < b ? a : b)), until: times.reduce((a, b) => (a > b ? a : b)) });
  (deps.onWarning ?? deps.onInfo)?.('open delivery claims found at start (left by a sender that stopped, or held by another that runs)', {
    ...(items.length > INHERITED_CLAIMS_READ ? { read: INHERITED_CLAIMS_READ, more: true } : {}),
    // Never began a transaction: taken over and sent once their start grace ends.
    beforeTransaction: span(due.takeover),
    // Began one: delivery_unknown once their grace ends, unless their holder records an outcome
    // (the outbox settles them by what it holds).
    inTransaction: span(due.unknown),
    startGraceMs: policy.claimStartGraceMs,
    graceMs: policy.claimGraceMs,
  });
}
