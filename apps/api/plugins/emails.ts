// POST /v1/emails, GET /v1/emails, GET /v1/emails/{id}: bearer-key authenticated.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';
import { isReservedHeader, normalizeSendRequest, type SendRequestBody } from '../../../domain/email/send-request.ts';
import { RelayError } from '../../../domain/errors.ts';
import { originOfRequest } from '../../../domain/events/metadata.ts';
import { rateLimitHeaders, type RateStanding } from '../../../domain/rate-limits.ts';
import type { EmailView } from '../../../projections/email-view.ts';
import { admitEmail, replayOfRefused, type Admission, type AdmissionDeps, type PreparedSend, type Sender } from '../../services/admission.ts';
import { getEmail, listEmails, type ListedEmail, type ReadScope } from '../../services/email-reads.ts';
import { checkTemplateSend, renderTemplateSend } from '../../services/templates/template-send.ts';
import { authenticateApiKey, requirePermission, type ApiKeyPrincipal } from '../auth/bearer.ts';
import type { ApiContext } from '../context.ts';
import { checkRequestTarget } from '../connection-limits.ts';
import { errorAnswerOf } from '../error-registry.ts';
import { Type } from '@sinclair/typebox';
import { EmailDetail, EmailList, SendResult } from './email-responses.schemas.ts';
import { DocumentedListEmailsQuery, DocumentedSendEmailBody, IDEMPOTENCY_KEY, IdParam, ListEmailsQuery, SEND_BODY_BOUNDS, SendEmailBody } from './emails.schemas.ts';
import { NoQuery } from './query.schemas.ts';
import { DocumentedTemplateSendBody, TemplateSendBody } from './template-send.schemas.ts';

const sendEmailChecker = TypeCompiler.Compile(SendEmailBody);
const templateSendChecker = TypeCompiler.Compile(TemplateSendBody);

type PrepareSend = () => Promise<PreparedSend>;

/** "/to/3" → "to[3]"; "/headers/X-Foo" → "headers.X-Foo" (JSON pointer escapes undone). */
const fieldOf = (path: string) =>
  path
    .split('/')
    .filter(Boolean)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((a, s) => (/^\d+$/.test(s) ? `${a}[${s}]` : a ? `${a}.${s}` : s), '');

/** One sentence naming the field, from the first schema error. */
function describe(error: ValueError): string {
  const field = fieldOf(error.path);
  const where = field ? `body.${field}` : 'body';
  if (error.type === ValueErrorType.ObjectRequiredProperty) return `${where}: is required`;
  if (error.type === ValueErrorType.ObjectAdditionalProperties) {
    // A header or tag whose name is refused: say why (an empty name keeps its empty segment).
    const [parent, ...rest] = error.path.split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const name = rest.join('/');
    if (rest.length > 0 && parent === 'headers') {
      if (name === '') return 'body.headers: header names must not be empty';
      return isReservedHeader(name) ? `body.headers.${name}: is a reserved header name` : `body.headers.${name}: header names may only hold letters, digits and hyphens`;
    }
    if (rest.length > 0 && parent === 'tags') {
      if (name === '') return 'body.tags: tag names must not be empty';
      if (name.startsWith('rr_')) return `body.tags.${name}: tag names must not begin with rr_`;
      return `body.tags.${name}: tag names are 1 to 128 letters, digits, _ and -`;
    }
    return `${where}: is not an allowed property`;
  }
  const message = (error.schema as { errorMessage?: string }).errorMessage ?? error.message;
  return `${where}: ${message}`;
}

/** A direct send (SendEmail): checked in full now, so a malformed request is a 400 before anything else. */
function directSend(body: Record<string, unknown>): PrepareSend {
  if (!sendEmailChecker.Check(body)) {
    throw new RelayError('validation_error', describe(sendEmailChecker.Errors(body).First()!));
  }
  const send = normalizeSendRequest(body as unknown as SendRequestBody);
  return async () => ({ send, template: null });
}

/**
 * A template send (TemplateSend: a body holding `template`): the body is checked now (400, or
 * 422 for variables that break the rules); the slug is resolved in the key's project (404) and
 * rendered (422) only once admission is past the replay and rate-limit checks, so a replay
 * answers with the original result even after the template was edited or deleted.
 */
function templateSend(ctx: ApiContext, principal: Pick<ApiKeyPrincipal, 'projectId'>, body: Record<string, unknown>): PrepareSend {
  if (!templateSendChecker.Check(body)) {
    throw new RelayError('validation_error', describe(templateSendChecker.Errors(body).First()!));
  }
  const checked = checkTemplateSend(body);
  return () => renderTemplateSend(ctx.documents, ctx.services.templates, principal.projectId, checked);
}

/**
 * The send's body checked (400; 422 for a template's variables), or, when the checks refuse a body
 * sent with an Idempotency-Key, the replay of the email admitted under that key with this very
 * body (by an older version, before the rules grew stricter): admission's rule 1 gives a replay
 * its original answer whatever changed since (apps/services/admission.ts, replayOfRefused). Only
 * a refused request with a key pays for that read; any other refusal stands.
 */
