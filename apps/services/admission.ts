// Admission of one send request: the command handler in front of the admission decider.
// It reads what the decision needs (domains, suppressions, the email's stream), decides,
// and appends with an expected revision, so that concurrent retries of one request
// (same Idempotency-Key) admit exactly one email without any lock.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { decideAdmission, foldEmail, initialEmailState, replayOf, type AdmissionResult, type AdmitEmail } from '../../domain/email/admission.ts';
import { emailStreamId, type AdmittedMessage } from '../../domain/email/events.ts';
import { allRecipientAddresses, type NormalizedSend } from '../../domain/email/send-request.ts';
import { RelayError } from '../../domain/errors.ts';
import type { Environment, SuppressionEntry } from '../../domain/management.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { WrongExpectedRevisionError, type EventStore } from '../../infra/ports/event-store.ts';
import { COLLECTIONS } from './collections.ts';
import { sealContent } from './content-vault.ts';
import { readEmailStream } from './email-stream.ts';
import { canonicalJson } from './canonical-json.ts';

export interface AdmissionDeps {
  events: EventStore;
  documents: DocumentStore;
  now: () => Date;
}

/** Who is sending: the API key's identity. */
export interface Sender {
  keyId: string;
  projectId: string;
  workspaceId: string;
  environment: Environment;
}

export interface SendRequest {
  /** The body as received: its canonical form is the idempotency fingerprint. */
  body: unknown;
  idempotencyKey: string | null;
  send: NormalizedSend;
  template?: AdmittedMessage['template'];
}

interface DomainRecord {
  _id: string;
  workspaceId: string;
  name: string;
  status: string;
  projectIds: string[];
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

async function verifiedDomainsOf(documents: DocumentStore, projectId: string): Promise<Set<string>> {
  const domains = await documents.collection<DomainRecord>(COLLECTIONS.domains).find({ where: { projectIds: { contains: projectId }, status: 'verified' } });
  return new Set(domains.map((d) => d.name));
}

async function suppressedAmong(documents: DocumentStore, workspaceId: string, addresses: string[]) {
  const entries = await documents.collection<SuppressionEntry>(COLLECTIONS.suppressions).find({
    where: { _id: { in: addresses.map((a) => `${workspaceId}:${a}`) } },
  });
  const byAddress = new Map(entries.map((e) => [e.address, e]));
  return addresses.filter((a) => byAddress.has(a)).map((a) => ({ address: a, reason: byAddress.get(a)!.reason }));
}

export async function admitEmail(deps: AdmissionDeps, sender: Sender, request: SendRequest): Promise<AdmissionResult> {
  const { send } = request;
  const fingerprint = fingerprintOf(request.body);
  const emailId = emailIdFor(sender.projectId, request.idempotencyKey);
  const streamId = emailStreamId(emailId);

  // A replay answers with the original result even after the email moved on, and before
  // any rule that may have changed since (domain removed, quota used up) is looked at.
  const existing = request.idempotencyKey === null ? initialEmailState : await loadState(deps.events, emailId);
  const replay = replayOf(existing, fingerprint);
  if (replay) return replay;

  const verified = await verifiedDomainsOf(deps.documents, sender.projectId);
  if (!verified.has(send.from.domain)) {
    throw new RelayError('domain_not_verified', `the sender domain ${send.from.domain} is not a verified domain of this project`);
  }
  const recipients = allRecipientAddresses(send);
  if (sender.environment === 'development') {
    const outside = [...send.to, ...send.cc, ...send.bcc].find((m) => !verified.has(m.domain));
    if (outside) {
      throw new RelayError('test_recipient_not_allowed', `development keys may only send to verified domains of the project; ${outside.domain} is not one`);
    }
  }
  const suppressed = await suppressedAmong(deps.documents, sender.workspaceId, recipients);

  const now = deps.now();
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
    template: request.template ?? null,
    recipientCount: send.to.length + send.cc.length + send.bcc.length,
    content,
    occurredAt: now.toISOString(),
  };
  const command: AdmitEmail = { type: 'AdmitEmail', message, suppressedRecipients: suppressed };
  const decided = decideAdmission(command, existing);
  try {
    await deps.events.append(
      streamId,
      decided.map((e) => ({ id: randomUUID(), type: e.type, data: e.data as unknown as Record<string, unknown> })),
      { expectedRevision: 'no_stream' },
    );
  } catch (error) {
    if (!(error instanceof WrongExpectedRevisionError)) throw error;
    // A concurrent request with the same key won: this one is its replay (or a conflict).
    const winner = await loadState(deps.events, emailId);
    const replayed = replayOf(winner, fingerprint);
    if (!replayed) throw error;
    return replayed;
  }
  return foldEmail(decided).admission!;
}
