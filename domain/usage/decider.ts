// A month's usage stream (`usage-<workspaceId>-<YYYY-MM>`) as an aggregate: charges are decided
// in batches (every charge that queued up while an append was in flight, in order).
import type { Decider } from '../decider.ts';
import { decideCharges, foldUsage, initialUsageState, type ChargeRecipients, type UsageEvent, type UsageState } from './quota.ts';
import { USAGE_SCHEMA_VERSIONS, upcastUsageEvent } from './upcast.ts';

export const usageDecider = (month: string): Decider<ChargeRecipients[], UsageState, UsageEvent> => ({
  decide: (commands, state) => decideCharges(commands, state).events,
  fold: foldUsage,
  initialState: () => initialUsageState(month),
  upcast: upcastUsageEvent,
  schemaVersions: USAGE_SCHEMA_VERSIONS,
});
