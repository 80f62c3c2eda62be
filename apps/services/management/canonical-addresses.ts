// Once, at the first start after an upgrade from a version before 2026-11-28 (6ae826a): what such
// a version stored beside the events under an address's older form is put under its canonical
// form (domain/mailbox.ts canonicalAddress), the only form today's code looks up.
//
// Those versions kept an address as written, only lower-cased. A recipient sent to as
// `"Ann"@example.org` that bounced hard was blocked as `"ann"@example.org` (entry id
// `<workspace>:"ann"@example.org`), and its email's read model lists it so; today admission looks
// the block up as ann@example.org, a removal names that entry so, and the `recipient` filter seeks
// that form. The events themselves are read in the canonical form (domain/email/upcast.ts), so a
// rebuild already agrees; this pass brings what was stored from them to the same form:
//   - each suppression entry whose address is not canonical is re-keyed under its canonical id. An
//     entry there already (the same mailbox blocked as written both ways) is merged with it: the
//     earlier block stays whole (its createdAt, reason, email and source), and the other one's
//     source is marked handled for the canonical address (./suppression-sources.ts), so that its
//     bounce or complaint handled again cannot block the address after an owner removed it. The
//     list's history (the RecipientSuppressed events) stays as it was recorded. The records of the
//     reports the suppressor is done with get a twin under the canonical address, so that a
//     removal made before the upgrade still stands when such a report is handled again.
//   - each email read model document holding an address in an older form gets the canonical form
//     in every place the projection copies an address from the events (projections/email-view.ts):
//     fromAddress, toAddresses, recipients, and the timeline's recipients and suppressedRecipients:
//     what the projection makes of the upcast events, as a rebuild would.
// Only the quoted local parts can be in an older form (those versions lower-cased every address,
// and refused Unicode domains), and a quoted local part is the entries' `"` .. `#` range of _id
// in each workspace: the list is read there, not whole. The email documents are read whole, a
// page at a time (the addresses are in arrays that no index covers), once.
//
// Once: a mark in `checkpoints` says the pass is done; every later start reads that one document
// and nothing else. Until then it also holds how far the emails were read, so a start cut short
// goes on from there. Several processes starting at once may each run the pass: every step is a
// compare-and-set or an insert that a duplicate refuses, made again on what it finds, so two
// passes end as one would.
import { canonicalRecipients, canonicalStoredAddress } from '../../../domain/email/upcast.ts';
import { suppressionIdOf, type Workspace } from '../../../domain/management.ts';
import { DuplicateKeyError, type Collection, type DocumentStore } from '../../../infra/ports/document-store.ts';
import type { EmailView } from '../../../projections/email-view.ts';
import { COLLECTIONS } from '../collections.ts';
import { markHandled, suppressionSourcesOf } from './suppression-sources.ts';
import { suppressionsOf } from './suppressions.ts';

/** The mark's id in `checkpoints`. */
export const CANONICAL_ADDRESSES_MARK = 'upgrade:canonical-addresses';

interface Mark {
  _id: string;
  done: boolean;
  /** The last email read model document already looked at; null before the first. */
  emailsAfter: string | null;
  updatedAt: string;
}

/** What a pass changed (nothing when it had been done already). */
export interface CanonicalAddressesReport {
  /** Suppression entries re-keyed, merges included. */
  rekeyed: number;
  /** Of those, entries merged into one already under the canonical id. */
  merged: number;
  /** Email read model documents rewritten. */
  emails: number;
}

const PAGE = 500;