async function checkedOrReplayed(
  ctx: ApiContext, deps: AdmissionDeps, principal: ApiKeyPrincipal, sender: Sender, body: Record<string, unknown>, idempotencyKey: string | null,
): Promise<{ prepare: PrepareSend } | { replay: Admission }> {
  try {
    return { prepare: 'template' in body ? templateSend(ctx, principal, body) : directSend(body) };
  } catch (refusal) {
    if (idempotencyKey === null || !(refusal instanceof RelayError)) throw refusal;
    const replay = await replayOfRefused(deps, sender, { body, idempotencyKey });
    if (replay === null) throw refusal;
    return { replay };
  }
}

function idempotencyKeyOf(request: FastifyRequest): string | null {
  // Read from the field lines as sent: Node joins repeated fields of a name it has no rule for
  // into one value, and "a, b" would pass for a key that neither field names.
  const raw = request.raw.rawHeaders;
  const keys: string[] = [];
  for (let i = 0; i < raw.length; i += 2) if (raw[i].toLowerCase() === 'idempotency-key') keys.push(raw[i + 1]);
  if (keys.length === 0) return null;
  if (keys.length > 1) throw new RelayError('validation_error', 'header Idempotency-Key: must be given once');
  if (!IDEMPOTENCY_KEY.test(keys[0])) {
    throw new RelayError('validation_error', 'header Idempotency-Key: must be 1 to 128 printable ASCII characters');
  }
  return keys[0];
}

function readScopeOf(principal: ApiKeyPrincipal): ReadScope {
  if (principal.permissions.includes('email:read')) return { projectId: principal.projectId, apiKeyId: null };
  requirePermission(principal, 'email:send');
  return { projectId: principal.projectId, apiKeyId: principal.keyId };
}

/** EmailSummary (spec), also answered to dashboard sessions (apps/api/plugins/project-emails.ts). */
export function summaryOf(view: ListedEmail) {
  return {
    id: view._id,
    fromAddress: view.fromAddress,
    toAddresses: view.toAddresses,
    subject: view.subject,
    status: view.status,
    testMode: view.testMode,
    failureCode: view.failureCode,
    createdAt: view.createdAt,
    sentAt: view.sentAt,
  };
}

/** Spec: at most 100 webhook deliveries appear in EmailDetail. */
export const MAX_WEBHOOK_DELIVERIES_SHOWN = 100;

/** EmailDetail (spec), also answered to dashboard sessions. */
export function detailOf(view: EmailView) {
  return {
    id: view._id,
    fromAddress: view.fromAddress,
    subject: view.subject,
    status: view.status,
    testMode: view.testMode,
    failureCode: view.failureCode,
    createdAt: view.createdAt,
    sentAt: view.sentAt,
    deliveredAt: view.deliveredAt,
    to: view.to,
    cc: view.cc,
    reply_to: view.replyTo,
    providerMessageId: view.providerMessageId,
    recipients: view.recipients,
    webhookDeliveries: view.webhookDeliveries.slice(0, MAX_WEBHOOK_DELIVERIES_SHOWN),
    metadata: view.metadata,
    tags: view.tags,
    events: view.events,
  };
}

const setRateHeaders = (reply: FastifyReply, standings: RateStanding[]) => reply.headers(rateLimitHeaders(standings));

const admissionDepsOf = (ctx: ApiContext): AdmissionDeps => ({
  emails: ctx.services.emails,
  documents: ctx.documents,
  rateLimits: ctx.services.rateLimits,
  usage: ctx.services.usage,
  secrets: ctx.services.secrets,
  now: ctx.now,
  flow: ctx.admissionFlow,
});

/**
 * A template send made for a signed-in member ("send a test" in the dashboard, POST
 * /v1/templates/{id}/test): a TemplateSend body checked and admitted exactly as POST /v1/emails
 * would, its rate limits and monthly allowance those of a key whose id is the member's.
 */
export async function admitTemplateTest(ctx: ApiContext, sender: Sender, body: Record<string, unknown>, requestId: string): Promise<Admission> {
  const prepare = templateSend(ctx, sender, body);
  return admitEmail(admissionDepsOf(ctx), sender, { body, idempotencyKey: null, prepare, origin: originOfRequest(requestId) });
}

