// Request schemas of the webhook endpoint routes. Event types and URL rules are checked by the
// service (apps/services/webhooks/endpoints.ts), which names the rule a value breaks.
import { Type, type Static } from '@sinclair/typebox';
import { Text } from './text.schemas.ts';

const Url = Type.String({ minLength: 1, maxLength: 2048, errorMessage: 'must be an https URL of at most 2048 characters' });
const EventTypes = Type.Array(Type.String({ maxLength: 64 }), { minItems: 1, maxItems: 8, errorMessage: 'must list 1 to 8 event types' });
/** Characters as code points (./text.schemas.ts), as every other text limit of the API. */
const Description = Type.Union([Text({ maxLength: 500 }), Type.Null()], { errorMessage: 'must be a string of at most 500 characters, or null' });

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
