// POST /v1/templates/preview: the same compile, merge and sanitize as a send (on the template
// threads, within their time limit), nothing stored or sent. Template errors are 400, variables
// that do not fit 422.
import { checkTemplateSubject } from '../../../domain/templates/content.ts';
import { checkRenderedSubjectText, checkTemplateVariables } from '../../../domain/templates/variables.ts';
import type { WorkspaceTemplates } from '../../../infra/rendering/template-threads.ts';

export interface PreviewBody {
  subject: string;
  html?: string | null;
  text?: string | null;
  variables?: unknown;
}

export interface PreviewResult { subject: string; html: string; text: string }

export async function previewTemplate(threads: WorkspaceTemplates, body: PreviewBody): Promise<PreviewResult> {
  const variables = checkTemplateVariables(body.variables);
  const source = { subject: checkTemplateSubject(body.subject), html: body.html ?? null, text: body.text ?? null };
  const { rendered, variables: used } = await threads.preview(source, variables);
  checkRenderedSubjectText(rendered.subject, used, variables, 'body.variables');
  return { subject: rendered.subject, html: rendered.html ?? '', text: rendered.text ?? '' };
}
