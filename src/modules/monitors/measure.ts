import type { ClickHouseStore } from "../../db/clickhouse";
import { compileTraceFilters, validateTraceFilters, type FilterSet, type FilterSqlContext } from "../traces/filters";
import { QueryParams } from "../traces/params";
import { bindScope, traceRelationSql, type TraceColumn, type TraceScope } from "../traces/relation";
import type { TraceSearch } from "../traces/search";
import type { ProjectRef } from "../traces/service";
import type { MonitorMetric } from "./model";
import { compileSpanFilters, validateSpanFilters } from "./span-filters";

/**
 * Measuring monitor targets in ClickHouse, many monitors of a project per query: each monitor's
 * filters become one condition, rows are grouped by the monitors whose condition they meet, and
 * each group gets the aggregates of its monitor's metric. Traces are read from
 * the trace relation (roll-up), spans (tool targets) from `spans`, sessions from the `sessions`
 * roll-up joined to their traces: a session is in a monitor's stream when one of its traces meets
 * the monitor's (trace) filters, and it is measured as a whole, placed in time by its last activity.
 */

export type Stream = "traces" | "spans" | "sessions";

export interface Measure {
  key: string;
  stream: Stream;
  filters: FilterSet;
  query: string | null;
  metric: MonitorMetric;
}

/** The value of a metric over [from, to) (epoch ms); null when nothing was measured (no rows for an average). */
export interface WindowRequest {
  key: string;
  from: number;
  to: number;
}

interface StreamSql {
  time: string;
  error: string;
  cacheRead: string;
  cacheDenominator: string;
  duration: string;
  cost: string;
  tokens: string;
}

const streams: Record<Stream, StreamSql> = {
  traces: {
    time: "start_time",
    error: "error_count > 0",
    cacheRead: "tokens_cache_read",
    cacheDenominator: "(tokens_input + tokens_cache_read + tokens_cache_create)",
    duration: "(duration_ns / 1e6)",
    cost: "cost_total_microcents",
    tokens: "tokens_total",
  },
  spans: {
    time: "start_time",
    error: "status_code = 'error'",
    cacheRead: "tokens_cache_read",
    cacheDenominator: "(tokens_input + tokens_cache_read + tokens_cache_create)",
    duration: "(duration_ns / 1e6)",
    cost: "cost_total_microcents",
    tokens: "(tokens_input + tokens_output + tokens_cache_read + tokens_cache_create + tokens_reasoning)",
  },
  sessions: {
    time: "end_time",
    error: "error_count > 0",
    cacheRead: "tokens_cache_read",
    cacheDenominator: "(tokens_input + tokens_cache_read + tokens_cache_create)",
    duration: "duration_ms",
    cost: "cost_total_microcents",
    tokens: "tokens_total",
  },
};

/** What the sessions relation reads of each session's traces: the cache tokens the roll-up does not keep, and its latest trace. */
const sessionTraceColumns: TraceColumn[] = ["session_id", "end_time", "tokens_input", "tokens_cache_read", "tokens_cache_create"];

/** Relation columns a metric reads on the traces stream. */
function metricColumns(metric: MonitorMetric): TraceColumn[] {
  switch (metric.kind) {
    case "count":
      return [];
    case "errorRate":
      return ["error_count"];
    case "cacheHitRate":
      return ["tokens_input", "tokens_cache_read", "tokens_cache_create"];
    default:
      return [({ duration: "duration_ns", cost: "cost_total_microcents", tokens: "tokens_total" } as const)[metric.field]];
  }
}

/**
 * The aggregates a metric needs over the rows of a group that meet `when`, by name. The monitors of a
 * query share one set of aggregates per window and group by monitor (see `Measurer.grouped`), so the
 * statement grows with its monitors' conditions, not with conditions times metrics times windows.
 */
function metricAggregates(metric: MonitorMetric, stream: Stream, when: string): Record<string, string> {
  const s = streams[stream];
  switch (metric.kind) {
    case "count":
      return {};
    case "errorRate":
      return { errors: `countIf((${s.error}) AND ${when})` };
    case "cacheHitRate":
      return { cache_read: `toFloat64(sumIf(${s.cacheRead}, ${when}))`, cache_total: `toFloat64(sumIf(${s.cacheDenominator}, ${when}))` };
    default: {
      const value = `toFloat64(${s[metric.field]})`;
      return { [`${metric.kind}_${metric.field}`]: metric.kind === "median" ? `quantileExactIf(0.5)(${value}, ${when})` : `${metric.kind}If(${value}, ${when})` };
    }
  }
}

type GroupRow = Record<string, number>;

