// The one reading point of usage streams (see domain/email/upcast.ts for the pattern).
import { schemaVersionOf } from '../events/metadata.ts';
import type { UsageEvent } from './quota.ts';

export const USAGE_SCHEMA_VERSIONS: Record<UsageEvent['type'], number> = { RecipientsCharged: 1 };

/** Null for an event this version cannot read (a newer type or version): it counts nothing. */
export function upcastUsageEvent(stored: { type: string; data: Record<string, unknown>; metadata?: Record<string, unknown> }): UsageEvent | null {
  if (stored.type !== 'RecipientsCharged') return null;
  if (schemaVersionOf(stored.metadata) > USAGE_SCHEMA_VERSIONS.RecipientsCharged) return null;
  return { type: 'RecipientsCharged', data: stored.data as UsageEvent['data'] };
}
