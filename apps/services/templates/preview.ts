// POST /v1/templates/preview: the same compile, merge and sanitize as a send, nothing stored
// or sent. Template errors are 400, variables that do not fit 422.
import { checkTemplateSubject } from '../../../domain/templates/content.ts';
import { checkRenderedSubjectText, checkTemplateVariables } from '../../../domain/templates/variables.ts';
import { compileTemplate } from '../../../infra/rendering/template-renderer.ts';

export interface PreviewBody {
  subject: string;
  html?: string | null;
  text?: string | null;
  variables?: unknown;
}

export interface PreviewResult { subject: string; html: string; text: string }

export async function previewTemplate(body: PreviewBody): Promise<PreviewResult> {
  const compiled = await compileTemplate({ subject: checkTemplateSubject(body.subject), html: body.html ?? null, text: body.text ?? null }, 'body');
  const variables = checkTemplateVariables(body.variables);
  const rendered = compiled.render(variables, 'body.variables');
  checkRenderedSubjectText(rendered.subject, compiled.variables, variables, 'body.variables');
  return { subject: rendered.subject, html: rendered.html ?? '', text: rendered.text ?? '' };
}
