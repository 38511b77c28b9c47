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

/** Signals as the signals module keeps them (sql/postgres/030_signals.sql, 042_signal_escalation.sql). */
export function createSignalSource(ctx: Pick<Context, "ch" | "sql">): SignalSource {
  return {
    // Visible, not ignored, not resolved: a regression clears resolved_at and sets regressed_at.
    activeSignals: async (project) => {
      const rows = await ctx.sql<{ id: string; name: string; created_at: Date; muted_at: Date | null; regressed_at: Date | null; resolved_at: Date | null }[]>`
        SELECT id, name, created_at, muted_at, regressed_at, resolved_at FROM signals
        WHERE project_id = ${project.id} AND organization_id = ${project.organizationId} AND deleted_at IS NULL
          AND visible_at IS NOT NULL AND ignored_at IS NULL AND resolved_at IS NULL
        ORDER BY id`;
      return rows.map((row) => ({ id: row.id, name: row.name, firstSeenAt: row.created_at, mutedAt: row.muted_at, regressedAt: row.regressed_at, resolvedAt: row.resolved_at }));
    },
    hourlyCounts: (project, signalIds, from, to) =>
      countSignalScoresPerHour(ctx.ch, { organizationId: project.organizationId, projectId: project.id, signalIds, from, to }),
    recordEscalation: async (project, signalId, escalating, at) => {
      await ctx.sql`
        UPDATE signals SET escalating_since = ${escalating ? ctx.sql`coalesce(escalating_since, ${at})` : null}
        WHERE id = ${signalId} AND project_id = ${project.id} AND organization_id = ${project.organizationId}`;
    },
  };
}
