// Request schemas of the webhook endpoint routes. Event types and URL rules are checked by the
// service (apps/services/webhooks/endpoints.ts), which names the rule a value breaks.
import { Type, type Static } from '@sinclair/typebox';

const Url = Type.String({ minLength: 1, maxLength: 2048, errorMessage: 'must be an https URL of at most 2048 characters' });
const EventTypes = Type.Array(Type.String({ maxLength: 64 }), { minItems: 1, maxItems: 8, errorMessage: 'must list 1 to 8 event types' });
const Description = Type.Union([Type.String({ maxLength: 500 }), Type.Null()], { errorMessage: 'must be a string of at most 500 characters, or null' });

export const CreateEndpointBody = Type.Object(
  { url: Url, events: EventTypes, description: Type.Optional(Description) },
  { additionalProperties: false },
);
export type CreateEndpointBody = Static<typeof CreateEndpointBody>;

export const UpdateEndpointBody = Type.Object(
  { url: Type.Optional(Url), events: Type.Optional(EventTypes), enabled: Type.Optional(Type.Boolean()), description: Type.Optional(Description) },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateEndpointBody = Static<typeof UpdateEndpointBody>;
