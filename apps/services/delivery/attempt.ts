// Carries out one step of an email's delivery, as the delivery decider rules it:
//   attempt:  claim (only the instance whose claim is appended goes on) → open the body →
//             sign → one SMTP transaction per recipient, each with its own VERP return path,
//             each begun only once its start is appended and durable (the transport holds a
//             connection by then) → record what each recipient's transaction came to;
//   takeover: the same, for a claim whose sender never began a transaction (it stopped, or is
//             stuck before the wire): the new claim replaces it, and the old holder's
//             transaction start is refused, so it sends nothing;
//   recover:  a claim still open past its grace after a transaction began means its sender
//             stopped mid-transaction. A transport that knows what became of those transactions
//             (MailTransport.settle: the outbox) is asked, if the claim sent with that very
//             transport (its name and instance: the outbox directory written to), and its
//             answer is recorded as the attempt's outcome (sent, or retried when nothing went
//             out); the recipients it cannot tell about become delivery_unknown and are never
//             sent again; the others are sent by the next attempt.
// The window between a transaction's start and the attempt's outcome is the one place where a
// crash leaves the fate of a message unknown; it holds at most the transactions in flight.
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { verpAddress, VERP_MAC_PURPOSE } from '../../../domain/delivery/verp.ts';
import { answersForClaim, claimDeadline, settledResults, type DeliveryPolicy, type FailDelivery, type RecipientResultReport, type Settlement, type SettledTransaction } from '../../../domain/email/delivery.ts';
import type { AdmittedMessage, DeliveryAttempted, DeliveryFailed, EmailContent } from '../../../domain/email/events.ts';
import { pendingRecipients, type EmailState } from '../../../domain/email/state.ts';
import type { CommandOrigin } from '../../../domain/events/metadata.ts';
import type { SendingDomain } from '../../../domain/management.ts';
import { parseMailbox } from '../../../domain/mailbox.ts';
import { cutText } from '../../../domain/text.ts';
import { composeMessage, newMessageId, type ComposedMessage, type ComposeInput } from '../../../infra/mail/compose.ts';
import { ComposeThreadLostError } from '../../../infra/mail/compose-pool.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import { deferDurability, durableSoFar } from '../../../infra/ports/durability.ts';
import type { EventStore } from '../../../infra/ports/event-store.ts';
import type { MailTransport, RecipientOutcome } from '../../../infra/ports/mail-transport.ts';
import type { SecretBox } from '../../../infra/secrets/secret-box.ts';
import { maskAddresses } from '../../../domain/addresses-in-text.ts';
import { openContent } from '../content-vault.ts';
import { dkimPrivateKeyOf } from '../dkim-key-vault.ts';
import type { Handled, Loaded } from '../command-handler.ts';
import type { Emails } from '../email-stream.ts';
import { findDomainByName } from '../management/domains.ts';
import { reusedReads } from '../management/reused-reads.ts';
import type { SendRateGate } from '../send-rate.ts';
import { syncWorkItem, type WorkItem } from './work-items.ts';
import { mapLimited } from '../map-limited.ts';

export interface DeliveryDeps {
  events: EventStore;
  documents: DocumentStore;
  secrets: SecretBox;
  transport: MailTransport;
  sendRate: SendRateGate;
  /** The email streams (services.emails): claims and outcomes are decided through them. */
  emails: Emails;
  /** The times of delivery (services.policies.delivery): when a claim left open is recovered. */
  policy: DeliveryPolicy;
  now: () => Date;
  /** Transactions of one email run at the same time, at most. */
  parallelTransactions?: number;
  /** composeMessage, wherever it runs (Services.compose: worker threads); unset = on this thread. */
  compose?: (input: ComposeInput) => Promise<ComposedMessage>;
  /** Told of every outcome this instance appends (logs and metrics: apps/services/delivery/outcome-report.ts). */
  observe?: DeliveryObserver;
}

/**
 * What the sender reports of the outcomes it appends (each once: only the appending instance
 * is told). `domainOf`: a recipient's domain by index (BCC ones included, when known).
 */
export interface DeliveryObserver {
  attempted(message: AdmittedMessage, outcome: DeliveryAttempted['data'], reports: readonly RecipientResultReport[], domainOf: (index: number) => string | null): void;
  failed(message: AdmittedMessage, failure: DeliveryFailed['data'], transport: string): void;
}

/** Names this process in its claims, so a claim can be told apart from another instance's. */
export const SENDER_INSTANCE = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

/** Whom one attempt goes to: each distinct address once, under the index it first appears at. */
interface Target {
  index: number;
  address: string;
  /** Other indexes with the same address (listed twice, or in To and BCC): they share its outcome. */
  alsoIndexes: number[];
}