/** A metric's value from the aggregates named `<name>_<window>` of its group: without rows, a count or a sum is 0 and the rest is null. */
function metricValue(metric: MonitorMetric, row: GroupRow | undefined, window = 0): number | null {
  const get = (name: string) => Number(row?.[`${name}_${window}`] ?? 0);
  const rows = get("n");
  switch (metric.kind) {
    case "count":
      return rows;
    case "errorRate":
      return rows ? get("errors") / rows : null;
    case "cacheHitRate":
      return get("cache_total") ? get("cache_read") / get("cache_total") : null;
    default:
      return rows ? get(`${metric.kind}_${metric.field}`) : metric.kind === "sum" ? 0 : null;
  }
}

const measuresPerQuery = 100;

const msParam = (params: QueryParams, ms: number) => `fromUnixTimestamp64Milli(${params.bind(Math.floor(ms), "Int64")}, 'UTC')`;

interface CompiledGroup {
  params: QueryParams;
  /** Per measure key: its condition over the rows of `from`. */
  conditions: Map<string, string>;
  /** FROM clause: the relation, `spans` or the sessions relation, scoped to the project and starting at `since`. */
  from: string;
}

export class Measurer {
  constructor(
    private readonly ch: ClickHouseStore,
    private readonly search: TraceSearch,
  ) {}

  /** Reads take the store's per-query limits and the organization's share of the engine, as request reads do. */
  private rows<T>(project: ProjectRef, query: string, params: QueryParams): Promise<T[]> {
    return this.ch.read<T>(project.organizationId, query, params.values);
  }

  /**
   * The measures of one stream compiled over rows starting from `since` (epoch ms); with `touchedSince`,
   * only over items that gained rows ingested after it. `extra` adds trace relation columns.
   */
  private async compile(project: ProjectRef, stream: Stream, measures: Measure[], since: number, options: { touchedSince?: number; extra?: TraceColumn[] } = {}): Promise<CompiledGroup> {
    const params = new QueryParams();
    const conditions = new Map<string, string>();
    if (stream === "spans") {
      for (const measure of measures) conditions.set(measure.key, `(${compileSpanFilters(validateSpanFilters(measure.filters), params)})`);
      let from = `${this.ch.database}.spans WHERE organization_id = ${params.bind(project.organizationId, "String")} AND project_id = ${params.bind(project.id, "String")}
        AND start_time >= ${msParam(params, since)}`;
      if (options.touchedSince !== undefined) from += ` AND ingested_at > ${msParam(params, options.touchedSince)}`;
      return { params, conditions, from };
    }
    const scope: TraceScope = bindScope(params, this.ch.database, project.organizationId, project.id);
    const sinceSql = msParam(params, since);
    const tenant = `organization_id = ${scope.organizationId} AND project_id = ${scope.projectId}`;
    // A roll-up row holds spans ingested up to its `last_ingested_at`: the traces touched since then.
    const touched = options.touchedSince === undefined ? "" : ` AND last_ingested_at > ${msParam(params, options.touchedSince)}`;
    // Sessions active since `since` (and touched), with every trace of theirs (some may have started before).
    const sessionIds = `(SELECT session_id FROM ${this.ch.database}.sessions WHERE ${tenant} AND end_time >= ${sinceSql}${
      touched && ` AND session_id IN (SELECT assumeNotNull(session_id) FROM ${this.ch.database}.traces WHERE ${tenant}${touched} AND session_id IS NOT NULL)`
    })`;
    scope.traceIds =
      stream === "sessions"
        ? `(SELECT trace_id FROM ${this.ch.database}.traces WHERE ${tenant} AND session_id IN ${sessionIds})`
        : `(SELECT trace_id FROM ${this.ch.database}.traces WHERE ${tenant} AND start_time >= ${sinceSql}${touched})`;
    const columns = new Set<TraceColumn>(["start_time", ...(options.extra ?? []), ...(stream === "sessions" ? sessionTraceColumns : [])]);
    const context: FilterSqlContext = {
      params,
      database: this.ch.database,
      organizationId: scope.organizationId,
      projectId: scope.projectId,
      spanScope: "1",
      percentile: (expression, percentileColumns, fraction, window) =>
        `(SELECT quantileExact(${params.bind(fraction, "Float64")})(${expression}) FROM ${traceRelationSql(percentileColumns, { database: this.ch.database, organizationId: scope.organizationId, projectId: scope.projectId })} WHERE ${window})`,
    };
    for (const measure of measures) {
      const compiled = compileTraceFilters(validateTraceFilters(measure.filters), context);
      for (const column of compiled.columns) columns.add(column);
      if (stream === "traces") for (const column of metricColumns(measure.metric)) columns.add(column);
      let condition = `(${compiled.where})`;
      if (measure.query) condition += ` AND trace_id IN (SELECT trace_id FROM ${await this.search.relevanceSql(measure.query, scope, params)})`;
      conditions.set(measure.key, condition);
    }
    if (stream === "traces") return { params, conditions, from: `${traceRelationSql(columns, scope)} WHERE start_time >= ${sinceSql}` };

    // Sessions: the roll-up merged per session, joined to its traces grouped per session, where
    // `h<i>` says whether a trace of the session meets the i-th measure's condition.
    const keys = [...conditions.keys()];
    const hits = keys.map((key, index) => `countIf(${conditions.get(key)}) > 0 AS h${index}`);
    const traces = `SELECT assumeNotNull(session_id) AS t_session, argMax(trace_id, end_time) AS t_trace, sum(tokens_input) AS t_input,
        sum(tokens_cache_read) AS t_cache_read, sum(tokens_cache_create) AS t_cache_create, ${hits.join(", ")}
      FROM ${traceRelationSql(columns, scope)} WHERE session_id IS NOT NULL GROUP BY t_session`;
    const sessions = `SELECT session_id AS s_session, min(start_time) AS s_start, max(end_time) AS s_end, sum(error_count) AS s_errors,
        sum(tokens_total) AS s_tokens, sum(cost_total_microcents) AS s_cost
      FROM ${this.ch.database}.sessions WHERE ${tenant} AND session_id IN ${sessionIds} GROUP BY s_session`;
    const relation = `(SELECT s_session AS session_id, t_trace AS trace_id, s_start AS start_time, s_end AS end_time,
        (toUnixTimestamp64Milli(s_end) - toUnixTimestamp64Milli(s_start)) AS duration_ms, s_errors AS error_count, s_tokens AS tokens_total,
        s_cost AS cost_total_microcents, t_input AS tokens_input, t_cache_read AS tokens_cache_read, t_cache_create AS tokens_cache_create,
        ${keys.map((_, index) => `h${index}`).join(", ")}
      FROM (${sessions}) AS s INNER JOIN (${traces}) AS t ON s.s_session = t.t_session)`;
    keys.forEach((key, index) => conditions.set(key, `h${index}`));
    return { params, conditions, from: `${relation} WHERE end_time >= ${sinceSql}` };
  }

