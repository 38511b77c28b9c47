import type { ClickHouseStore } from "../../db/clickhouse";
import { clickHouseTime } from "./copy";

export interface SignalHourCount {
  signalId: string;
  /** Start of the UTC hour, ISO-8601. */
  hour: string;
  count: number;
}

/**
 * Failed scores linked to each signal per UTC hour in [from, to), from the ClickHouse copy: the
 * series escalation compares against its baseline. Drafts, errored and deleted scores do not count;
 * hours without scores are absent.
 */
export async function countSignalScoresPerHour(
  ch: ClickHouseStore,
  scope: { organizationId: string; projectId: string; signalIds: string[]; from: Date; to: Date },
): Promise<SignalHourCount[]> {
  if (scope.signalIds.length === 0) return [];
  const rows = await ch.read<{ signal_id: string; hour: string; count: number }>(scope.organizationId, `
      SELECT signal_id, toStartOfHour(created_at) AS hour, count() AS count
      FROM ${ch.database}.scores FINAL
      WHERE organization_id = {organizationId:String} AND project_id = {projectId:String}
        AND signal_id IN {signalIds:Array(String)}
        AND created_at >= {from:DateTime64(3, 'UTC')} AND created_at < {to:DateTime64(3, 'UTC')}
        AND drafted_at IS NULL AND NOT passed AND NOT errored
      GROUP BY signal_id, hour
      ORDER BY signal_id, hour`, {
      organizationId: scope.organizationId,
      projectId: scope.projectId,
      signalIds: scope.signalIds,
      from: clickHouseTime(scope.from),
      to: clickHouseTime(scope.to),
    });
  return rows.map((row) => ({ signalId: row.signal_id, hour: new Date(row.hour).toISOString(), count: row.count }));
}
