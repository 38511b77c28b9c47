import type { SignalState } from "./model";

/** How long after its creation a signal reads as `new`. */
export const newForMs = 7 * 86_400_000;

export interface LifecycleColumns {
  created_at: Date;
  resolved_at: Date | null;
  ignored_at: Date | null;
  regressed_at: Date | null;
}

/**
 * States are derived when read (SIGNALS.md): ignored and resolved are what a person set; regressed
 * is a recurrence after a resolution, until resolved again; `new` is the first 7 days; an open signal
 * past those is `ongoing`. `escalating` comes from open incidents, which this module does not keep.
 */
export function signalStates(row: LifecycleColumns, now = Date.now()): SignalState[] {
  if (row.ignored_at) return ["ignored"];
  if (row.resolved_at) return ["resolved"];
  const states: SignalState[] = [];
  if (row.regressed_at) states.push("regressed");
  states.push(now - row.created_at.getTime() < newForMs ? "new" : "ongoing");
  return states;
}

/** Sort rank of `sortBy: state`, most urgent first when descending. */
export function stateRank(row: LifecycleColumns, now = Date.now()): number {
  const states = signalStates(row, now);
  if (states.includes("regressed")) return 5;
  if (states.includes("new")) return 4;
  if (states.includes("ongoing")) return 3;
  if (states.includes("resolved")) return 2;
  return 1;
}
