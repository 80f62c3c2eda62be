// Indexes every part relies on, created at start (idempotent), so each process can start
// alone in any order.
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { ensureContentKeyIndexes } from './content-vault.ts';
import { ensureManagementIndexes } from './management/indexes.ts';
import { ensureSignInThrottleIndexes } from './management/sign-in-throttle.ts';
import { PROJECTIONS } from './projection-registry.ts';
import { ensureRateLimitIndexes } from './rate-limits.ts';
import { ensureTemplateIndexes } from './templates/templates.ts';
import { ensureDeliveryIndexes } from './webhooks/deliveries.ts';
import { ensureEndpointIndexes } from './webhooks/endpoints.ts';

export async function prepareStores(documents: DocumentStore): Promise<void> {
  await ensureManagementIndexes(documents);
  await ensureSignInThrottleIndexes(documents);
  for (const projection of Object.values(PROJECTIONS)) await projection.ensureIndexes(documents);
  await ensureContentKeyIndexes(documents);
  await ensureTemplateIndexes(documents);
  await ensureRateLimitIndexes(documents);
  // The API reads deliveries (EmailDetail) and writes endpoints, whether or not it runs the webhooks processor.
  await ensureEndpointIndexes(documents);
  await ensureDeliveryIndexes(documents);
}
