import type { Queryable, Sql } from "../../db/postgres";
import { badRequest, HttpError, notFound } from "../../lib/errors";
import { newId, slugify } from "../../lib/ids";
import { decodeCursor, encodeCursor } from "../../lib/pagination";
import { withFreeSlug } from "../../lib/slugs";
import { validateTraceFilters, type FilterSet } from "../traces/filters";
import type { ProjectRef } from "../traces/service";
import { closeIncident, incidentRowColumns, toIncident, toMonitorIncident, type IncidentRow } from "./incidents";
import type { AlertCondition, CreateMonitorBody, Incident, Monitor, MonitorConfig, MonitorIncident, MonitorMetric, MonitorTarget, TargetType, UpdateMonitorBody } from "./model";
import type { Stream } from "./measure";
import { validateSpanFilters } from "./span-filters";

export type SystemKind = "signal.new" | "signal.regressed" | "signal.escalating";

export interface MonitorRow {
  id: string;
  organization_id: string;
  project_id: string;
  slug: string;
  name: string;
  description: string;
  system_kind: SystemKind | null;
  target: MonitorTarget;
  trigger: "match" | "threshold" | "escalating";
  severity: Monitor["rule"]["severity"];
  config: MonitorConfig;
  state: Record<string, unknown>;
  muted_at: Date | null;
  deleted_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export const toMonitor = (row: MonitorRow): Monitor => ({
  id: row.id,
  organizationId: row.organization_id,
  projectId: row.project_id,
  slug: row.slug,
  name: row.name,
  description: row.description,
  system: row.system_kind !== null,
  target: row.target,
  rule: { trigger: row.trigger, config: row.config, severity: row.severity },
  mutedAt: row.muted_at?.toISOString() ?? null,
  deletedAt: row.deleted_at?.toISOString() ?? null,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
});

/** A timestamp as exact microseconds since the epoch, for keyset cursors (a JavaScript Date keeps milliseconds). */
const micros = (column: "updated_at" | "started_at") => `(extract(epoch from ${column}) * 1000000)::bigint`;

const severityNames = ["low", "medium", "high", "urgent"];
const forbidden = (message: string) => new HttpError(403, message);
const slugConstraint = "monitors_active_slug_key";

/** The system monitors every project has: notices about its signals. */
export const systemMonitors: { kind: SystemKind; slug: string; name: string; description: string; trigger: MonitorRow["trigger"] }[] = [
  { kind: "signal.new", slug: "new-signals", name: "New signals", description: "Opens an incident when a signal is first seen.", trigger: "match" },
  { kind: "signal.regressed", slug: "regressed-signals", name: "Regressed signals", description: "Opens an incident when a resolved signal recurs.", trigger: "match" },
  {
    kind: "signal.escalating",
    slug: "escalating-signals",
    name: "Escalating signals",
    description: "Opens an incident while a signal's hourly failures rise above its seasonal baseline (the project's escalation sensitivity).",
    trigger: "escalating",
  },
];

/**
 * Creates the missing system monitors of every active project (or of one), in one statement;
 * concurrent callers leave one of each.
 */
export async function ensureSystemMonitors(sql: Queryable, projectId?: string): Promise<void> {
  const kinds = systemMonitors.map((monitor) => ({
    ...monitor,
    config: monitor.trigger === "escalating" ? { metric: { kind: "count" }, condition: { trigger: "escalating", metric: { kind: "count" }, window: { minutes: 5 } } } : { metric: { kind: "count" } },
  }));
  await sql`
    INSERT INTO monitors (id, organization_id, project_id, slug, name, description, system_kind, target, trigger, severity, config)
    SELECT 'm' || substr(md5(random()::text || p.id || k.kind), 1, 23), p.organization_id, p.id, k.slug, k.name, k.description, k.kind,
      '{"type":"savedSearch","id":null,"kind":"savedSearch","stream":"traces","savedSearchId":null,"filterSet":{}}'::jsonb, k.trigger, 'high', k.config
    FROM projects p CROSS JOIN jsonb_to_recordset(${sql.json(kinds as never)}) AS k(kind text, slug text, name text, description text, trigger text, config jsonb)
    WHERE p.deleted_at IS NULL ${projectId ? sql`AND p.id = ${projectId}` : sql``}
      AND NOT EXISTS (SELECT 1 FROM monitors m WHERE m.project_id = p.id AND m.system_kind = k.kind AND m.deleted_at IS NULL)
    ON CONFLICT DO NOTHING`;
}

/**
 * The stream a target is evaluated over: a tool's spans (span filters), a session as a session unless the
 * target asks for its traces, and otherwise traces, or the sessions having a matching trace when the target
 * asks for `sessions`.
 */
export function streamOf(target: Pick<MonitorTarget, "type" | "stream">): Stream {
  if (target.type === "tool") return "spans";
  if (target.type === "session") return target.stream === "traces" ? "traces" : "sessions";
  return target.stream === "sessions" ? "sessions" : "traces";
}

const eq = (value: string) => [{ op: "eq", value }];

/** The persisted form of a requested target: its kind, stream, and the filters that single out its entity. */
async function normalizeTarget(
  target: MonitorTarget,
  findSearch: (slugOrId: string) => Promise<{ id: string; filters: FilterSet; query: string | null }>,
): Promise<MonitorTarget> {
  const extra = (target.filterSet ?? {}) as FilterSet;
  const stream = streamOf(target);
  const base = { type: target.type, id: target.id, kind: target.type, stream, savedSearchId: null as string | null };
  const needsId = (what: string) => {
    if (!target.id) throw badRequest(`target.id: the ${what} to watch is required`);
    return target.id;
  };
  let filterSet: FilterSet;
  let query = target.query?.trim() ? target.query : null;
  switch (target.type) {
    case "savedSearch": {
      if (target.id) {
        const search = await findSearch(target.id);
        return { ...base, id: search.id, savedSearchId: search.id, filterSet: search.filters as never, query: search.query };
      }
      filterSet = extra;
      break;
    }
    case "tool":
      filterSet = { ...extra, operation: eq("execute_tool"), toolName: eq(needsId("tool name")) };
      query = null;
      break;
    case "user":
      filterSet = { ...extra, userId: eq(needsId("user id")) };
      break;
    case "session":
      filterSet = { ...extra, sessionId: eq(needsId("session id")) };
      break;
  }
  if (stream === "spans") validateSpanFilters(filterSet);
  else validateTraceFilters(filterSet);
  return { ...base, filterSet: filterSet as never, query };
}

type ForTarget = { targetType?: string; filterSetContains: FilterSet };
type EntityType = Exclude<TargetType, "savedSearch">;
const identifyingFilter: Record<EntityType, string> = { tool: "toolName", user: "userId", session: "sessionId" };
const targetLabel: Record<EntityType, string> = { tool: "Tool", user: "User", session: "Session" };

/** The tool, user or session a for-target request names with one `eq` condition, if it names exactly one. */
function targetEntityOf(body: ForTarget): { type: EntityType; id: string } | null {
  const named = (Object.keys(identifyingFilter) as EntityType[]).filter((type) => {
    const conditions = body.filterSetContains[identifyingFilter[type]];
    return conditions?.length === 1 && conditions[0]!.op === "eq" && typeof conditions[0]!.value === "string" && conditions[0]!.value !== "";
  });
  const candidates = body.targetType ? named.filter((type) => type === body.targetType) : named;
  const type = candidates.length === 1 ? candidates[0]! : null;
  return type ? { type, id: body.filterSetContains[identifyingFilter[type]]![0]!.value as string } : null;
}

function checkCondition(condition: AlertCondition) {
  const threshold = condition.threshold;
  if (threshold?.mode === "multiplier") {
    const { lookback } = threshold.baseline;
    const hours = lookback.unit === "minutes" ? lookback.minutes / 60 : lookback.unit === "hours" ? lookback.hours : lookback.days * 24;
    if (hours > 28 * 24) throw badRequest("condition.threshold.baseline.lookback: at most 28 days");
  }
}

export class MonitorsService {
  constructor(
    private readonly sql: Sql,
    private readonly findSearch: (project: ProjectRef, slugOrId: string) => Promise<{ id: string; filters: FilterSet; query: string | null }>,
  ) {}

