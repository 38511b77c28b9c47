import type { Context } from "../../context";
import { countSignalScoresPerHour } from "../scores/analytics";
import type { ProjectRef } from "../traces/service";

/**
 * What monitor evaluation needs from signals, in one place: the signals module connects here.
 * Escalation reads a project's active signals and their hourly failed-score counts, and records
 * each signal's escalating state when the detector enters or exits.
 */
export interface SignalInfo {
  id: string;
  name: string;
  firstSeenAt: Date;
  mutedAt: Date | null;
  /** Set when a resolved signal recurred; it stays regressed until resolved again (resolvedAt later). */
  regressedAt: Date | null;
  resolvedAt: Date | null;
}

export interface SignalSource {
  /** The project's signals that are neither resolved nor ignored, plus regressed ones. */
  activeSignals(project: ProjectRef): Promise<SignalInfo[]>;
  /** Failed scores per signal and UTC hour in [from, to); hours without scores may be absent. */
  hourlyCounts(project: ProjectRef, signalIds: string[], from: Date, to: Date): Promise<{ signalId: string; hour: string; count: number }[]>;
  /** The detector entered (true) or exited (false) for this signal. */
  recordEscalation(project: ProjectRef, signalId: string, escalating: boolean, at: Date): Promise<void>;
}

/**
 * The source used by the evaluation job. The signals table is not part of this build yet, so no
 * signal is listed; the hourly counts already come from the ClickHouse copy of scores.
 */
export function createSignalSource(ctx: Pick<Context, "ch">): SignalSource {
  return {
    activeSignals: async () => [],
    hourlyCounts: (project, signalIds, from, to) =>
      countSignalScoresPerHour(ctx.ch, { organizationId: project.organizationId, projectId: project.id, signalIds, from, to }),
    recordEscalation: async () => {},
  };
}
