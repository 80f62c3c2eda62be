// POST /v1/emails, GET /v1/emails, GET /v1/emails/{id}: bearer-key authenticated.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { normalizeSendRequest } from '../../../domain/email/send-request.ts';
import { RelayError } from '../../../domain/errors.ts';
import { admitEmail } from '../../services/admission.ts';
import { getEmail, listEmails, type ReadScope } from '../../services/email-reads.ts';
import type { EmailView } from '../../../projections/email-view.ts';
import { authenticateApiKey, requirePermission, type ApiKeyPrincipal } from '../auth/bearer.ts';
import type { ApiContext } from '../context.ts';
import { IDEMPOTENCY_KEY, IdParam, ListEmailsQuery, SendEmailBody } from './emails.schemas.ts';

const sendEmailChecker = TypeCompiler.Compile(SendEmailBody);

/** "/to/3" → "to[3]" */
const fieldOf = (path: string) => path.split('/').filter(Boolean).reduce((a, s) => (/^\d+$/.test(s) ? `${a}[${s}]` : a ? `${a}.${s}` : s), '');

function parseSendBody(body: unknown) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new RelayError('validation_error', 'body: must be a JSON object');
  if ('template' in body) throw new RelayError('validation_error', 'body.template: template sends are not available yet');
  if (!sendEmailChecker.Check(body)) {
    const first = sendEmailChecker.Errors(body).First();
    const field = first ? fieldOf(first.path) : '';
    const message = (first?.schema as { errorMessage?: string } | undefined)?.errorMessage ?? first?.message ?? 'is invalid';
    throw new RelayError('validation_error', `body${field ? `.${field}` : ''}: ${message}`);
  }
  return normalizeSendRequest(body);
}

function idempotencyKeyOf(request: FastifyRequest): string | null {
  const raw = request.headers['idempotency-key'];
  if (raw === undefined) return null;
  if (Array.isArray(raw) || !IDEMPOTENCY_KEY.test(raw)) {
    throw new RelayError('validation_error', 'header Idempotency-Key: must be 1 to 128 printable ASCII characters');
  }
  return raw;
}

function readScopeOf(principal: ApiKeyPrincipal): ReadScope {
  if (principal.permissions.includes('email:read')) return { projectId: principal.projectId, apiKeyId: null };
  requirePermission(principal, 'email:send');
  return { projectId: principal.projectId, apiKeyId: principal.keyId };
}

function summaryOf(view: EmailView) {
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

function detailOf(view: EmailView) {
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
    webhookDeliveries: view.webhookDeliveries.slice(-MAX_WEBHOOK_DELIVERIES_SHOWN),
    metadata: view.metadata,
    tags: view.tags,
    events: view.events,
  };
}

export async function emailRoutes(app: FastifyInstance, ctx: ApiContext): Promise<void> {
  // The key is checked before the request is validated: an unauthenticated caller learns
  // nothing about what a valid request would look like.
  const principals = new WeakMap<FastifyRequest, ApiKeyPrincipal>();
  app.addHook('preValidation', async (request) => {
    principals.set(request, await authenticateApiKey(ctx, request.headers.authorization));
  });
  const authenticate = async (request: FastifyRequest) => principals.get(request)!;

  app.post('/v1/emails', async (request, reply) => {
    const principal = await authenticate(request);
    requirePermission(principal, 'email:send');
    const idempotencyKey = idempotencyKeyOf(request);
    const send = parseSendBody(request.body);
    const result = await admitEmail(
      { events: ctx.events, documents: ctx.documents, now: ctx.now },
      { keyId: principal.keyId, projectId: principal.projectId, workspaceId: principal.workspaceId, environment: principal.environment },
      { body: request.body, idempotencyKey, send },
    );
    return reply.status(202).send({
      id: result.id,
      status: result.status,
      test_mode: result.testMode,
      ...(result.reason !== null ? { reason: result.reason } : {}),
    });
  });

  app.get('/v1/emails', { schema: { querystring: ListEmailsQuery } }, async (request) => {
    const principal = await authenticate(request);
    const { items, nextCursor } = await listEmails(ctx.documents, ctx.events, readScopeOf(principal), request.query as ListEmailsQuery);
    return { emails: items.map(summaryOf), next_cursor: nextCursor };
  });

  app.get('/v1/emails/:id', { schema: { params: IdParam } }, async (request) => {
    const principal = await authenticate(request);
    const { id } = request.params as { id: string };
    return detailOf(await getEmail(ctx.documents, ctx.events, readScopeOf(principal), id));
  });
}
