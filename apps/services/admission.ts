// Admission of one send request: the command handler in front of the admission decider.
// It reads what the decision needs (domains, suppressions, the email's stream), decides,
// and appends with an expected revision, so that concurrent retries of one request
// (same Idempotency-Key) admit exactly one email without any lock.
//
// Order of the checks, after the HTTP layer authenticated the key (401/403), refused an
// oversized body (413) and validated it (400):
//   1. idempotent replay: a request seen before gets its original answer, whatever changed
//      since (domain removed, quota used up, block lifted), so a client's retry is safe; the
//      rules too: a body today's validation refuses that an older version admitted under its
//      Idempotency-Key gets its replay (replayOfRefused, asked by the HTTP layer only then);
//   2. rate limit: a slot is taken before any rule is looked at, so that a burst cannot get
//      past the limit while its first requests are still being checked; replays take one too
//      (spec: replays count), and every later rejection gives it back (rejections do not).
//      Until then the slot is undecided: a request that finds the window full of this
//      process's undecided slots waits for them rather than be refused for requests that may
//      yet be rejected (./rate-limits.ts); an answer keeps the slot (rate.keep()). Then a send
//      body that is valid, once 3 to 5 and its size are decided, waits while the pipeline is too
//      far behind (flow control, ./admission-flow.ts); one that the quota (6) refuses already
//      on the month's usage as this process last folded it is answered instead of waiting (usage
//      only grows: that refusal is final), so it holds no undecided rate slot for the wait;
//   3. sender domain, 4. development recipients: the request's own validity for this key;
//   5. suppressions: a valid request to a blocked recipient is stored as suppressed, which is
//      an answer, not a rejection, so it keeps its rate slot and is never charged;
//      then an email, accepted or suppressed, whose event the log could not carry is refused
//      (413: ./event-size.ts; a template multiplies its variables);
//   6. quota: charged last, once nothing else can refuse the email, and before the email's
//      event is appended (see below); the email's content key is stored meanwhile, so that a
//      request refused by anything before (rate limit, 3 to 5, size) has written nothing that
//      outlives it, and a request refused by the quota takes its key back;
//   7. append EmailAccepted / EmailSuppressed to the email's own stream, its body sealed with
//      that key, which expires seven days after the admission (./content-vault.ts: a key an
//      earlier attempt of the request left is taken over and renewed).
// Rules 3 to 5 are the decider's (domain/email/admission.ts); this handler looks up the facts
// they need and hands them over in the command, decides once before writing anything, and
// appends with the decision taken again on the same stream.
//
// The charge and the email are two appends to two streams, never one transaction. A crash
// (or a lost store connection) between them leaves a charge without an email: the allowance
// is then over-charged by that email, never exceeded. A retry of the same request finds its
// charge already made: charges are keyed by email id, so concurrent requests with one
// Idempotency-Key and different bodies are charged once between them, the losers (409) not
// (the recipients counted are those of the first to charge, which need not be the body admitted).
//
// The fingerprint is a keyed MAC of the canonical body (RELAY_SECRET_KEY, purpose
// "idempotency-fingerprint"), never a plain hash: it stays in the events forever, next to the
// plaintext fields, and a plain hash would let anyone with the events test guesses about the
// sealed body and BCC. Streams written before it was keyed hold sha256(canonical body), and
// streams written before a key rotation hold the previous key's MAC: a retry still matches them
// (see fingerprintFor), so idempotent replays survive both.
import { createHash, timingSafeEqual } from 'node:crypto';
import { decideAdmission, replayOf, type AdmissionResult, type AdmitEmail, type DomainFacts } from '../../domain/email/admission.ts';
import { RelayError } from '../../domain/errors.ts';
import type { AdmittedMessage, SuppressedRecipient, TemplateReference } from '../../domain/email/events.ts';
import type { NormalizedSend } from '../../domain/email/send-request.ts';
import { initialEmailState, type EmailState } from '../../domain/email/state.ts';
import type { CommandOrigin } from '../../domain/events/metadata.ts';
import type { Environment, SendingDomain, SuppressionEntry } from '../../domain/management.ts';
import type { MonthlyAllowances } from '../../domain/usage/quota.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { deferDurability } from '../../infra/ports/durability.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import type { SecretBox } from '../../infra/secrets/secret-box.ts';
import type { AdmissionFlow } from './admission-flow.ts';
import { COLLECTIONS } from './collections.ts';
import type { Loaded } from './command-handler.ts';
import { contentPlaintext, giveBackContentKey, sealPlaintext, takeContentKey, type ContentKeySecrets, type HeldContentKey } from './content-vault.ts';
import { checkEmailEventSize } from './event-size.ts';
import type { Emails } from './email-stream.ts';
import { pooledRandomBytes } from '../../infra/secrets/random-pool.ts';
import { canonicalJson } from './canonical-json.ts';
import type { RateLimiter, RateReservation } from './rate-limits.ts';
import type { RecipientCharge, UsageLedger } from './usage-ledger.ts';
import { reusedReads } from './management/reused-reads.ts';