  /** Measures by stream, in chunks that keep one statement's SQL well under ClickHouse's query size limit. */
  private static byStream<M extends Measure>(measures: M[]): [Stream, M[]][] {
    const groups = new Map<Stream, M[]>();
    for (const measure of measures) groups.set(measure.stream, [...(groups.get(measure.stream) ?? []), measure]);
    const chunks: [Stream, M[]][] = [];
    for (const [stream, group] of groups) {
      for (let start = 0; start < group.length; start += measuresPerQuery) chunks.push([stream, group.slice(start, start + measuresPerQuery)]);
    }
    return chunks;
  }

  /**
   * One row per measure `g` (and `bucket`, when given) with the aggregates of its metric over each of
   * `windows`: each row of `compiled.from` is repeated for the measures whose condition it meets.
   */
  private async grouped(project: ProjectRef, stream: Stream, compiled: CompiledGroup, measures: Measure[], windows: string[], bucket?: string) {
    const aggregates = new Map<string, string>();
    windows.forEach((when, window) => {
      aggregates.set(`n_${window}`, `countIf(${when})`);
      for (const measure of measures) {
        for (const [name, sql] of Object.entries(metricAggregates(measure.metric, stream, when))) aggregates.set(`${name}_${window}`, sql);
      }
    });
    const hits = measures.map((measure) => `(${compiled.conditions.get(measure.key)})`);
    return this.rows<GroupRow & { g: number; bucket?: number }>(
      project,
      `SELECT g, ${bucket ? `${bucket} AS bucket, ` : ""}${[...aggregates].map(([name, sql]) => `${sql} AS ${name}`).join(", ")}
       FROM (SELECT *, [${hits.join(", ")}] AS hits FROM ${compiled.from})
       ARRAY JOIN arrayFilter((index, hit) -> hit, range(${measures.length}), hits) AS g
       GROUP BY g${bucket ? ", bucket" : ""}`,
      compiled.params,
    );
  }

