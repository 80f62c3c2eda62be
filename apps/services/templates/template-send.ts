// The template branch of POST /v1/emails: a TemplateSend body becomes the NormalizedSend that
// admission takes, rendered at admission. The accepted event then holds the rendered subject
// and (sealed) bodies plus the template's id and revision, so editing or deleting the template
// later never changes an accepted email. The idempotency fingerprint stays that of the body as
// sent (admission computes it from `body`): it covers the template send, not its rendering.
import type { TemplateReference } from '../../../domain/email/events.ts';
import { checkHeaders, checkMetadata, checkTags, normalizeEnvelope, type NormalizedSend } from '../../../domain/email/send-request.ts';
import { notFound } from '../../../domain/errors.ts';
import { checkRenderedSubjectText, checkTemplateVariables, invalidVariables, type TemplateVariables } from '../../../domain/templates/variables.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import type { TemplateThreads } from '../../../infra/rendering/template-threads.ts';
import { projectsOf } from '../management/projects.ts';
import { reusedReads } from '../management/reused-reads.ts';
import { findTemplateBySlug } from './templates.ts';

/**
 * The workspace a project belongs to (it never changes), whose turn on the rendering thread a
 * send of the project takes: read here since the send's caller passes the project only. A
 * project gone meanwhile takes turns under its own id.
 */
async function workspaceOf(documents: DocumentStore, projectId: string): Promise<string> {
  const workspaceId = await reusedReads<string | null>(documents, 'project-workspaces').get(projectId, async () => (await projectsOf(documents).get(projectId))?.workspaceId ?? null);
  return workspaceId ?? `project:${projectId}`;
}

/** A TemplateSend body whose shape the HTTP layer checked against its schema already. */
export interface TemplateSendInput {
  from: string;
  to: string | string[];
  cc?: string | string[];
  bcc?: string | string[];
  reply_to?: string;
  template: string;
  variables?: unknown;
  headers?: Record<string, string>;
  tags?: Record<string, string>;
  metadata?: Record<string, unknown>;
}

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
 * replays and rate limits: 400 validation_error for mailboxes, headers, tags and metadata, 422
 * invalid_template_variables for variables that break TemplateVariables.
 */
export function checkTemplateSend(body: TemplateSendInput): CheckedTemplateSend {
  return {
    envelope: normalizeEnvelope(body),
    headers: checkHeaders(body.headers),
    tags: checkTags(body.tags),
    metadata: checkMetadata(body.metadata),
    slug: body.template,
    variables: checkTemplateVariables(body.variables),
  };
}

/**
 * Resolves the slug in the project (404 not_found) and renders the template with the
 * variables (422 invalid_template_variables: one it uses is missing, the rendering breaks a
 * rule, e.g. a subject with CR, LF or another character no header may hold, or it takes longer
 * than the template time limit). It renders on the template rendering thread, taking turns with
 * other workspaces' sends (503 with Retry-After when it cannot start in time). Admission calls
 * this only for a request that is neither a replay nor rate limited: a template deleted after
 * the first attempt must not fail a retry.
 */
export async function renderTemplateSend(
  documents: DocumentStore, threads: TemplateThreads, projectId: string, parsed: CheckedTemplateSend,
): Promise<{ send: NormalizedSend; template: TemplateReference }> {
  const [template, workspaceId] = await Promise.all([findTemplateBySlug(documents, projectId, parsed.slug), workspaceOf(documents, projectId)]);
  if (!template) throw notFound(`no template with the slug "${parsed.slug}" in this project`);
  const { rendered, variables } = await threads.render(workspaceId, template, parsed.variables, 'body.variables');
  checkRenderedSubjectText(rendered.subject, variables, parsed.variables, 'body.variables');
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
