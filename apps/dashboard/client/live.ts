// Pages that follow something as it happens (the email list, an email's timeline, a webhook
// endpoint's deliveries) read it again every few seconds while the tab is visible, less often
// while nothing changes or the reads fail, and no more once a read finds the reader no longer a
// member of the workspace.
import { noLongerMember } from './api.ts';

export const POLL_MS = 2000;

/**
 * What a load saw: `unchanged` when nothing moved since the last one (the wait may grow), and
 * anything else (`changed`, nothing) when it moved.
 */
export type Seen = 'changed' | 'unchanged' | void;

export interface PollOptions {
  /** The wait after a change, and the first one. */
  intervalMs?: number;
  /** The longest wait that loads seeing nothing new (or failing) grow to; the same as intervalMs: no backoff. */
  maxIntervalMs?: number;
}

/** Each quiet load waits this much longer than the one before, up to maxIntervalMs. */
const BACKOFF = 1.5;

/**
 * The longest wait after loads that failed (Relay restarting, the session ended under a tab left
 * open), whatever the page's own cap: failures back off even on a page that otherwise reads every
 * few seconds, and a load that works again brings the page's own pace back.
 */
const FAILED_MAX_MS = 30_000;

export function livePoll(load: () => Promise<Seen>, { intervalMs = POLL_MS, maxIntervalMs = intervalMs }: PollOptions = {}): void {
  let delay = intervalMs;
  // One load at a time: the next wait starts once a load has answered, however slow it was.
  const tick = async () => {
    if (document.hidden) return schedule();
    let seen: Seen;
    let cap = maxIntervalMs;
    try {
      seen = await load();
    } catch (error) {
      // Removed from the workspace: no later read can work (a notice at the top says so, api.ts),
      // so the page stops following rather than asking again for good.
      if (noLongerMember(error)) return;
      // A failed refresh leaves the last view; a later one tries again.
      seen = 'unchanged';
      cap = Math.max(maxIntervalMs, FAILED_MAX_MS);
    }
    delay = seen === 'unchanged' ? Math.min(cap, Math.round(delay * BACKOFF)) : intervalMs;
    schedule();
  };
  const schedule = () => void window.setTimeout(tick, delay);
  schedule();
}
