// The chaos run's randomness, all from one seed: which part is killed when. The same seed,
// interval, duration and parts give the same schedule, so a failing run can be replayed.
import { seeded } from '../support/history.ts';

export interface Kill {
  /** Milliseconds after the first email is sent. */
  atMs: number;
  part: string;
}

export interface ScheduleOptions {
  seed: number;
  /** The mean time between kills; each gap is drawn from 0.5 to 1.5 times it. */
  intervalMs: number;
  /** No kill at or after this time (the end of sending). */
  durationMs: number;
  /** The parts to choose from; a part listed twice is chosen twice as often. */
  targets: readonly string[];
}

export function killSchedule({ seed, intervalMs, durationMs, targets }: ScheduleOptions): Kill[] {
  if (targets.length === 0) throw new Error('no part to kill');
  const random = seeded(seed);
  const kills: Kill[] = [];
  for (let at = intervalMs * (0.5 + random()); at < durationMs; at += intervalMs * (0.5 + random())) {
    kills.push({ atMs: Math.round(at), part: targets[Math.floor(random() * targets.length)] });
  }
  return kills;
}