/** Runs the pass unless a start did it already: null then. */
export async function canonicalizeStoredAddresses(documents: DocumentStore, now: () => Date = () => new Date()): Promise<CanonicalAddressesReport | null> {
  const marks = documents.collection<Mark>(COLLECTIONS.checkpoints);
  const mark = await marks.get(CANONICAL_ADDRESSES_MARK);
  if (mark?.done) return null;
  const report: CanonicalAddressesReport = { rekeyed: 0, merged: 0, emails: 0 };
  await rekeySuppressions(documents, report, now);
  await rekeyHandledSources(documents);
  let after = mark?.emailsAfter ?? null;
  for (;;) {
    const page = await documents.collection<EmailView>(COLLECTIONS.emails).find({
      orderBy: [['_id', 'asc']], after: after === null ? undefined : { _id: after }, limit: PAGE, fields: ['fromAddress', 'recipients'],
    });
    for (const email of page) {
      if (mayHoldOlderForms(email)) report.emails += await canonicalizeEmailView(documents, email._id);
    }
    if (page.length < PAGE) break;
    after = page[page.length - 1]._id;
    await saveMark(marks, { done: false, emailsAfter: after }, now);
  }
  await saveMark(marks, { done: true, emailsAfter: null }, now);
  return report;
}

/** Saves the mark; one saved meanwhile by another process's pass stands (its work is as good as this one's). */
async function saveMark(marks: Collection<Mark>, fields: Pick<Mark, 'done' | 'emailsAfter'>, now: () => Date): Promise<void> {
  const current = await marks.get(CANONICAL_ADDRESSES_MARK);
  const mark = { _id: CANONICAL_ADDRESSES_MARK, ...fields, updatedAt: now().toISOString() };
  if (current === null) {
    try {
      await marks.insert(mark);
    } catch (error) {
      if (!(error instanceof DuplicateKeyError)) throw error;
      if (fields.done) await saveMark(marks, fields, now);
    }
    return;
  }
  if (current.done) return;
  if (!(await marks.replace(mark, current._v)) && fields.done) await saveMark(marks, fields, now);
}

// ---------------------------------------------------------------------------------------
// Suppression entries

/**
 * The records of the bounces and complaints the suppressor is done with (./suppression-sources.ts)
 * name the address in its older form: read in the canonical form now, such a report handled again
 * (a redelivery, `relay parked retry`) would find no record and block an address an owner removed
 * before the upgrade. Each gets a twin under the canonical address, dated as it is (its retention
 * unchanged). The records are few (kept as long as webhook deliveries) and read whole, once.
 */
async function rekeyHandledSources(documents: DocumentStore): Promise<void> {
  const sources = suppressionSourcesOf(documents);
  let after: string | undefined;
  for (;;) {
    const page = await sources.find({ orderBy: [['_id', 'asc']], after: after === undefined ? undefined : { _id: after }, limit: PAGE });
    for (const { workspaceId, eventId, address, handledAt } of page) {
      const canonical = canonicalStoredAddress(address);
      if (canonical !== address) await markHandled(documents, { workspaceId, eventId, address: canonical }, new Date(handledAt));
    }
    if (page.length < PAGE) return;
    after = page[page.length - 1]._id;
  }
}

async function rekeySuppressions(documents: DocumentStore, report: CanonicalAddressesReport, now: () => Date): Promise<void> {
  const workspaces = documents.collection<Workspace>(COLLECTIONS.workspaces);
  const entries = suppressionsOf(documents);
  let workspaceAfter: string | undefined;
  for (;;) {
    const page = await workspaces.find({ orderBy: [['_id', 'asc']], after: workspaceAfter === undefined ? undefined : { _id: workspaceAfter }, limit: PAGE, fields: ['_id'] });
    for (const { _id: workspaceId } of page) {
      // `"` is 0x22 and `#` the next character: every entry whose address begins with a quote.
      let entryAfter: string | undefined;
      for (;;) {
        const quoted = await entries.find({
          where: { workspaceId, _id: { gte: `${workspaceId}:"`, lt: `${workspaceId}:#` } },
          orderBy: [['workspaceId', 'asc'], ['_id', 'asc']],
          after: entryAfter === undefined ? undefined : { workspaceId, _id: entryAfter },
          limit: PAGE,
        });
        for (const entry of quoted) {
          const canonical = canonicalStoredAddress(entry.address);
          if (canonical !== entry.address) await rekeyEntry(documents, entry._id, canonical, report, now);
        }
        if (quoted.length < PAGE) break;
        entryAfter = quoted[quoted.length - 1]._id;
      }
    }
    if (page.length < PAGE) return;
    workspaceAfter = page[page.length - 1]._id;
  }
}

