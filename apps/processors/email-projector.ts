// The email read model's processor (group `<ns>.projector`): every email event goes into the
// list/detail documents (apps/services/email-view-writer.ts).
import { EMAIL_SCHEMA_VERSIONS } from '../../domain/email/upcast.ts';
import { ensureEmailViewIndexes } from '../services/email-reads.ts';
import { projectEmailEvent } from '../services/email-view-writer.ts';
import { defineProcessor } from './processor.ts';

export const emailProjector = defineProcessor({
  name: 'projector',
  summary: 'keeps the email list and timeline read model (emails collection)',
  eventTypes: Object.keys(EMAIL_SCHEMA_VERSIONS),
  async init(deps) {
    await ensureEmailViewIndexes(deps.documents);
    return {};
  },
  async handle(event, _runtime, deps) {
    await projectEmailEvent(deps.documents, deps.events, event);
    deps.onDebug?.('projected', { streamId: event.streamId, revision: event.revision });
  },
});