function targetsOf(message: AdmittedMessage, bcc: string[], pending: number[]): Target[] {
  const addresses = [...message.toAddresses, ...message.ccAddresses, ...bcc.map((m) => {
    const parsed = parseMailbox(m);
    return parsed.ok ? parsed.value.normalized : m.toLowerCase();
  })];
  const byAddress = new Map<string, Target>();
  for (const index of pending) {
    const address = addresses[index];
    if (address === undefined) continue;
    const known = byAddress.get(address);
    if (known) known.alsoIndexes.push(index);
    else byAddress.set(address, { index, address, alsoIndexes: [] });
  }
  return [...byAddress.values()];
}

/**
 * What the transport said for `target`, for each of its indexes. Servers quote the address in
 * their replies (Postfix: "550 5.1.1 <bcc@…>: Recipient address rejected"), and a BCC recipient's
 * address is in no event: for an index past To and CC (`visible`), every address in the reply is
 * masked ("<address>"), its codes and words kept. Masked before it is cut, so no cut leaves part
 * of an address behind.
 */
function report(target: Target, outcome: RecipientOutcome | undefined, providerMessageId: string | null, visible: number): RecipientResultReport[] {
  const accepted = outcome?.result === 'accepted' || outcome?.result === 'delivered';
  const base = outcome
    ? {
      result: outcome.result, smtpCode: outcome.smtpCode, enhancedCode: outcome.enhancedCode, response: outcome.response,
      ...(outcome.stage ? { stage: outcome.stage } : {}), ...(accepted && providerMessageId ? { providerMessageId: cutText(providerMessageId, 200) } : {}) }
    : { result: 'deferred' as const, smtpCode: null, enhancedCode: null, response: 'the transport reported nothing for this recipient' };
  return [target.index, ...target.alsoIndexes].map((index) => ({
    index, ...base, response: cutText(index < visible ? base.response : maskAddresses(base.response), 1000),
  }));
}

/** The exact bytes: headers as admitted, bodies as rendered at admission, DKIM-signed with the domain's key. */
function compose(deps: DeliveryDeps, message: AdmittedMessage, content: EmailContent, domain: SendingDomain, messageId: string) {
  return (deps.compose ?? composeMessage)({
    from: message.from,
    to: message.to,
    cc: message.cc,
    replyTo: message.replyTo,
    subject: message.subject,
    html: content.html,
    text: content.text,
    headers: message.headers,
    messageId,
    // The admission time: every attempt sends the same message.
    date: new Date(message.occurredAt),
    dkim: { domainName: domain.name, keySelector: domain.dkimSelector, privateKey: dkimPrivateKeyOf(domain, deps.secrets) },
  });
}

export type StepResult = 'sent' | 'recovered' | 'nothing_to_do';

/**
 * Runs a work item's step. Never sends twice for one claim; never throws for a delivery outcome.
 * A step's writes wait for durability together (infra/ports/durability.ts), except the claim,
 * which is durable before any SMTP transaction starts.
 */
export function runDeliveryStep(deps: DeliveryDeps, item: WorkItem): Promise<StepResult> {
  return deferDurability(() => item.step === 'recover' ? recover(deps, item) : attempt(deps, item));
}

async function recover(deps: DeliveryDeps, item: WorkItem): Promise<StepResult> {
  const loaded = await deps.emails.load(item._id);
  const settled = await settle(deps, item, loaded.state);
  const command: FailDelivery = {
    type: 'FailDelivery',
    attempt: item.attempt,
    claimedBy: null,
    failureCode: 'delivery_unknown',
    reason: 'the sender stopped during the SMTP transaction; the message may have been accepted, so it is not sent again',
    at: deps.now().toISOString(),
    ...(settled ? { settled } : {}),
  };
  const handled = await deps.emails.handle(item._id, command, { origin: item.origin, loaded });
  await syncWorkItem(deps.documents, deps.events, item._id, item.origin, deps.policy, handled);
  const [recovered] = handled.events;
  if (recovered?.type === 'DeliveryAttempted' && settled && handled.state.message) {
    // The state the decision was made on: the one just before the outcome.
    const before = await deps.emails.load(item._id, { upTo: handled.revision - 1 });
    const message = handled.state.message;
    const addresses = [...message.toAddresses, ...message.ccAddresses];
    deps.observe?.attempted(message, recovered.data, settledResults(settled, command.reason, before.state), (index) => {
      const address = addresses[index];
      return address === undefined ? null : address.slice(address.lastIndexOf('@') + 1);
    });
  } else {
    reportFailure(deps, handled);
  }
  return handled.events.length > 0 ? 'recovered' : 'nothing_to_do';
}