export interface AdmissionDeps {
  /** The email streams (services.emails). */
  emails: Emails;
  documents: DocumentStore;
  rateLimits: RateLimiter;
  usage: UsageLedger;
  /** Relay's secret (services.secrets): keys the idempotency fingerprint, seals the content key. */
  secrets: Pick<SecretBox, 'mac' | 'macVerify'> & ContentKeySecrets;
  now: () => Date;
  /** Holds a valid send while the pipeline is too far behind (./admission-flow.ts). */
  flow?: Pick<AdmissionFlow, 'pass'>;
}

/** Who is sending: the API key's identity, and its workspace's monthly allowances. */
export interface Sender {
  keyId: string;
  projectId: string;
  workspaceId: string;
  environment: Environment;
  allowances: MonthlyAllowances;
}

/** What a send body becomes before the rules are applied to it. */
export interface PreparedSend {
  send: NormalizedSend;
  template: TemplateReference | null;
}

interface SendRequestBase {
  /** The body as received: its canonical form is the idempotency fingerprint. */
  body: unknown;
  idempotencyKey: string | null;
  /** The request the events will name as their correlation and cause. */
  origin: CommandOrigin;
}

export type SendRequest = SendRequestBase & (
  | {
    /**
     * Builds the message. Called only for a request that is neither a replay nor rate limited:
     * a direct send was built while validating it; a template send resolves its template here
     * (a template deleted after the first attempt must not fail the replay).
     */
    prepare: () => Promise<PreparedSend>;
  }
  | { send: NormalizedSend; template?: TemplateReference | null }
);

/** The admission result, plus the rate slot the request holds (for the RateLimit headers). */
export interface Admission extends AdmissionResult {
  rate: RateReservation;
  replayed: boolean;
}

export const FINGERPRINT_PURPOSE = 'idempotency-fingerprint';

const HEX_256 = /^[0-9a-f]{64}$/;

/**
 * The fingerprint this request has against the email's stream: `stored` itself when it is
 * this body's fingerprint in an older form (the previous key's MAC after a rotation, or the
 * unkeyed sha256 of streams admitted before the fingerprint was keyed), so the decider sees
 * a replay; otherwise the current MAC (a first admission, or a conflict).
 */
export function fingerprintFor(secrets: Pick<SecretBox, 'mac' | 'macVerify'>, body: unknown, stored: string | null): string {
  const canonical = canonicalJson(body);
  const current = secrets.mac(FINGERPRINT_PURPOSE, canonical).toString('hex');
  if (stored === null || stored === current || !HEX_256.test(stored)) return current;
  const given = Buffer.from(stored, 'hex');
  if (secrets.macVerify(FINGERPRINT_PURPOSE, canonical, given)) return stored;
  if (timingSafeEqual(createHash('sha256').update(canonical).digest(), given)) return stored;
  return current;
}

/** base64url's 64 characters in byte order, so that a string of them sorts as the number it encodes. */
const SORTABLE_DIGITS = '-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz';

/**
 * With an Idempotency-Key the email id is derived from (project, key), so every retry
 * targets the same stream and the event store's expected-revision check picks one winner.
 * Without one it starts with the time in milliseconds (7 characters, sorting in time order
 * until 2109) followed by 78 random bits, as a ULID does: the emails of one moment then sit
 * side by side in every index keyed by email id (streams, read models, work items), so a commit
 * writes a few pages at the indexes' right edge rather than one page in a random place per
 * email. Either way it is `em_` and 20 base64url characters (15 bytes, as VERP encodes them).
 */
