// Request schemas of the template endpoints (spec: TemplateContent, TemplateUpdate,
// TemplatePreview, list query). `variables` is left to domain/templates/variables.ts: the
// spec answers 422, not 400, when they are wrong. The OpenAPI document shows the bodies with
// what their handlers check after the schema (TemplateVariables, html-or-text): the Documented…
// schemas, given as config.openapi.body.
import { Type, type Static, type TObject, type TProperties } from '@sinclair/typebox';
import { MAX_SUBJECT_LENGTH } from '../../../domain/email/send-request.ts';
import { MAX_TEMPLATE_BODY_LENGTH, MAX_TEMPLATE_NAME_LENGTH } from '../../../domain/templates/content.ts';
import { MAX_SLUG_LENGTH, SLUG_PATTERN } from '../../../domain/templates/slug.ts';
import { MAX_VARIABLES, MAX_VARIABLE_STRING_LENGTH, VARIABLE_NAME_PATTERN } from '../../../domain/templates/variables.ts';
import { HTML_OR_TEXT, SendEmailBody } from './emails.schemas.ts';
import { Text } from './text.schemas.ts';

const ID = { minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9_-]+$', errorMessage: 'must be 1 to 64 characters of letters, digits, _ and -' };

export const Slug = Type.String({
  minLength: 1,
  maxLength: MAX_SLUG_LENGTH,
  pattern: SLUG_PATTERN,
  errorMessage: `must be at most ${MAX_SLUG_LENGTH} characters: lowercase letters and digits, in groups separated by single hyphens`,
});

export const Subject = Text({
  minLength: 1,
  maxLength: MAX_SUBJECT_LENGTH,
  pattern: '^[^\\r\\n]*$',
  errorMessage: `must be 1 to ${MAX_SUBJECT_LENGTH} characters without CR or LF`,
});

const Body = Type.Union([Text({ maxLength: MAX_TEMPLATE_BODY_LENGTH }), Type.Null()], {
  errorMessage: `must be a string of at most ${MAX_TEMPLATE_BODY_LENGTH.toLocaleString('en-US')} characters, or null`,
});

const Name = Text({ minLength: 1, maxLength: MAX_TEMPLATE_NAME_LENGTH, errorMessage: `must be 1 to ${MAX_TEMPLATE_NAME_LENGTH} characters` });

/**
 * Spec: TemplateVariables, for the document only. domain/templates/variables.ts checks them
 * (422 invalid_template_variables, naming the variable), so the validated bodies take any value.
 */
export const TemplateVariables = Type.Object(
  {},
  {
    maxProperties: MAX_VARIABLES,
    propertyNames: { pattern: VARIABLE_NAME_PATTERN },
    additionalProperties: Type.Union([Text({ maxLength: MAX_VARIABLE_STRING_LENGTH }), Type.Number(), Type.Boolean()]),
    description: `At most ${MAX_VARIABLES} variables; names start with a letter and hold up to 64 letters, digits and _; values are strings of at most ` +
      `${MAX_VARIABLE_STRING_LENGTH.toLocaleString('en-US')} characters, numbers or booleans. Otherwise 422 invalid_template_variables, as for a variable ` +
      'the template uses that the request leaves out.',
  },
);

/** `body` with `variables` as TemplateVariables, for the document (config.openapi.body). */
export const withVariables = <T extends TProperties>(body: TObject<T>) =>
  Type.Object({ ...body.properties, variables: Type.Optional(TemplateVariables) }, { additionalProperties: false });

export const ProjectQuery = Type.Object({ projectId: Type.String(ID) }, { additionalProperties: false });
export type ProjectQuery = Static<typeof ProjectQuery>;

export const ListTemplatesQuery = Type.Object(
  {
    projectId: Type.String(ID),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, errorMessage: 'must be an integer from 1 to 100' })),
    cursor: Type.Optional(Type.String(ID)),
  },
  { additionalProperties: false },
);
export type ListTemplatesQuery = Static<typeof ListTemplatesQuery>;

export const TemplateIdParams = Type.Object({ id: Type.String(ID) });
export type TemplateIdParams = Static<typeof TemplateIdParams>;

export const TemplateContentBody = Type.Object(
  { name: Name, slug: Slug, subject: Subject, html: Type.Optional(Body), text: Type.Optional(Body) },
  { additionalProperties: false },
);
export type TemplateContentBody = Static<typeof TemplateContentBody>;

/** TemplateContent as the document shows it: at least one of html or text is a nonempty string. */
export const DocumentedTemplateContentBody = Type.Object(TemplateContentBody.properties, {
  additionalProperties: false, anyOf: HTML_OR_TEXT, description: 'At least one of html or text must be a nonempty string.',
});

export const TemplateUpdateBody = Type.Object(
  {
    name: Name,
    slug: Slug,
    subject: Subject,
    html: Type.Optional(Body),
    text: Type.Optional(Body),
    revision: Type.Integer({ minimum: 1, errorMessage: 'must be an integer of at least 1' }),
  },
  { additionalProperties: false },
);
export type TemplateUpdateBody = Static<typeof TemplateUpdateBody>;

/** TemplateUpdate as the document shows it: at least one of html or text is a nonempty string. */
export const DocumentedTemplateUpdateBody = Type.Object(TemplateUpdateBody.properties, {
  additionalProperties: false, anyOf: HTML_OR_TEXT, description: 'At least one of html or text must be a nonempty string.',
});

export const TemplatePreviewBody = Type.Object(
  { subject: Subject, html: Type.Optional(Body), text: Type.Optional(Body), variables: Type.Optional(Type.Unknown()) },
  { additionalProperties: false },
);
export type TemplatePreviewBody = Static<typeof TemplatePreviewBody>;
export const DocumentedTemplatePreviewBody = withVariables(TemplatePreviewBody);

/** "Send a test": a sender of the project's domains, one recipient, the variables to render with. */
export const TemplateTestBody = Type.Object(
  { from: SendEmailBody.properties.from, to: SendEmailBody.properties.from, variables: Type.Optional(Type.Unknown()) },
  { additionalProperties: false },
);
export type TemplateTestBody = Static<typeof TemplateTestBody>;
export const DocumentedTemplateTestBody = withVariables(TemplateTestBody);