/**
 * Moves entry `id` to the canonical address: inserted there, or merged with the entry there; then
 * the old entry is deleted at the version read. Anything changed meanwhile (another pass, a
 * removal, a block settled) is read again and the step made again on what is there.
 */
async function rekeyEntry(documents: DocumentStore, id: string, canonical: string, report: CanonicalAddressesReport, now: () => Date): Promise<void> {
  const entries = suppressionsOf(documents);
  let merging: boolean | null = null;
  for (;;) {
    const old = await entries.get(id);
    // Removed, or moved by another process's pass.
    if (old === null) return;
    const target = suppressionIdOf(old.workspaceId, canonical);
    const there = await entries.get(target);
    // Whether another entry was there before this pass moved anything there.
    merging ??= there !== null;
    const { _v: oldVersion, ...fields } = old;
    if (there === null) {
      try {
        await entries.insert({ ...fields, _id: target, address: canonical });
      } catch (error) {
        if (error instanceof DuplicateKeyError) continue;
        throw error;
      }
    } else {
      // The earlier block stays whole; the other one's source is done with (top of this file).
      const { _v: thereVersion, ...kept } = there;
      const oldFirst = fields.createdAt < kept.createdAt;
      if (oldFirst && !(await entries.replace({ ...fields, _id: target, address: canonical }, thereVersion))) continue;
      const [winner, loser] = oldFirst ? [fields, kept] : [kept, fields];
      if (loser.lastEventId !== null && loser.lastEventId !== winner.lastEventId) {
        await markHandled(documents, { workspaceId: old.workspaceId, eventId: loser.lastEventId, address: canonical }, now());
      }
    }
    if (await entries.delete(id, oldVersion)) {
      report.rekeyed++;
      if (merging) report.merged++;
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Email read model documents

const isOlderForm = (address: unknown): boolean => typeof address === 'string' && canonicalStoredAddress(address) !== address;

/** Whether the document (its fromAddress and recipients: every address it holds is one of theirs) holds an older form. */
const mayHoldOlderForms = (email: Partial<Pick<EmailView, 'fromAddress' | 'recipients'>>): boolean =>
  isOlderForm(email.fromAddress) || (email.recipients ?? []).some((r) => isOlderForm(r.address));

export function emailViewWithCanonicalAddresses(view: EmailView): EmailView {
  return {
    ...view,
    fromAddress: canonicalStoredAddress(view.fromAddress),
    toAddresses: view.toAddresses.map(canonicalStoredAddress),
    recipients: view.recipients.map((r) => ({ ...r, address: canonicalStoredAddress(r.address) })),
    events: view.events.map((entry) => {
      const { recipients, suppressedRecipients } = entry.payload;
      if (!Array.isArray(recipients) && !Array.isArray(suppressedRecipients)) return entry;
      return {
        ...entry,
        payload: {
          ...entry.payload,
          ...(Array.isArray(recipients) ? { recipients: canonicalRecipients(recipients) } : {}),
          ...(Array.isArray(suppressedRecipients) ? { suppressedRecipients: canonicalRecipients(suppressedRecipients) } : {}),
        },
      };
    }),
  };
}

/** Rewrites one document at the version read (read again after a lost race); 1 when it was rewritten. */
async function canonicalizeEmailView(documents: DocumentStore, id: string): Promise<number> {
  const emails = documents.collection<EmailView>(COLLECTIONS.emails);
  for (;;) {
    const stored = await emails.get(id);
    if (stored === null || !mayHoldOlderForms(stored)) return 0;
    const { _v, ...view } = stored;
    if (await emails.replace(emailViewWithCanonicalAddresses(view), _v)) return 1;
  }
}