/**
 * What the transport knows became of the open claim's begun transactions, when it can tell
 * (MailTransport.settle) and the claim sent with it: its name and its instance (another
 * transport's transactions, say a claim made before a restart with another RELAY_DELIVERY, are
 * none of its knowledge, nor are another outbox directory's: another host's, or this one's
 * before a restart with another RELAY_DATA_DIR; a claim that names no instance has no transport
 * that may answer); only once the claim's grace is over, when the decider may recover it.
 * Undefined: it cannot tell.
 */
async function settle(deps: DeliveryDeps, item: WorkItem, state: EmailState): Promise<Settlement | undefined> {
  const { transport } = deps;
  const claim = state.delivery.openClaim;
  const message = state.message;
  if (!transport.settle || !claim || !message || claim.attempt !== item.attempt) return undefined;
  const transportInstance = transport.instance;
  if (transportInstance === undefined || !answersForClaim({ transport: transport.name, transportInstance }, claim)) return undefined;
  const deadline = claimDeadline(state, deps.policy);
  if (deadline?.kind !== 'unknown' || deadline.at > deps.now().toISOString()) return undefined;
  const begun = pendingRecipients(state.delivery).filter((index) => claim.begun.includes(index));
  const visible = message.toAddresses.length + message.ccAddresses.length;
  // BCC addresses are only in the sealed content: without it (expired), those are not asked about.
  const content = begun.some((index) => index >= visible) ? await openContent(deps.documents, deps.secrets, message.content, deps.now()) : null;
  const targets = targetsOf(message, content?.bcc ?? [], begun);
  const messageId = newMessageId(message.emailId, message.fromDomain);
  const answers = await transport.settle({ emailId: message.emailId, messageId, recipients: targets.map((t) => t.address) });
  const recipients: SettledTransaction[] = targets.flatMap((target) => {
    const answer = answers.find((a) => a.address.toLowerCase() === target.address.toLowerCase());
    if (!answer) return [];
    return [target.index, ...target.alsoIndexes].map((index) => ({
      index,
      result: answer.result,
      // As report() words a send's answer: a BCC recipient's addresses masked, the text bounded.
      response: cutText(index < visible ? answer.response : maskAddresses(answer.response), 1000),
      ...(answer.result === 'accepted' && answer.providerMessageId ? { providerMessageId: cutText(answer.providerMessageId, 200) } : {}),
    }));
  });
  return { transport: transport.name, transportInstance, messageId, recipients };
}

function reportFailure(deps: DeliveryDeps, handled: Handled<EmailState, unknown>): void {
  const [failed] = handled.events as DeliveryFailed[];
  if (failed && handled.state.message) deps.observe?.failed(handled.state.message, failed.data, deps.transport.name);
}