export async function emailRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  const deps = admissionDepsOf(ctx);

  // The key is checked as soon as the headers are in, before the body is read: an
  // unauthenticated caller can make the server neither buffer 10 MiB nor learn what a valid
  // request looks like.
  const principals = new WeakMap<FastifyRequest, ApiKeyPrincipal>();
  app.addHook('onRequest', async (request) => {
    principals.set(request, await authenticateApiKey(ctx, request.headers.authorization));
  });
  const principalOf = (request: FastifyRequest) => principals.get(request)!;

  // Every answer to a send is one admission result; refusals (a bad key included) by their code.
  const { admissions, admissionDurations } = ctx.metrics;
  app.post('/v1/emails', {
    schema: { querystring: NoQuery },
    // Every refusal the request line and headers decide alone comes before the body is read
    // (and before 100 Continue): the permission, then the query, then the Idempotency-Key, in
    // the order the handler would meet them, with the same answers.
    onRequest: async (request) => {
      requirePermission(principalOf(request), 'email:send');
      checkRequestTarget(request);
      idempotencyKeyOf(request);
    },
    onError: (_request, reply, error, done) => {
      admissions.rejected(errorAnswerOf(error).code).inc();
      admissionDurations.rejected.observe(reply.elapsedTime / 1000);
      done();
    },
    config: {
      // Checked while parsing (apps/api/body-parser.ts): refusing 400,000 keys must not cost building them first.
      jsonBounds: SEND_BODY_BOUNDS,
      openapi: {
        summary: 'Send an email (SendEmail) or a template (TemplateSend: a body with `template`). Needs email:send.',
        body: Type.Union([DocumentedSendEmailBody, DocumentedTemplateSendBody]),
        headers: Type.Object({
          'Idempotency-Key': Type.Optional(Type.String({ pattern: IDEMPOTENCY_KEY.source, description: 'One field at most (a repeated one is 400 validation_error). The same key with the same body answers the first result again; with another body, 409 idempotency_conflict.' })),
        }),
        responses: { 202: { description: 'Admitted (queued) or suppressed; delivery is asynchronous.', schema: SendResult, headers: ['RateLimit-Policy', 'RateLimit'] } },
        failures: {
          429: {
            description: 'rate_limit_exceeded, with Retry-After and the rate-limit headers of the policy that refused (retry with the same ' +
              'Idempotency-Key after waiting); or quota_exceeded, a monthly allowance used up until the next UTC month, with none of these headers.',
            headers: ['Retry-After', 'RateLimit-Policy', 'RateLimit'],
          },
        },
      },
    },
  }, async (request, reply) => {
    // Again once the body is in: a body may take up to the request timeout to arrive, and a key
    // revoked (or a workspace deactivated) meanwhile must refuse the send as it refuses the
    // next request. The reads are reused (management/reused-reads.ts), so this costs little.
    const principal = await authenticateApiKey(ctx, request.headers.authorization);
    requirePermission(principal, 'email:send');
    const idempotencyKey = idempotencyKeyOf(request);
    const body = request.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new RelayError('validation_error', 'body: must be a JSON object');
    const sender: Sender = { keyId: principal.keyId, projectId: principal.projectId, workspaceId: principal.workspaceId, environment: principal.environment, allowances: principal.allowances };
    let admission;
    try {
      const checked = await checkedOrReplayed(ctx, deps, principal, sender, body as Record<string, unknown>, idempotencyKey);
      admission = 'replay' in checked
        ? checked.replay
        : await admitEmail(deps, sender, { body, idempotencyKey, prepare: checked.prepare, origin: originOfRequest(request.id) });
    } catch (error) {
      const standing = error instanceof RelayError ? (error.details.standing as RateStanding | undefined) : undefined;
      if (standing) setRateHeaders(reply, [standing]);
      throw error;
    }
    setRateHeaders(reply, admission.rate.standings);
    const result = admission.replayed ? 'replayed' : admission.status === 'suppressed' ? 'suppressed' : 'accepted';
    admissions[result].inc();
    admissionDurations[result].observe(reply.elapsedTime / 1000);
    // Named on the request line (apps/api/server.ts): where the id the client holds meets the request id.
    request.admittedEmailId = admission.id;
    request.admittedFor = sender;
    return reply.status(202).send({
      id: admission.id,
      status: admission.status,
      test_mode: admission.testMode,
      ...(admission.reason !== null ? { reason: admission.reason } : {}),
    });
  });

  app.get('/v1/emails', {
    schema: { querystring: ListEmailsQuery },
    config: { openapi: { summary: 'The project\'s emails, newest first (email:read; a key with only email:send sees its own).', query: DocumentedListEmailsQuery, responses: { 200: { description: 'A page of emails.', schema: EmailList } } } },
  }, async (request) => {
    const principal = principalOf(request);
    const query = request.query as ListEmailsQuery;
    const { items, nextCursor } = await listEmails(ctx.documents, ctx.events, readScopeOf(principal), {
      ...query,
      limit: query.limit === undefined ? undefined : Number(query.limit),
    });
    return { emails: items.map(summaryOf), next_cursor: nextCursor };
  });

  app.get('/v1/emails/:id', {
    schema: { params: IdParam, querystring: NoQuery },
    config: { openapi: { summary: 'One email with its recipients, timeline and webhook deliveries.', responses: { 200: { description: 'The email.', schema: EmailDetail } } } },
  }, async (request) => {
    const principal = principalOf(request);
    const { id } = request.params as { id: string };
    return detailOf(await getEmail(ctx.documents, ctx.events, readScopeOf(principal), id));
  });
}
