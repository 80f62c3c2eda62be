// What every appended event carries besides its data: where it came from. The correlation id
// names the outside request that started a chain (an HTTP request, a CLI run); the causation id
// names the immediate cause (the request itself, or the event a processor reacted to); the
// schema version lets readers upcast data written by an older Relay.

export interface EventMetadata {
  correlationId: string;
  causationId: string;
  schemaVersion: number;
}

/** Where a command comes from: what its events' metadata is made of. */
export interface CommandOrigin {
  correlationId: string;
  causationId: string;
}

/** The origin of a command given by an outside request (its id is both correlation and cause). */
export const originOfRequest = (requestId: string): CommandOrigin => ({ correlationId: requestId, causationId: requestId });

/** The origin of a command a processor gives in reaction to an event. */
export function originOfEvent(event: { id: string; metadata?: Record<string, unknown> }): CommandOrigin {
  const correlationId = event.metadata?.correlationId;
  return { correlationId: typeof correlationId === 'string' ? correlationId : event.id, causationId: event.id };
}

/** The schema version an event was written with; events from before versions existed are 1. */
export function schemaVersionOf(metadata: Record<string, unknown> | undefined): number {
  const version = metadata?.schemaVersion;
  return typeof version === 'number' && Number.isSafeInteger(version) && version >= 1 ? version : 1;
}