  async list(project: ProjectRef, query: { cursor?: string; limit?: number; search?: string }): Promise<{ items: Monitor[]; nextCursor: string | null; hasMore: boolean }> {
    await ensureSystemMonitors(this.sql, project.id);
    const limit = query.limit ?? 50;
    const after = query.cursor ? decodeCursor(query.cursor, 3) : null;
    const rows = await this.sql<(MonitorRow & { sort_system: number; sort_at: string })[]>`
      SELECT *, (system_kind IS NOT NULL)::int AS sort_system, ${this.sql.unsafe(micros("updated_at"))} AS sort_at FROM monitors
      WHERE project_id = ${project.id} AND organization_id = ${project.organizationId} AND deleted_at IS NULL
        ${query.search ? this.sql`AND name ILIKE ${`%${query.search.replace(/[\\%_]/g, "\\$&")}%`}` : this.sql``}
        ${after ? this.sql`AND ((system_kind IS NOT NULL)::int, ${this.sql.unsafe(micros("updated_at"))}, id) < (${Number(after[0])}, ${after[1]}::bigint, ${after[2]})` : this.sql``}
      ORDER BY sort_system DESC, updated_at DESC, id DESC
      LIMIT ${limit + 1}`;
    const hasMore = rows.length > limit;
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    return {
      items: page.map(toMonitor),
      nextCursor: hasMore && last ? encodeCursor([String(last.sort_system), last.sort_at, last.id]) : null,
      hasMore,
    };
  }

