// Template content (spec: TemplateContent / TemplateUpdate) and the decisions about writing it.
import { headerTextProblem } from '../email/send-request.ts';
import { RelayError, conflict } from '../errors.ts';

export const MAX_TEMPLATE_NAME_LENGTH = 100;
export const MAX_TEMPLATE_BODY_LENGTH = 1_000_000;

export interface TemplateContent {
  name: string;
  slug: string;
  subject: string;
  html: string | null;
  text: string | null;
}

/** A template's subject becomes a header: the send's character rule applies to it as written (400). */
export function checkTemplateSubject(subject: string, field = 'body.subject'): string {
  const problem = headerTextProblem(subject);
  if (problem !== null) throw new RelayError('validation_error', `${field}: ${problem}`);
  return subject;
}

/** The body as sent (html/text may be left out) → the stored content (left out = null). */
export function templateContentOf(body: { name: string; slug: string; subject: string; html?: string | null; text?: string | null }): TemplateContent {
  checkTemplateSubject(body.subject);
  const content: TemplateContent = { name: body.name, slug: body.slug, subject: body.subject, html: body.html ?? null, text: body.text ?? null };
  if (!content.html && !content.text) throw new RelayError('validation_error', 'body.html: at least one of html or text must be a nonempty string');
  return content;
}

/** PATCH replaces the content only from the revision the client read; anything else is stale. */
export function checkRevision(current: number, requested: number): void {
  if (requested !== current) {
    throw conflict(`revision ${requested} is stale: the template is at revision ${current}; read it again and reapply your change`);
  }
}
