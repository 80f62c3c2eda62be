// Request and response schemas of the webhook endpoint routes. Event types and URL rules are
// checked by the service (apps/services/webhooks/endpoints.ts), which names the rule a value
// breaks (`"email.queued" is not an event type (…)`); the OpenAPI document shows the event types
// enumerated (the Documented… bodies, given as config.openapi.body). The responses document, they
// do not serialize: the handlers build the bodies (endpointView).
import { Type, type Static } from '@sinclair/typebox';
import { WEBHOOK_EVENT_TYPES } from '../../../domain/webhooks/events.ts';
import { Text } from './text.schemas.ts';

const Url = Type.String({ minLength: 1, maxLength: 2048, errorMessage: 'must be an https URL of at most 2048 characters' });
const EventTypes = Type.Array(Type.String({ maxLength: 64 }), { minItems: 1, maxItems: 8, errorMessage: 'must list 1 to 8 event types' });
const EventType = Type.Union(WEBHOOK_EVENT_TYPES.map((type) => Type.Literal(type)));
/** The validated array's bounds, with the event types enumerated: what the service accepts. */
const DocumentedEventTypes = Type.Array(EventType, { minItems: 1, maxItems: 8, description: 'The event types the endpoint receives (a type given twice counts once).' });
/** Characters as code points (./text.schemas.ts), as every other text limit of the API. */
const Description = Type.Union([Text({ maxLength: 500 }), Type.Null()], { errorMessage: 'must be a string of at most 500 characters, or null' });

export const CreateEndpointBody = Type.Object(
  { url: Url, events: EventTypes, description: Type.Optional(Description) },
  { additionalProperties: false },
);
export type CreateEndpointBody = Static<typeof CreateEndpointBody>;
export const DocumentedCreateEndpointBody = Type.Object({ ...CreateEndpointBody.properties, events: DocumentedEventTypes }, { additionalProperties: false });

export const UpdateEndpointBody = Type.Object(
  { url: Type.Optional(Url), events: Type.Optional(EventTypes), enabled: Type.Optional(Type.Boolean()), description: Type.Optional(Description) },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateEndpointBody = Static<typeof UpdateEndpointBody>;
export const DocumentedUpdateEndpointBody = Type.Object(
  { ...UpdateEndpointBody.properties, events: Type.Optional(DocumentedEventTypes) },
  { additionalProperties: false, minProperties: 1 },
);

export const DeliveriesQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, errorMessage: 'must be an integer from 1 to 100' })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9_-]+$', errorMessage: 'must be a delivery id' })),
  },
  { additionalProperties: false },
);
export type DeliveriesQuery = Static<typeof DeliveriesQuery>;

const Attempt = Type.Object({
  number: Type.Integer(), httpStatus: Type.Union([Type.Integer(), Type.Null()]), errorCode: Type.Union([Type.String(), Type.Null()]),
  durationMs: Type.Integer(), createdAt: Type.String({ format: 'date-time' }),
}, { additionalProperties: false });

export const EndpointDeliveries = Type.Object({
  deliveries: Type.Array(Type.Object({
    id: Type.String(), emailId: Type.String(), eventId: Type.String(), type: Type.String(),
    status: Type.Union([Type.Literal('pending'), Type.Literal('succeeded'), Type.Literal('failed')]),
    attempts: Type.Integer(), nextAttemptAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    attemptLogs: Type.Array(Attempt), createdAt: Type.String({ format: 'date-time' }), updatedAt: Type.String({ format: 'date-time' }),
  }, { additionalProperties: false }), { description: 'Newest first.' }),
  next_cursor: Type.Union([Type.String(), Type.Null()]),
}, { additionalProperties: false });

const DateTime = Type.String({ format: 'date-time' });

const endpointFields = {
  id: Type.String(),
  projectId: Type.String(),
  url: Type.String(),
  events: Type.Array(EventType),
  description: Type.Union([Type.String(), Type.Null()]),
  enabled: Type.Boolean(),
  createdAt: DateTime,
  updatedAt: DateTime,
};
const Secret = Type.String({
  pattern: '^whsec_[A-Za-z0-9_-]{43}$',
  description: 'The signing secret (whsec_ and 43 characters): shown in this answer only. Receivers key HMAC-SHA256 with it as UTF-8.',
});

export const Endpoint = Type.Object(endpointFields, { $id: 'WebhookEndpoint', additionalProperties: false });
export const CreatedEndpoint = Type.Object({ ...endpointFields, secret: Secret }, { additionalProperties: false });
export const EndpointList = Type.Object({ endpoints: Type.Array(Endpoint, { description: 'Oldest first.' }) }, { additionalProperties: false });
export const DeletedEndpoint = Type.Object({ ...endpointFields, deleted: Type.Literal(true) }, { additionalProperties: false });
export const RotatedSecret = Type.Object({ secret: Secret }, { additionalProperties: false });
