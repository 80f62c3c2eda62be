// The suppressor (group `<ns>.suppressor`): blocks a recipient across its workspace when a
// report says it bounced hard or complained, or its MX refused it for good. A block joins the
// chain of the event it reacts to (originOfEvent of the stored event, whose metadata the upcast
// event does not keep): the send request's or the report's correlation id, that event as cause.
import { upcastEmailEvent } from '../../domain/email/upcast.ts';
import { originOfEvent } from '../../domain/events/metadata.ts';
import { applyAutomaticSuppression } from '../services/feedback/auto-suppression.ts';
import { defineProcessor } from './processor.ts';

export const suppressor = defineProcessor({
  name: 'suppressor',
  summary: 'adds hard-bounced and complaining recipients to their workspace\'s suppression list',
  eventTypes: ['RecipientReported', 'DeliveryAttempted'],
  async handle(event, _runtime, deps) {
    const added = await applyAutomaticSuppression({ ...deps, secrets: deps.services.secrets }, upcastEmailEvent(event), originOfEvent(event));
    if (added > 0) deps.onDebug?.('suppressed', { streamId: event.streamId, added });
  },
});
