// Reading an email's stream back as domain events. Event data is trusted: only admission
// and the processors append to email streams, with the types of domain/email/events.ts.
import { emailStreamId, type RecordedEmailEvent } from '../../domain/email/events.ts';
import type { EventStore, StoredEvent } from '../../infra/ports/event-store.ts';

export const asEmailEvent = (e: StoredEvent): RecordedEmailEvent =>
  ({ id: e.id, streamId: e.streamId, revision: e.revision, type: e.type, data: e.data }) as unknown as RecordedEmailEvent;

export async function readEmailStream(events: EventStore, emailId: string): Promise<RecordedEmailEvent[]> {
  return (await events.readStream(emailStreamId(emailId))).map(asEmailEvent);
}
