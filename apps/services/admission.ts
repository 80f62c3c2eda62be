// Admission of one send request: the command handler in front of the admission decider.
// It reads what the decision needs (domains, suppressions, the email's stream), decides,
// and appends with an expected revision, so that concurrent retries of one request
// (same Idempotency-Key) admit exactly one email without any lock.
//
// Order of the checks, after the HTTP layer authenticated the key (401/403), refused an
// oversized body (413) and validated it (400):
//   1. idempotent replay: a request seen before gets its original answer, whatever changed
//      since (domain removed, quota used up, block lifted), so a client's retry is safe;
//   2. rate limit: a slot is taken before any rule is looked at, so that a burst cannot get
//      past the limit while its first requests are still being checked; replays take one too
//      (spec: replays count), and every later rejection gives it back (rejections do not);
//   3. sender domain, 4. development recipients: the request's own validity for this key;
//   5. suppressions: a valid request to a blocked recipient is stored as suppressed, which is
//      an answer, not a rejection, so it keeps its rate slot and is never charged;
//   6. quota: charged last, once nothing else can refuse the email, and before the email's
//      event is appended (see below);
//   7. append EmailAccepted / EmailSuppressed to the email's own stream.
//
// The charge and the email are two appends to two streams, never one transaction. A crash
// (or a lost store connection) between them leaves a charge without an email: the allowance
// is then over-charged by that email, never exceeded. A retry of the same request finds its
// charge already made (charges are keyed by email id and request fingerprint).
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { decideAdmission, foldEmail, initialEmailState, replayOf, type AdmissionResult, type AdmitEmail } from '../../domain/email/admission.ts';
import { emailStreamId, type AdmittedMessage, type SuppressedRecipient, type TemplateReference } from '../../domain/email/events.ts';
import type { NormalizedSend } from '../../domain/email/send-request.ts';
import { RelayError } from '../../domain/errors.ts';
import type { Environment, SendingDomain, SuppressionEntry } from '../../domain/management.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { WrongExpectedRevisionError, type EventStore } from '../../infra/ports/event-store.ts';
import { COLLECTIONS } from './collections.ts';
import { sealContent } from './content-vault.ts';
import { readEmailStream } from './email-stream.ts';
import { canonicalJson } from './canonical-json.ts';
import type { RateLimiter, RateReservation } from './rate-limits.ts';
import type { UsageLedger } from './usage-ledger.ts';

export interface AdmissionDeps {
  events: EventStore;
  documents: DocumentStore;
  rateLimits: RateLimiter;
  usage: UsageLedger;
  now: () => Date;
}

/** Who is sending: the API key's identity. */
export interface Sender {
  keyId: string;
  projectId: string;
  workspaceId: string;
  environment: Environment;
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

export const fingerprintOf = (body: unknown): string => createHash('sha256').update(canonicalJson(body)).digest('hex');

/**
 * With an Idempotency-Key the email id is derived from (project, key), so every retry
 * targets the same stream and the event store's expected-revision check picks one winner.
 */
export function emailIdFor(projectId: string, idempotencyKey: string | null): string {
  const raw = idempotencyKey === null
    ? randomBytes(15)
    : createHash('sha256').update(`${projectId}\n${idempotencyKey}`).digest().subarray(0, 15);
  return `em_${raw.toString('base64url')}`;
}

async function loadState(events: EventStore, emailId: string) {
  return foldEmail(await readEmailStream(events, emailId));
}

/**
 * The workspace's domains with these names (the unique (workspaceId, name) index answers it);
 * a project may use those that are verified and connected to it.
 */
async function domainsNamed(documents: DocumentStore, workspaceId: string, names: string[]): Promise<Map<string, SendingDomain>> {
  const found = await documents.collection<SendingDomain>(COLLECTIONS.domains).find({ where: { workspaceId, name: { in: [...new Set(names)] } } });
  return new Map(found.map((d) => [d.name, d]));
}

const usableBy = (domain: SendingDomain | undefined, projectId: string): boolean =>
  domain !== undefined && domain.status === 'verified' && domain.projectIds.includes(projectId);

/** 422 for a sender outside the project's verified domains, saying which case it is. */
function senderRefusal(domain: SendingDomain | undefined, name: string): RelayError {
  if (domain && domain.status === 'verified') {
    return new RelayError('sender_not_allowed', `the sender domain ${name} is verified but not connected to this project`);
  }
  return new RelayError('domain_not_verified', `the sender domain ${name} is not a verified domain of this project (subdomains need their own verification)`);
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

export async function admitEmail(deps: AdmissionDeps, sender: Sender, request: SendRequest): Promise<Admission> {
  const fingerprint = fingerprintOf(request.body);
  const emailId = emailIdFor(sender.projectId, request.idempotencyKey);

  // 1. Replay, or conflict (409, not counted: it is a rejection).
  const existing = request.idempotencyKey === null ? initialEmailState : await loadState(deps.events, emailId);
  const replay = replayOf(existing, fingerprint);

  // 2. Rate limit.
  const rate = await deps.rateLimits.reserve(sender, deps.now());
  if (replay) return { ...replay, rate, replayed: true };

  try {
    const { send, template } = 'prepare' in request ? await request.prepare() : { send: request.send, template: request.template ?? null };

    // 3, 4. Sender domain and development recipients: exact domain names, never their parents.
    const development = sender.environment === 'development';
    const recipientDomains = development ? [...send.to, ...send.cc, ...send.bcc].map((m) => m.domain) : [];
    const domains = await domainsNamed(deps.documents, sender.workspaceId, [send.from.domain, ...recipientDomains]);
    if (!usableBy(domains.get(send.from.domain), sender.projectId)) throw senderRefusal(domains.get(send.from.domain), send.from.domain);
    const outside = recipientDomains.find((d) => !usableBy(domains.get(d), sender.projectId));
    if (outside) {
      throw new RelayError(
        'test_recipient_not_allowed',
        `development keys send only to verified domains connected to the project; ${outside} is not one, so nothing was sent`,
      );
    }

    // 5. Suppressions.
    const suppressed = await suppressedAmong(deps.documents, sender.workspaceId, send);

    const now = deps.now();
    const recipientCount = send.to.length + send.cc.length + send.bcc.length;
    // 6. Quota: only an email that will be queued is charged.
    if (suppressed.length === 0) {
      await deps.usage.charge({
        workspaceId: sender.workspaceId,
        emailId,
        fingerprint,
        apiKeyId: sender.keyId,
        developmentKey: sender.environment === 'development',
        recipients: recipientCount,
        at: now,
      });
    }

    // 7. Append.
    const content = await sealContent(deps.documents, emailId, { html: send.html, text: send.text, bcc: send.bcc.map((m) => m.mailbox) }, now);
    const message: AdmittedMessage = {
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
      recipientCount,
      content,
      occurredAt: now.toISOString(),
    };
    const command: AdmitEmail = { type: 'AdmitEmail', message, suppressedRecipients: suppressed };
    const decided = decideAdmission(command, existing);
    try {
      await deps.events.append(
        emailStreamId(emailId),
        decided.map((e) => ({ id: randomUUID(), type: e.type, data: e.data as unknown as Record<string, unknown> })),
        { expectedRevision: 'no_stream' },
      );
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
      // A concurrent request with the same key won: this one is its replay (or a conflict).
      const winner = replayOf(await loadState(deps.events, emailId), fingerprint);
      if (!winner) throw error;
      return { ...winner, rate, replayed: true };
    }
    return { ...foldEmail(decided).admission!, rate, replayed: false };
  } catch (error) {
    await rate.release().catch(() => {});
    throw error;
  }
}
