import type { Queryable } from "../../db/postgres";
import { newId } from "../../lib/ids";
import type { AlertCondition, Incident, MonitorIncident, Severity } from "./model";

export type IncidentKind = "monitor.match" | "monitor.threshold" | "monitor.escalating" | "signal.new" | "signal.regressed" | "signal.escalating";

export interface IncidentRow {
  id: string;
  organization_id: string;
  project_id: string;
  source_type: "monitor" | "signal";
  source_id: string;
  kind: IncidentKind;
  item_key: string | null;
  severity: Severity;
  condition: AlertCondition | null;
  details: Record<string, unknown>;
  started_at: Date;
  ended_at: Date | null;
  created_at: Date;
  open_notice: "pending" | "sent" | "silent";
  close_notice: "pending" | "sent" | "silent" | null;
  notified: boolean;
  mail_message_id: string | null;
}

export const incidentRowColumns =
  "id, organization_id, project_id, source_type, source_id, kind, item_key, severity, condition, details, started_at, ended_at, created_at, open_notice, close_notice, notified, mail_message_id";

export const toIncident = (row: IncidentRow): Incident => ({
  id: row.id,
  organizationId: row.organization_id,
  projectId: row.project_id,
  sourceType: row.source_type,
  sourceId: row.source_id,
  severity: row.severity,
  startedAt: row.started_at.toISOString(),
  endedAt: row.ended_at?.toISOString() ?? null,
  createdAt: row.created_at.toISOString(),
  condition: row.condition,
});

export const toMonitorIncident = (row: IncidentRow): MonitorIncident => ({ ...toIncident(row), notified: row.notified });

export interface OpenIncident {
  organizationId: string;
  projectId: string;
  sourceType: "monitor" | "signal";
  sourceId: string;
  kind: IncidentKind;
  severity: Severity;
  condition: AlertCondition | null;
  details: Record<string, unknown>;
  startedAt: Date;
  /** Match incidents: the item (trace or span) it is about; the incident is a point in time. */
  itemKey?: string;
  /** False when the source is muted or the project's switch for this kind is off: no notification. */
  notify: boolean;
}

/**
 * Opens an incident unless its source already has an open one of this kind (or, for a match, one
 * about this item): the unique indexes make this safe when several processes evaluate at once.
 * Returns the new row, or null when it already existed.
 */
export async function openIncident(sql: Queryable, incident: OpenIncident): Promise<IncidentRow | null> {
  const point = incident.itemKey !== undefined;
  const [row] = await sql<IncidentRow[]>`
    INSERT INTO incidents (id, organization_id, project_id, source_type, source_id, kind, item_key, severity, condition, details, started_at, ended_at, open_notice)
    VALUES (${newId()}, ${incident.organizationId}, ${incident.projectId}, ${incident.sourceType}, ${incident.sourceId}, ${incident.kind},
      ${incident.itemKey ?? null}, ${incident.severity}, ${incident.condition ? sql.json(incident.condition as never) : null}, ${sql.json(incident.details as never)},
      ${incident.startedAt}, ${point ? incident.startedAt : null}, ${incident.notify ? "pending" : "silent"})
    ON CONFLICT DO NOTHING
    RETURNING ${sql.unsafe(incidentRowColumns)}`;
  return row ?? null;
}

/** Closes an incident once; its closing is mailed in the thread of its opening when that was mailed (or is about to be). */
export async function closeIncident(sql: Queryable, id: string, at: Date, details: Record<string, unknown> = {}): Promise<IncidentRow | null> {
  const [row] = await sql<IncidentRow[]>`
    UPDATE incidents SET ended_at = greatest(${at}::timestamptz, started_at), details = details || ${sql.json({ closing: details } as never)},
      close_notice = CASE WHEN open_notice = 'silent' THEN 'silent' ELSE 'pending' END
    WHERE id = ${id} AND ended_at IS NULL
    RETURNING ${sql.unsafe(incidentRowColumns)}`;
  return row ?? null;
}

/** Closes the open incident of a source and kind, if any. */
export async function closeOpenIncident(
  sql: Queryable,
  source: { sourceType: "monitor" | "signal"; sourceId: string; kind: IncidentKind },
  at: Date,
  details: Record<string, unknown> = {},
): Promise<IncidentRow | null> {
  const [open] = await sql<{ id: string }[]>`
    SELECT id FROM incidents WHERE source_type = ${source.sourceType} AND source_id = ${source.sourceId} AND kind = ${source.kind} AND ended_at IS NULL AND item_key IS NULL`;
  return open ? closeIncident(sql, open.id, at, details) : null;
}