export function emailIdFor(projectId: string, idempotencyKey: string | null, now: number = Date.now()): string {
  if (idempotencyKey !== null) return `em_${createHash('sha256').update(`${projectId}\n${idempotencyKey}`).digest().subarray(0, 15).toString('base64url')}`;
  const ms = Math.min(Math.max(0, Math.floor(now)), 2 ** 42 - 1);
  let time = '';
  for (let shift = 36; shift >= 0; shift -= 6) time += SORTABLE_DIGITS[Math.floor(ms / 2 ** shift) % 64];
  return `em_${time}${pooledRandomBytes(10).toString('base64url').slice(0, 13)}`;
}

/**
 * What the workspace's records say about these domain names for the project (the unique
 * (workspaceId, name) index answers it). Exact names only: a parent's verification covers no
 * subdomain. Reused like the key (management/reused-reads.ts): a domain verified, connected or
 * disconnected by another process counts within REUSE_MS.
 */
async function domainFacts(documents: DocumentStore, workspaceId: string, projectId: string, names: string[]): Promise<Map<string, DomainFacts>> {
  const unique = [...new Set(names)];
  // Only the fields read here: a domain's record also holds its DKIM key and DNS records.
  const found = await reusedReads<Array<Pick<SendingDomain, 'name' | 'status' | 'projectIds'>>>(documents, 'domain-facts').get(
    `${workspaceId}\n${unique.join('\n')}`,
    () => documents.collection<SendingDomain>(COLLECTIONS.domains).find({ where: { workspaceId, name: { in: unique } }, fields: ['name', 'status', 'projectIds'] }),
  );
  const byName = new Map(found.map((d) => [d.name, d]));
  return new Map(unique.map((name) => {
    const domain = byName.get(name);
    return [name, { name, verified: domain?.status === 'verified', connected: domain?.projectIds.includes(projectId) ?? false }];
  }));
}

/**
 * Blocked recipients, To and CC first. A blocked BCC recipient is recorded without its
 * address: BCC never appears in events, reads or responses.
 */
async function suppressedAmong(documents: DocumentStore, workspaceId: string, send: NormalizedSend): Promise<SuppressedRecipient[]> {
  const visible = [...new Set([...send.to, ...send.cc].map((m) => m.normalized))];
  const hidden = [...new Set(send.bcc.map((m) => m.normalized))].filter((a) => !visible.includes(a));
  const entries = await documents.collection<SuppressionEntry>(COLLECTIONS.suppressions).find({
    where: { _id: { in: [...visible, ...hidden].map((a) => `${workspaceId}:${a}`) } },
  });
  const reasonOf = new Map(entries.map((e) => [e.address, e.reason]));
  return [
    ...visible.filter((a) => reasonOf.has(a)).map((a) => ({ address: a, reason: reasonOf.get(a)! })),
    ...hidden.filter((a) => reasonOf.has(a)).map((a) => ({ address: 'a BCC recipient', reason: reasonOf.get(a)! })),
  ];
}

function admittedMessage(emailId: string, sender: Sender, request: SendRequest, prepared: PreparedSend, fingerprint: string, content: AdmittedMessage['content'], now: Date): AdmittedMessage {
  const { send, template } = prepared;
  return {
    emailId,
    projectId: sender.projectId,
    workspaceId: sender.workspaceId,
    apiKeyId: sender.keyId,
    testMode: sender.environment === 'development',
    fingerprint,
    idempotencyKey: request.idempotencyKey,
    from: send.from.mailbox,
    fromAddress: send.from.normalized,
    fromDomain: send.from.domain,
    to: send.to.map((m) => m.mailbox),
    toAddresses: send.to.map((m) => m.normalized),
    cc: send.cc.map((m) => m.mailbox),
    ccAddresses: send.cc.map((m) => m.normalized),
    bccCount: send.bcc.length,
    replyTo: send.replyTo?.mailbox ?? null,
    subject: send.subject,
    headers: send.headers,
    tags: send.tags,
    metadata: send.metadata,
    template,
    recipientCount: send.to.length + send.cc.length + send.bcc.length,
    content,
    occurredAt: now.toISOString(),
  };
}