async function attempt(deps: DeliveryDeps, item: WorkItem): Promise<StepResult> {
  const { emails } = deps;
  const loaded = await emails.load(item._id);
  const message = loaded.state.message;
  const pending = pendingRecipients(loaded.state.delivery);
  if (!message || pending.length === 0) {
    await syncWorkItem(deps.documents, deps.events, item._id, item.origin, deps.policy, loaded);
    return 'nothing_to_do';
  }
  // Provider rate first: the claim → outcome window (where a crash makes delivery_unknown)
  // should hold only the SMTP transactions.
  for (let i = 0; i < pending.length; i++) await deps.sendRate.acquire();

  const claim = await emails.handle(item._id, {
    type: 'ClaimDelivery', attempt: item.attempt, claimedBy: SENDER_INSTANCE, transport: deps.transport.name,
    ...(deps.transport.instance !== undefined ? { transportInstance: deps.transport.instance } : {}), at: deps.now().toISOString(),
  }, { origin: item.origin, loaded });
  if (claim.events.length === 0) {
    // Another instance claimed it, or the item was stale: the stream says what is due now.
    await syncWorkItem(deps.documents, deps.events, item._id, item.origin, deps.policy, claim);
    return 'nothing_to_do';
  }
  const after: CommandOrigin = { correlationId: item.origin.correlationId, causationId: claim.eventIds[0] };
  // The schedule says at once what becomes of the claim if this instance stops (taken over, or
  // recovered): a starting sender reads it to say what it inherits, and /metrics counts it.
  await syncWorkItem(deps.documents, deps.events, item._id, after, deps.policy, claim);
  const fail = async (failureCode: string, reason: string) => {
    const failed = await emails.handle(item._id, {
      type: 'FailDelivery', attempt: item.attempt, claimedBy: SENDER_INSTANCE, failureCode, reason, at: deps.now().toISOString(),
    }, { origin: after, loaded: claim });
    reportFailure(deps, failed);
    return failed;
  };

  const content = await openContent(deps.documents, deps.secrets, message.content, deps.now());
  if (!content) {
    await syncWorkItem(deps.documents, deps.events, item._id, after, deps.policy, await fail('content_expired', 'the message body was destroyed (retention) before it could be sent'));
    return 'sent';
  }
  // Reused for a moment (management/reused-reads.ts): every email of a burst signs with the same
  // domain. Its absence is never reused: it fails the email for good.
  const domain = await reusedReads<SendingDomain | null>(deps.documents, 'sending-domains').get(
    `${message.workspaceId}\n${message.fromDomain}`,
    () => findDomainByName(deps.documents, message.workspaceId, message.fromDomain),
    (found) => found !== null,
  );
  if (!domain) {
    await syncWorkItem(deps.documents, deps.events, item._id, after, deps.policy, await fail('sender_domain_unavailable', `the sending domain ${message.fromDomain} no longer exists, so there is no key to sign with`));
    return 'sent';
  }
  const messageId = newMessageId(message.emailId, message.fromDomain);
  let raw: Buffer;
  try {
    ({ raw } = await compose(deps, message, content, domain, messageId));
  } catch (error) {
    // A lost thread says nothing about the message: the handler fails and the event is retried.
    if (error instanceof ComposeThreadLostError) throw error;
    // Nothing went out: the attempt fails for good rather than waiting out the grace period.
    await syncWorkItem(deps.documents, deps.events, item._id, after, deps.policy, await fail('message_unbuildable', `the message could not be built and signed: ${(error as Error).message}`));
    return 'sent';
  }
  const mailFromDomain = `${domain.mailFromSubdomain}.${domain.name}`;
  const targets = targetsOf(message, content.bcc, pending);
  // Recipients from this index on are BCC ones.
  const visible = message.toAddresses.length + message.ccAddresses.length;
  // The stream as this instance last appended to it: each transaction start decides on it
  // (and reads what it missed when another start got in first).
  let latest: Loaded<EmailState> = claim;
  const begin = (target: Target) => async (): Promise<boolean> => {
    const started = await emails.handle(item._id, {
      type: 'StartTransaction', attempt: item.attempt, claimedBy: SENDER_INSTANCE, recipients: [target.index, ...target.alsoIndexes], at: deps.now().toISOString(),
    }, { origin: after, loaded: latest });
    if (started.revision > latest.revision) latest = started;
    // Refused: the claim was taken over (another sender has this attempt now), so nothing goes out.
    if (started.events.length === 0) return false;
    // A start lost to a crash would let the next sender take the claim over and send again.
    await durableSoFar();
    return true;
  };
  const reports = (await mapLimited(targets, deps.parallelTransactions ?? 5, async (target) => {
    const mailFrom = verpAddress({ emailId: message.emailId, recipientIndex: target.index, mailFromDomain }, (data) => deps.secrets.mac(VERP_MAC_PURPOSE, data));
    const outcome = await deps.transport.send({ emailId: message.emailId, envelope: { mailFrom, recipients: [target.address] }, raw, messageId }, { beginTransaction: begin(target), transactionGraceMs: deps.policy.claimGraceMs });
    return report(target, outcome.recipients.find((r) => r.address.toLowerCase() === target.address) ?? outcome.recipients[0], outcome.providerMessageId, visible);
  })).flat();
  // Every transaction's queue id is kept with its recipient; the email's one field shows the
  // first visible (To, CC) recipient's, never a BCC one's (apps/api/INTERFACE-DECISIONS.md).
  const providerMessageId = reports.find((r) => r.index < visible && r.providerMessageId)?.providerMessageId ?? null;

  const recorded = await emails.handle(item._id, {
    type: 'RecordAttempt',
    attempt: item.attempt,
    claimedBy: SENDER_INSTANCE,
    transport: deps.transport.name,
    messageId,
    providerMessageId,
    results: reports,
    at: deps.now().toISOString(),
  }, { origin: after, loaded: latest });
  await syncWorkItem(deps.documents, deps.events, item._id, after, deps.policy, recorded);
  const [outcome] = recorded.events as DeliveryAttempted[];
  // None: the claim was taken over before any transaction began, so nothing went out.
  if (!outcome) return 'nothing_to_do';
  const domains = new Map(targets.flatMap((t) => [t.index, ...t.alsoIndexes].map((index) => [index, t.address.slice(t.address.lastIndexOf('@') + 1)] as const)));
  deps.observe?.attempted(message, outcome.data, reports, (index) => domains.get(index) ?? null);
  return 'sent';
}