  /** Each requested window's metric value, keyed `key|index` by the request's index. */
  async windows(project: ProjectRef, measures: Measure[], requests: WindowRequest[]): Promise<Map<string, number | null>> {
    const values = new Map<string, number | null>();
    if (!requests.length) return values;
    for (const [stream, group] of Measurer.byStream(measures)) {
      const position = new Map(group.map((measure, index) => [measure.key, index]));
      const mine = requests.map((request, index) => ({ request, index })).filter(({ request }) => position.has(request.key));
      if (!mine.length) continue;
      const compiled = await this.compile(project, stream, group, Math.min(...mine.map(({ request }) => request.from)));
      const time = streams[stream].time;
      // Monitors mostly share a few windows (the last hour, the one before): each distinct one is aggregated once.
      const windowIndex = new Map<string, number>();
      const windows: string[] = [];
      for (const { request } of mine) {
        const span = `${request.from}|${request.to}`;
        if (windowIndex.has(span)) continue;
        windowIndex.set(span, windows.length);
        windows.push(`(${time} >= ${msParam(compiled.params, request.from)} AND ${time} < ${msParam(compiled.params, request.to)})`);
      }
      const rows = await this.grouped(project, stream, compiled, group, windows);
      const byMeasure = new Map(rows.map((row) => [Number(row.g), row]));
      for (const { request, index } of mine) {
        const measure = position.get(request.key)!;
        values.set(`${request.key}|${index}`, metricValue(group[measure]!.metric, byMeasure.get(measure), windowIndex.get(`${request.from}|${request.to}`)));
      }
    }
    return values;
  }

  /**
   * Hourly series ending at `now`: `series[i]` is the metric over the hour ending i hours before
   * now; hours without rows are 0 (no data reads as nothing happened).
   */
  async hourly(project: ProjectRef, measures: Measure[], now: number, hours: number): Promise<Map<string, number[]>> {
    const series = new Map<string, number[]>(measures.map((measure) => [measure.key, new Array(hours).fill(0)]));
    for (const [stream, group] of Measurer.byStream(measures)) {
      const compiled = await this.compile(project, stream, group, now - hours * 3600_000);
      const time = streams[stream].time;
      const nowParam = compiled.params.bind(Math.floor(now), "Int64");
      compiled.from += ` AND ${time} < fromUnixTimestamp64Milli(${nowParam}, 'UTC')`;
      const bucket = `intDiv(${nowParam} - toUnixTimestamp64Milli(${time}), 3600000)`;
      for (const row of await this.grouped(project, stream, compiled, group, ["1"], bucket)) {
        const hour = Number(row.bucket);
        const measure = group[Number(row.g)]!;
        if (hour >= 0 && hour < hours) series.get(measure.key)![hour] = metricValue(measure.metric, row) ?? 0;
      }
    }
    return series;
  }

  /** When the project last ingested a span (epoch ms; 0 without any): every stream is fed by spans through the trace roll-up. */
  async lastIngestedAt(project: ProjectRef): Promise<number> {
    const params = new QueryParams();
    const [row] = await this.rows<{ at: number | null }>(
      project,
      `SELECT toUnixTimestamp64Milli(max(last_ingested_at)) AS at FROM ${this.ch.database}.traces
       WHERE organization_id = ${params.bind(project.organizationId, "String")} AND project_id = ${params.bind(project.id, "String")}`,
      params,
    );
    return Number(row?.at ?? 0);
  }

  /**
   * Items (traces, sessions, or spans for tool targets) touched since `touchedSince` that match each measure,
   * and that ended after `notBefore` of the measure (its monitor's creation): at most `limit` each.
   */
  async matches(
    project: ProjectRef,
    measures: (Measure & { notBefore: number })[],
    touchedSince: number,
    limit: number,
  ): Promise<Map<string, { itemKey: string; traceId: string; at: string }[]>> {
    const found = new Map<string, { itemKey: string; traceId: string; at: string }[]>(measures.map((measure) => [measure.key, []]));
    for (const [stream, group] of Measurer.byStream(measures)) {
      const since = Math.min(...group.map((measure) => measure.notBefore));
      const compiled = await this.compile(project, stream, group, since - 24 * 3600_000, { touchedSince, extra: stream === "traces" ? ["end_time"] : [] });
      const hits = group.map((measure) => {
        const notBefore = msParam(compiled.params, measure.notBefore);
        return `(${compiled.conditions.get(measure.key)} AND end_time >= ${notBefore})`;
      });
      const item = { traces: "trace_id", sessions: "session_id", spans: "span_id" }[stream];
      const rows = await this.rows<{ item: string; trace_id: string; at: string; hits: number[] }>(
        project,
        `SELECT item, trace_id, at, hits FROM (
           SELECT ${item} AS item, trace_id, start_time, toString(start_time) AS at, [${hits.join(", ")}] AS hits FROM ${compiled.from})
         WHERE has(hits, 1) ORDER BY start_time LIMIT ${compiled.params.bind(limit * group.length, "UInt32")}`,
        compiled.params,
      );
      for (const row of rows) {
        group.forEach((measure, index) => {
          const list = found.get(measure.key)!;
          if (row.hits[index] && list.length < limit) list.push({ itemKey: row.item, traceId: row.trace_id, at: `${row.at.replace(" ", "T")}Z` });
        });
      }
    }
    return found;
  }
}
