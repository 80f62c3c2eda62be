// What the template endpoints answer (spec: Template, TemplateSummary, the preview), for the
// OpenAPI document (apps/api/openapi.ts). They document, they do not serialize: the views are
// apps/services/templates/templates.ts's, and test/openapi.int.test.ts checks real answers
// against these schemas so the two cannot drift apart.
import { Type } from '@sinclair/typebox';

const DateTime = Type.String({ format: 'date-time' });

const summaryFields = {
  id: Type.String(),
  projectId: Type.String(),
  name: Type.String(),
  slug: Type.String(),
  subject: Type.String(),
  revision: Type.Integer({ minimum: 1, description: '1 when created, +1 on each update; an update names the revision it replaces (409 conflict when stale).' }),
  variables: Type.Array(Type.String(), { description: 'The variables the content uses.' }),
  createdAt: DateTime,
  updatedAt: DateTime,
};

export const TemplateSummary = Type.Object(summaryFields, { additionalProperties: false });

export const Template = Type.Object({
  ...summaryFields,
  html: Type.Union([Type.String(), Type.Null()]),
  text: Type.Union([Type.String(), Type.Null()]),
}, { additionalProperties: false });

export const TemplateList = Type.Object({
  templates: Type.Array(TemplateSummary),
  next_cursor: Type.Union([Type.String(), Type.Null()], { description: 'Pass as `cursor` for the next page; null on the last.' }),
}, { additionalProperties: false });

export const TemplatePreviewResult = Type.Object({ subject: Type.String(), html: Type.String(), text: Type.String() }, { additionalProperties: false });

export const TemplateDeleted = Type.Object({ deleted: Type.Literal(true) }, { additionalProperties: false });