  async row(project: ProjectRef, slugOrId: string): Promise<MonitorRow> {
    const [row] = await this.sql<MonitorRow[]>`
      SELECT * FROM monitors
      WHERE project_id = ${project.id} AND organization_id = ${project.organizationId} AND deleted_at IS NULL AND (slug = ${slugOrId} OR id = ${slugOrId})
      ORDER BY id = ${slugOrId} DESC LIMIT 1`;
    if (!row) throw notFound("Monitor");
    return row;
  }

  async get(project: ProjectRef, slugOrId: string): Promise<Monitor> {
    await ensureSystemMonitors(this.sql, project.id);
    return toMonitor(await this.row(project, slugOrId));
  }

  async create(project: ProjectRef, body: CreateMonitorBody): Promise<Monitor> {
    const name = body.name.trim();
    if (!name) throw badRequest("name: must not be empty");
    const target = await normalizeTarget(body.target, (slugOrId) => this.findSearch(project, slugOrId));
    const condition = "condition" in body ? body.condition : undefined;
    if (condition) {
      if (condition.trigger !== body.trigger) throw badRequest(`condition.trigger: must be ${body.trigger}, as the monitor's trigger`);
      checkCondition(condition);
    }
    const metric: MonitorMetric = condition?.metric ?? body.metric ?? body.target.metric ?? { kind: "count" };
    const config: MonitorConfig = { filterSet: target.filterSet, query: target.query ?? null, metric, ...(condition ? { condition } : {}) };
    return withFreeSlug(slugify(name, "monitor"), slugConstraint, async (slug) => {
      const [row] = await this.sql<MonitorRow[]>`
        INSERT INTO monitors (id, organization_id, project_id, slug, name, description, target, trigger, severity, config)
        VALUES (${newId()}, ${project.organizationId}, ${project.id}, ${slug}, ${name}, ${body.description ?? ""},
          ${this.sql.json({ ...target, metric } as never)}, ${body.trigger}, ${body.severity}, ${this.sql.json(config as never)})
        RETURNING *`;
      return toMonitor(row!);
    });
  }