/**
 * Admits one send request. Its writes (rate slots, content key, charge, email) wait for
 * durability together, once, before it answers (infra/ports/durability.ts): a 202, or a
 * refusal that rests on a write, is never given for writes a power loss could undo.
 */
export function admitEmail(deps: AdmissionDeps, sender: Sender, request: SendRequest): Promise<Admission> {
  return deferDurability(() => admit(deps, sender, request));
}

/** The content an admission's rules are decided with: nothing is sealed before they passed. */
const notSealed = (emailId: string): AdmittedMessage['content'] => ({ keyId: emailId, alg: 'A256GCM', iv: '', data: '', tag: '' });

/** What step 1 finds: the email id, its stream as loaded, and this body's fingerprint against it. */
interface Lookup {
  emailId: string;
  loaded: Loaded<EmailState>;
  fingerprint: string;
}

/** Step 1's read: the stream the request's Idempotency-Key names (a fresh random id has none to read). */
async function lookUp(deps: AdmissionDeps, sender: Sender, request: Pick<SendRequestBase, 'body' | 'idempotencyKey'>): Promise<Lookup> {
  const emailId = emailIdFor(sender.projectId, request.idempotencyKey, deps.now().getTime());
  const loaded: Loaded<EmailState> = request.idempotencyKey === null
    ? { state: initialEmailState, revision: -1 }
    : await deps.emails.load(emailId);
  return { emailId, loaded, fingerprint: fingerprintFor(deps.secrets, request.body, loaded.state.fingerprint) };
}

/** A replay's answer: its original result, with the rate slot it takes (2: replays count) and keeps. */
async function replayed(deps: AdmissionDeps, sender: Sender, replay: AdmissionResult): Promise<Admission> {
  const rate = await deps.rateLimits.reserve(sender, deps.now());
  rate.keep();
  return { ...replay, rate, replayed: true };
}

/**
 * The replay of a send whose body today's rules refuse (the HTTP layer's validation, before
 * admission): a request an older version of Relay admitted under this Idempotency-Key, with this
 * very body, is answered as any replay is (rule 1: whatever changed since, the rules included);
 * null when it is none (no email under the key, another body, or one this version cannot read),
 * and the refusal stands. Only a refused request with a key pays for this read.
 */
export function replayOfRefused(deps: AdmissionDeps, sender: Sender, request: { body: unknown; idempotencyKey: string }): Promise<Admission | null> {
  return deferDurability(async () => {
    const { loaded, fingerprint } = await lookUp(deps, sender, request);
    if (loaded.state.admission === null) return null;
    let replay: AdmissionResult | null;
    try {
      replay = replayOf(loaded.state, fingerprint);
    } catch (error) {
      // Another body under the key (409): this one is still the refused request it was.
      if (error instanceof RelayError) return null;
      throw error;
    }
    return replay ? replayed(deps, sender, replay) : null;
  });
}

