// Request schema of a template send (spec: TemplateSend), the other body of POST /v1/emails.
// The envelope, headers, tags and metadata are the direct send's own schemas, so both kinds of
// send accept and refuse them alike.
import { Type, type Static } from '@sinclair/typebox';
import { SendEmailBody } from './emails.schemas.ts';
import { Slug, withVariables } from './templates.schemas.ts';

const { from, to, cc, bcc, reply_to, headers, tags, metadata } = SendEmailBody.properties;

export const TemplateSendBody = Type.Object(
  {
    from,
    to,
    cc,
    bcc,
    reply_to,
    template: Slug,
    // Checked by domain/templates/variables.ts: wrong variables are 422, not 400.
    variables: Type.Optional(Type.Unknown()),
    headers,
    tags,
    metadata,
  },
  { additionalProperties: false },
);
export type TemplateSendBody = Static<typeof TemplateSendBody>;

/** TemplateSend as the OpenAPI document shows it (config.openapi.body): `variables` as TemplateVariables. */
export const DocumentedTemplateSendBody = withVariables(TemplateSendBody);