  async update(project: ProjectRef, slugOrId: string, body: UpdateMonitorBody): Promise<Monitor> {
    const current = await this.row(project, slugOrId);
    if (current.system_kind) throw forbidden("System monitors cannot be edited; they can be muted");
    const name = body.name === undefined ? current.name : body.name.trim();
    if (!name) throw badRequest("name: must not be empty");
    const keepSlug = slugify(name, "monitor") === slugify(current.name, "monitor");
    return withFreeSlug(keepSlug ? current.slug : slugify(name, "monitor"), slugConstraint, async (slug) => {
      const [row] = await this.sql<MonitorRow[]>`
        UPDATE monitors SET name = ${name}, slug = ${slug}, description = ${body.description ?? current.description},
          severity = ${body.severity ?? current.severity}, updated_at = now()
        WHERE id = ${current.id} RETURNING *`;
      return toMonitor(row!);
    });
  }

  /** Deletes a user monitor and closes its open incidents. */
  async remove(project: ProjectRef, slugOrId: string): Promise<void> {
    const current = await this.row(project, slugOrId);
    if (current.system_kind) throw forbidden("System monitors cannot be deleted; they can be muted");
    await this.sql.begin(async (tx) => {
      await tx`UPDATE monitors SET deleted_at = now(), updated_at = now() WHERE id = ${current.id}`;
      await tx`UPDATE incidents SET ended_at = now(), close_notice = CASE WHEN notified THEN 'pending' ELSE 'silent' END
        WHERE source_type = 'monitor' AND source_id = ${current.id} AND ended_at IS NULL`;
    });
  }

  async setMuted(project: ProjectRef, slugOrId: string, muted: boolean): Promise<Monitor> {
    const current = await this.row(project, slugOrId);
    const [row] = await this.sql<MonitorRow[]>`
      UPDATE monitors SET muted_at = ${muted ? this.sql`coalesce(muted_at, now())` : null}, updated_at = now() WHERE id = ${current.id} RETURNING *`;
    return toMonitor(row!);
  }

  /** Live monitors whose target has this type and whose filters contain these conditions. */
  private async findForTarget(project: ProjectRef, body: ForTarget): Promise<Monitor[]> {
    const rows = await this.sql<MonitorRow[]>`
      SELECT * FROM monitors
      WHERE project_id = ${project.id} AND organization_id = ${project.organizationId} AND deleted_at IS NULL
        ${body.targetType ? this.sql`AND target->>'type' = ${body.targetType}` : this.sql``}
        AND coalesce(target->'filterSet', '{}'::jsonb) @> ${this.sql.json(body.filterSetContains as never)}
      ORDER BY (system_kind IS NOT NULL) DESC, updated_at DESC, id DESC`;
    return rows.map(toMonitor);
  }

  /**
   * The monitors of a target, creating one when there is none and the filters single out a tool, a user
   * or a session: it watches the target's traces (a tool's spans) for an escalating count. Concurrent calls
   * for the same target create one monitor (a unique key on the target).
   */
  async forTarget(project: ProjectRef, body: ForTarget): Promise<Monitor[]> {
    await ensureSystemMonitors(this.sql, project.id);
    const found = await this.findForTarget(project, body);
    const entity = found.length === 0 ? targetEntityOf(body) : null;
    if (!entity) return found;
    const { [identifyingFilter[entity.type]]: _identity, ...extra } = body.filterSetContains;
    if (entity.type === "tool") delete extra.operation;
    // A session is one item of its own stream, so its escalating count is taken over its traces.
    const stream = entity.type === "session" ? ("traces" as const) : undefined;
    const target = await normalizeTarget({ type: entity.type, id: entity.id, stream, filterSet: extra as never }, (slugOrId) => this.findSearch(project, slugOrId));
    const metric: MonitorMetric = { kind: "count" };
    const condition: AlertCondition = { trigger: "escalating", metric, window: { minutes: 15 } };
    const config: MonitorConfig = { filterSet: target.filterSet, query: null, metric, condition };
    const name = `${targetLabel[entity.type]} ${entity.id}`.slice(0, 128);
    await withFreeSlug(slugify(name, "monitor"), slugConstraint, async (slug) => {
      await this.sql`
        INSERT INTO monitors (id, organization_id, project_id, slug, name, description, target, trigger, severity, config, target_key)
        VALUES (${newId()}, ${project.organizationId}, ${project.id}, ${slug}, ${name}, ${`Created for the ${entity.type} ${entity.id}.`},
          ${this.sql.json({ ...target, metric } as never)}, 'escalating', 'medium', ${this.sql.json(config as never)},
          ${entity.type} || ':' || ${this.sql.json(target.filterSet as never)}::jsonb::text)
        ON CONFLICT (project_id, target_key) WHERE target_key IS NOT NULL AND deleted_at IS NULL DO NOTHING`;
    });
    return this.findForTarget(project, body);
  }

