// A commit hold (infra/sqlite/group-commit.ts, an option of the embedded stores) that a test
// switches on and off while its stores are open: give `hold` to the stores, then `set` what
// each commit and sync should wait for (null: nothing).
import type { CommitHold } from '../../infra/sqlite/group-commit.ts';

export interface CommitHoldSwitch {
  hold: CommitHold;
  set(hold: CommitHold | null): void;
}

export function commitHoldSwitch(): CommitHoldSwitch {
  let current: CommitHold | null = null;
  return {
    hold: (batch) => (current ? current(batch) : Promise.resolve()),
    set: (hold) => {
      current = hold;
    },
  };
}
