// The template branch of POST /v1/emails: a TemplateSend body becomes the NormalizedSend that
// admission takes, rendered at admission. The accepted event then holds the rendered subject
// and (sealed) bodies plus the template's id and revision, so editing or deleting the template
// later never changes an accepted email. The idempotency fingerprint stays that of the body as
// sent (admission computes it from `body`): it covers the template send, not its rendering.
import { TypeCompiler } from '@sinclair/typebox/compiler';
import type { TemplateReference } from '../../../domain/email/events.ts';
import { checkHeaders, checkTags, normalizeEnvelope, type NormalizedSend } from '../../../domain/email/send-request.ts';
import { RelayError, notFound } from '../../../domain/errors.ts';
import { checkTemplateVariables, invalidVariables, type TemplateVariables } from '../../../domain/templates/variables.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import { TemplateSendBody } from '../../api/plugins/template-send.schemas.ts';
import { compiledTemplateOf } from './compiled-templates.ts';
import { findTemplateBySlug } from './templates.ts';

const templateSendChecker = TypeCompiler.Compile(TemplateSendBody);

/** A body holding `template` is a template send (spec: POST /v1/emails). */
export function isTemplateSend(body: unknown): boolean {
  return body !== null && typeof body === 'object' && !Array.isArray(body) && 'template' in body;
}

/** "/to/3" → "to[3]" */
const fieldOf = (path: string) => path.split('/').filter(Boolean).reduce((a, s) => (/^\d+$/.test(s) ? `${a}[${s}]` : a ? `${a}.${s}` : s), '');

/** A template send checked as far as it can be without its template. */
export interface CheckedTemplateSend {
  envelope: ReturnType<typeof normalizeEnvelope>;
  slug: string;
  variables: TemplateVariables;
  headers: Record<string, string>;
  tags: Record<string, string>;
  metadata: Record<string, unknown>;
}

/**
 * Everything that can be checked without the template, so it runs before admission looks at
 * replays and rate limits: 400 validation_error for the body (naming the field), 422
 * invalid_template_variables for variables that break TemplateVariables.
 */
export function checkTemplateSend(body: unknown): CheckedTemplateSend {
  if (!templateSendChecker.Check(body)) {
    const first = templateSendChecker.Errors(body).First();
    const field = first ? fieldOf(first.path) : '';
    const message = (first?.schema as { errorMessage?: string } | undefined)?.errorMessage ?? first?.message ?? 'is invalid';
    throw new RelayError('validation_error', `body${field ? `.${field}` : ''}: ${message}`);
  }
  return {
    envelope: normalizeEnvelope(body),
    headers: checkHeaders(body.headers),
    tags: checkTags(body.tags),
    metadata: (body.metadata ?? {}) as Record<string, unknown>,
    slug: body.template,
    variables: checkTemplateVariables(body.variables),
  };
}

/**
 * Resolves the slug in the project (404 not_found) and renders the template with the
 * variables (422 invalid_template_variables: one it uses is missing, or the rendering breaks a
 * rule, e.g. a subject with CR or LF). Admission calls this only for a request that is neither
 * a replay nor rate limited: a template deleted after the first attempt must not fail a retry.
 */
export async function renderTemplateSend(documents: DocumentStore, projectId: string, parsed: CheckedTemplateSend): Promise<{ send: NormalizedSend; template: TemplateReference }> {
  const template = await findTemplateBySlug(documents, projectId, parsed.slug);
  if (!template) throw notFound(`no template with the slug "${parsed.slug}" in this project`);
  const rendered = (await compiledTemplateOf(template)).render(parsed.variables, 'body.variables');
  if (!rendered.html && !rendered.text) throw invalidVariables('body.variables', 'the rendered email has neither html nor text');
  const send: NormalizedSend = {
    ...parsed.envelope,
    subject: rendered.subject,
    html: rendered.html || null,
    text: rendered.text || null,
    headers: parsed.headers,
    tags: parsed.tags,
    metadata: parsed.metadata,
  };
  const reference: TemplateReference = { id: template._id, slug: template.slug, revision: template.revision };
  return { send, template: reference };
}

/**
 * A TemplateSend body → the send to admit and the template it used. 400 validation_error
 * for the body, 404 not_found when the slug names no template of the project, 422
 * invalid_template_variables when the variables do not fit (a missing one is named).
 */
export async function prepareTemplateSend(documents: DocumentStore, projectId: string, body: unknown): Promise<{ send: NormalizedSend; template: TemplateReference }> {
  return renderTemplateSend(documents, projectId, checkTemplateSend(body));
}