  async monitorIncidents(project: ProjectRef, slugOrId: string, query: { cursor?: string; limit?: number }) {
    const monitor = await this.row(project, slugOrId);
    const limit = query.limit ?? 50;
    const after = query.cursor ? decodeCursor(query.cursor, 2) : null;
    const sourceType = monitor.system_kind ? "signal" : "monitor";
    const rows = await this.sql<(IncidentRow & { sort_at: string })[]>`
      SELECT ${this.sql.unsafe(incidentRowColumns)}, ${this.sql.unsafe(micros("started_at"))} AS sort_at FROM incidents
      WHERE project_id = ${project.id} AND ${monitor.system_kind ? this.sql`source_type = ${sourceType} AND kind = ${monitor.system_kind}` : this.sql`source_type = 'monitor' AND source_id = ${monitor.id}`}
        ${after ? this.sql`AND (${this.sql.unsafe(micros("started_at"))}, id) < (${after[0]}::bigint, ${after[1]})` : this.sql``}
      ORDER BY started_at DESC, id DESC LIMIT ${limit + 1}`;
    const hasMore = rows.length > limit;
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const items: MonitorIncident[] = page.map(toMonitorIncident);
    return { items, nextCursor: hasMore && last ? encodeCursor([last.sort_at, last.id]) : null, hasMore };
  }

  async incidents(
    project: ProjectRef,
    query: { fromIso?: string; toIso?: string; source_type?: string; source_id?: string; severities?: string | string[] },
  ): Promise<{ items: Incident[] }> {
    const instant = (field: string, value: string | undefined, fallback: number) => {
      if (value === undefined) return new Date(fallback);
      const time = Date.parse(value);
      if (Number.isNaN(time)) throw badRequest(`${field}: must be an ISO-8601 timestamp`);
      return new Date(time);
    };
    const to = instant("toIso", query.toIso, Date.now());
    const from = instant("fromIso", query.fromIso, to.getTime() - 7 * 24 * 3600_000);
    if (from > to) throw badRequest("fromIso: must not be after toIso");
    const severities = query.severities === undefined ? null : Array.isArray(query.severities) ? query.severities : [query.severities];
    const unknown = severities?.find((severity) => !severityNames.includes(severity));
    if (unknown !== undefined) throw badRequest(`severities: ${JSON.stringify(unknown)} is not one of ${severityNames.join(", ")}`);
    const rows = await this.sql<IncidentRow[]>`
      SELECT ${this.sql.unsafe(incidentRowColumns)} FROM incidents
      WHERE project_id = ${project.id} AND organization_id = ${project.organizationId}
        AND started_at <= ${to} AND (ended_at IS NULL OR ended_at >= ${from})
        ${query.source_type ? this.sql`AND source_type = ${query.source_type}` : this.sql``}
        ${query.source_id ? this.sql`AND source_id = ${query.source_id}` : this.sql``}
        ${severities ? this.sql`AND severity = ANY(${severities})` : this.sql``}
      ORDER BY started_at, id LIMIT 1000`;
    return { items: rows.map(toIncident) };
  }

  /** Closes an open incident (an already-closed one is returned as it is). */
  async resolveIncident(project: ProjectRef, incidentId: string): Promise<Incident> {
    const [row] = await this.sql<IncidentRow[]>`
      SELECT ${this.sql.unsafe(incidentRowColumns)} FROM incidents WHERE id = ${incidentId} AND project_id = ${project.id} AND organization_id = ${project.organizationId}`;
    if (!row) throw notFound("Incident");
    if (row.ended_at) return toIncident(row);
    return toIncident((await closeIncident(this.sql, row.id, new Date())) ?? row);
  }
}
