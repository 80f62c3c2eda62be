// Pages that follow something as it happens (the email list, an email's timeline) read it
// again every few seconds while the tab is visible, and stop once `done` says so.

export const POLL_MS = 2000;

export function livePoll(load: () => Promise<void | boolean>, intervalMs = POLL_MS): void {
  let running = false;
  const timer = window.setInterval(async () => {
    if (document.hidden || running) return;
    running = true;
    try {
      // A load that answers true has seen the end of what it follows.
      if ((await load()) === true) clearInterval(timer);
    } catch {
      // A failed refresh (Relay restarting) leaves the last view; the next tick tries again.
    } finally {
      running = false;
    }
  }, intervalMs);
}