async function admit(deps: AdmissionDeps, sender: Sender, request: SendRequest): Promise<Admission> {
  const { emails } = deps;

  // 1. Replay, or conflict (409, not counted: it is a rejection), or an email stored by a
  // version this one cannot read (503: never a second admission after it).
  const { emailId, loaded, fingerprint } = await lookUp(deps, sender, request);
  const replay = replayOf(loaded.state, fingerprint);

  // 2. Rate limit.
  if (replay) return replayed(deps, sender, replay);
  const rate = await deps.rateLimits.reserve(sender, deps.now());

  let held: HeldContentKey | null = null;
  let appending = false;
  try {
    const prepared = 'prepare' in request ? await request.prepare() : { send: request.send, template: request.template ?? null };
    const { send } = prepared;

    const development = sender.environment === 'development';
    const recipientDomains = development ? [...send.to, ...send.cc, ...send.bcc].map((m) => m.domain) : [];
    // 3 to 5, decided before anything is written for the email: a refusal leaves nothing
    // behind. On the stream as loaded (no email on it: else this was a replay) the decision is
    // one event; the append below decides again, on the same state, with the sealed body.
    const decideNow = async () => {
      const domains = await domainFacts(deps.documents, sender.workspaceId, sender.projectId, [send.from.domain, ...recipientDomains]);
      const suppressed = await suppressedAmong(deps.documents, sender.workspaceId, send);
      const now = deps.now();
      const commandFor = (message: AdmittedMessage): AdmitEmail => ({
        type: 'AdmitEmail',
        message,
        senderDomain: domains.get(send.from.domain)!,
        recipientDomains: [...new Set(recipientDomains)].map((d) => domains.get(d)!),
        suppressedRecipients: suppressed,
      });
      const unsealed = admittedMessage(emailId, sender, request, prepared, fingerprint, notSealed(emailId), now);
      const [decided] = decideAdmission(commandFor(unsealed), loaded.state);
      return { now, commandFor, unsealed, decided };
    };
    let decision = await decideNow();
    // An email whose event the log could never carry is refused here, before anything is
    // written for it (./event-size.ts); its bodies are serialized once, for the seal below.
    const plaintext = contentPlaintext({ html: send.html, text: send.text, bcc: send.bcc.map((m) => m.mailbox) });
    checkEmailEventSize(decision.decided.data, plaintext.length);
    // What the quota (6) is asked, before a wait and after it.
    const chargeOf = ({ now, unsealed }: typeof decision): RecipientCharge => ({
      workspaceId: sender.workspaceId,
      emailId,
      fingerprint,
      apiKeyId: sender.keyId,
      developmentKey: development,
      recipients: unsealed.recipientCount,
      allowances: sender.allowances,
      at: now,
      origin: request.origin,
      idempotent: request.idempotencyKey !== null,
    });
    // Only a send that will be stored waits for the pipeline: a refusal is answered at once, its
    // rate slot given back (another API process cannot tell an undecided slot from a kept one);
    // so is one the quota refuses whatever happens meanwhile (asked only of a send about to wait).
    // One that waited is decided again on what holds when it goes ahead (an address suppressed or
    // a domain disconnected meanwhile), with that time as its admission time.
    const flowed = await deps.flow?.pass(() => {
      const refusal = decision.decided.type === 'EmailAccepted' ? deps.usage.certainRefusal(chargeOf(decision)) : undefined;
      if (refusal) throw refusal;
    });
    if (flowed !== undefined && flowed !== 'admitted') {
      decision = await decideNow();
      checkEmailEventSize(decision.decided.data, plaintext.length);
    }
    const { now, commandFor, unsealed, decided } = decision;

    // 6. Quota: only an email that will be queued is charged. The content key is stored (or
    // taken over from an attempt that got no email in: ./content-vault.ts) meanwhile, expiring
    // seven days after `now`, the email's admission time.
    const charged = decided.type === 'EmailAccepted' ? deps.usage.charge(chargeOf(decision)) : Promise.resolve();
    const [charge, key] = await Promise.allSettled([charged, takeContentKey(deps.documents, deps.secrets, emailId, now)]);
    if (key.status === 'fulfilled') held = key.value;
    if (charge.status === 'rejected') throw charge.reason;
    if (key.status === 'rejected') throw key.reason;

    const content = sealPlaintext(held!.key, plaintext);
    // 7. A concurrent request with the same key that got in first makes this one its replay
    // (or a conflict): deciding again on the winner's stream says which.
    appending = true;
    const handled = await emails.handle(emailId, commandFor({ ...unsealed, content }), { origin: request.origin, loaded });
    rate.keep();
    return { ...handled.state.admission!, rate, replayed: handled.events.length === 0 };
  } catch (error) {
    await rate.release().catch(() => {});
    // Refused after its key was stored but before its append (the quota): the request takes back
    // a key it made, unless another attempt took it over since (giveBackContentKey). Refused at
    // the append, it lost to a concurrent attempt whose email is now on the stream and may be
    // sealed with this very key: the key is that email's. A store error says nothing of whether
    // the email got in: its key stays (it expires, or a retry takes it over).
    if (held && !appending && error instanceof RelayError) await giveBackContentKey(deps.documents, held).catch(() => {});
    throw error;
  }
}
